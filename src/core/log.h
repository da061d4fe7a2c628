/* log.h - the library's only way to say something: a process-wide callback
 * (mf_log_set in minfer.h) that defaults to stderr. Nothing in src/ writes to
 * stderr itself, so a server or a binding can route or silence every line. */
#ifndef MF_CORE_LOG_H
#define MF_CORE_LOG_H

#include "core/error.h"
#include "minfer.h"

/* One line (a trailing newline is added when missing). */
void mf_log(mf_log_level level, const char *fmt, ...) MF_PRINTF(2, 3);

#endif
