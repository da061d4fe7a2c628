/* error.h - errors are values: set the calling thread's message, return a code. */
#ifndef MF_CORE_ERROR_H
#define MF_CORE_ERROR_H

#include "minfer.h"

#if defined(__GNUC__)
#define MF_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define MF_PRINTF(a, b)
#endif

/* Formats the thread's error message and returns `code`, so a failure is
 * one line: `return mf_err(MF_ERR_FORMAT, "tensor %s: ...", name);` */
mf_status mf_err(mf_status code, const char *fmt, ...) MF_PRINTF(2, 3);
/* Prefixes the current message ("loading x.gguf: <old message>"). */
mf_status mf_err_prefix(mf_status code, const char *fmt, ...) MF_PRINTF(2, 3);
void mf_err_clear(void);

#endif
