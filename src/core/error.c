/* error.c - per-thread error message behind mf_last_error(). */
#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char g_msg[1024];

const char *mf_last_error(void) { return g_msg; }

void mf_err_clear(void) { g_msg[0] = 0; }

mf_status mf_err(mf_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    return code;
}

mf_status mf_err_prefix(mf_status code, const char *fmt, ...) {
    char old[sizeof g_msg];
    memcpy(old, g_msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g_msg, sizeof g_msg, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n + 2 < sizeof g_msg) /* the old message is cut to what still fits */
        snprintf(g_msg + n, sizeof g_msg - (size_t)n, ": %.*s", (int)(sizeof g_msg - (size_t)n - 3), old);
    return code;
}

const char *mf_status_name(mf_status s) {
    switch (s) {
    case MF_OK: return "ok";
    case MF_ERR_IO: return "I/O error";
    case MF_ERR_FORMAT: return "format error";
    case MF_ERR_UNSUPPORTED: return "unsupported";
    case MF_ERR_NOMEM: return "out of memory";
    case MF_ERR_INVALID_ARG: return "invalid argument";
    case MF_ERR_CONTEXT_FULL: return "context full";
    case MF_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}
