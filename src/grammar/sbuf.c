/* sbuf.c - the growing text buffer of sbuf.h. */
#include "sbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void g_sb_add(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *q = realloc(b->s, nc);
        if (!q) { b->oom = true; return; }
        b->s = q;
        b->cap = nc;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void g_sb_str(sbuf *b, const char *s) { g_sb_add(b, s, strlen(s)); }

void g_sb_fmt(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    char *tmp = malloc((size_t)n + 1);
    if (!tmp) { b->oom = true; return; }
    va_start(ap, fmt);
    vsnprintf(tmp, (size_t)n + 1, fmt, ap);
    va_end(ap);
    g_sb_add(b, tmp, (size_t)n);
    free(tmp);
}
