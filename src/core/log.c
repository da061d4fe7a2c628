/* log.c - the log callback (log.h). */
#include "core/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

static void to_stderr(mf_log_level level, const char *msg, void *ud) {
    (void)level;
    (void)ud;
    fputs(msg, stderr);
}

/* set once at start-up in practice; atomics keep a late change well defined */
static _Atomic(mf_log_fn) g_fn = to_stderr;
static _Atomic(void *) g_ud = NULL;

void mf_log_set(mf_log_fn fn, void *ud) {
    atomic_store(&g_ud, ud);
    atomic_store(&g_fn, fn ? fn : to_stderr);
}

void mf_log(mf_log_level level, const char *fmt, ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = strlen(buf);
    if (!len || buf[len - 1] != '\n') {
        buf[len] = '\n';
        buf[len + 1] = 0;
    }
    atomic_load(&g_fn)(level, buf, atomic_load(&g_ud));
}
