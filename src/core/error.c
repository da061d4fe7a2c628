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
    if (n >= 0 && (size_t)n + 3 < sizeof g_msg) {
        /* append ": old", cut to what still fits */
        size_t at = (size_t)n, room = sizeof g_msg - at - 3, len = strlen(old);
        if (len > room) len = room;
        g_msg[at] = ':';
        g_msg[at + 1] = ' ';
        memcpy(g_msg + at + 2, old, len);
        g_msg[at + 2 + len] = 0;
    }
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
    case MF_ERR_ABORTED: return "aborted";
    }
    return "unknown status";
}
