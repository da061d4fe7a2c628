/* arena.c - see arena.h: bump allocator with a byte budget, string builder, error unwinding. */
#include "chat/arena.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE (64 * 1024)
#define BIG_ALLOC (16 * 1024)

struct jchunk {
    jchunk *next;
    size_t cap, used;
    _Alignas(16) unsigned char data[];
};

_Noreturn void jraise(jfail *f, mf_status code, int line, const char *type, const char *fmt, ...) {
    int n = 0;
    if (line > 0) n = snprintf(f->msg, sizeof f->msg, "line %d: ", line);
    if (n < 0 || (size_t)n >= sizeof f->msg) n = 0;
    int m = snprintf(f->msg + n, sizeof f->msg - (size_t)n, "%s: ", type);
    if (m > 0 && (size_t)(n + m) < sizeof f->msg) n += m;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg + n, sizeof f->msg - (size_t)n, fmt, ap);
    va_end(ap);
    f->code = code;
    longjmp(f->jb, 1);
}

void jarena_init(jarena *a, jfail *fail, size_t limit) {
    memset(a, 0, sizeof *a);
    a->fail = fail;
    a->limit = limit;
}

void jarena_free(jarena *a) {
    for (jchunk *c = a->head; c;) {
        jchunk *n = c->next;
        free(c);
        c = n;
    }
    for (jchunk *c = a->big; c;) {
        jchunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = a->big = NULL;
    a->total = 0;
    a->last = NULL;
}

static jchunk *new_chunk(jarena *a, size_t cap) {
    if (cap > a->limit || a->total > a->limit - cap)
        jraise(a->fail, MF_ERR_FORMAT, 0, "LimitError", "template needs more than %zu MiB of memory", a->limit >> 20);
    jchunk *c = malloc(sizeof *c + cap);
    if (!c) jraise(a->fail, MF_ERR_NOMEM, 0, "MemoryError", "out of memory (%zu bytes)", cap);
    c->cap = cap;
    c->used = 0;
    c->next = NULL;
    a->total += cap;
    return c;
}

static void *alloc_raw(jarena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (n >= BIG_ALLOC) {
        jchunk *c = new_chunk(a, n);
        c->used = n;
        c->next = a->big;
        a->big = c;
        return c->data;
    }
    if (!a->head || a->head->cap - a->head->used < n) {
        jchunk *c = new_chunk(a, CHUNK_SIZE);
        c->next = a->head;
        a->head = c;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    a->last = p;
    return p;
}

void *ja_alloc(jarena *a, size_t n) {
    if (n > SIZE_MAX / 2) jraise(a->fail, MF_ERR_FORMAT, 0, "LimitError", "allocation too large");
    void *p = alloc_raw(a, n);
    memset(p, 0, n);
    return p;
}

void *ja_grow(jarena *a, void *p, size_t old_n, size_t new_n) {
    if (new_n > SIZE_MAX / 2) jraise(a->fail, MF_ERR_FORMAT, 0, "LimitError", "allocation too large");
    if (new_n <= old_n) return p;
    if (p && p == a->last && a->head) {
        /* Extend in place: the common case of one string builder appending. */
        size_t off = (size_t)((unsigned char *)p - a->head->data);
        size_t need = (new_n + 15) & ~(size_t)15;
        if (off + need <= a->head->cap) {
            a->head->used = off + need;
            return p;
        }
    }
    void *q = alloc_raw(a, new_n);
    if (old_n) memcpy(q, p, old_n);
    return q;
}

char *ja_strndup(jarena *a, const char *s, size_t n) {
    char *p = alloc_raw(a, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void sb_init(jsb *b, jarena *a) {
    b->a = a;
    b->p = NULL;
    b->n = b->cap = 0;
}

static void sb_reserve(jsb *b, size_t extra) {
    if (b->cap - b->n > extra) return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap - b->n <= extra) {
        if (cap > SIZE_MAX / 4) jraise(b->a->fail, MF_ERR_FORMAT, 0, "LimitError", "string too long");
        cap *= 2;
    }
    b->p = ja_grow(b->a, b->p, b->cap, cap);
    b->cap = cap;
}

void sb_put(jsb *b, const char *s, size_t n) {
    if (!n) return;
    sb_reserve(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void sb_puts(jsb *b, const char *s) { sb_put(b, s, strlen(s)); }

void sb_putc(jsb *b, char c) { sb_put(b, &c, 1); }

void sb_printf(jsb *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        sb_put(b, tmp, (size_t)n);
        return;
    }
    sb_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)n;
}

void sb_utf8(jsb *b, uint32_t cp) {
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    sb_put(b, u, n);
}
