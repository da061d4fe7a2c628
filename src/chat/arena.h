/* arena.h - per-render memory arena and error unwinding for the chat-template interpreter.
 *
 * Every object a parse or a render creates (tokens, AST nodes, values, output
 * text) is carved from one arena and freed at once when the render ends. That
 * lets an error anywhere deep in the evaluator unwind with longjmp straight to
 * the entry point (jfail): nothing needs freeing on the way, so the many
 * failure paths of an interpreter stay one line each and cannot leak. The arena
 * also enforces a byte budget, which bounds what a hostile template can make
 * us allocate. */
#ifndef MF_CHAT_ARENA_H
#define MF_CHAT_ARENA_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

/* Where a failure unwinds to, and what it said. `type` is a Python/Jinja
 * exception class name ("TemplateSyntaxError", "UndefinedError", ...), kept
 * in the message so callers (and the golden tests) can tell failures apart. */
typedef struct jfail {
    jmp_buf jb;
    mf_status code;
    char msg[1024];
} jfail;

_Noreturn void jraise(jfail *f, mf_status code, int line, const char *type, const char *fmt, ...)
    MF_PRINTF(5, 6);

typedef struct jchunk jchunk;

typedef struct jarena {
    jchunk *head;      /* chunk new small allocations come from */
    jchunk *big;       /* list of single-allocation chunks */
    size_t total;      /* bytes obtained from malloc */
    size_t limit;      /* budget; exceeding it raises a LimitError */
    jfail *fail;
    void *last;        /* most recent allocation in head (may grow in place) */
} jarena;

void jarena_init(jarena *a, jfail *fail, size_t limit);
void jarena_free(jarena *a);
/* Zeroed memory, 16-byte aligned; never returns NULL (raises instead). */
void *ja_alloc(jarena *a, size_t n);
/* Grow an allocation (in place when it was the last one). */
void *ja_grow(jarena *a, void *p, size_t old_n, size_t new_n);
char *ja_strndup(jarena *a, const char *s, size_t n);

/* Growable byte string inside the arena. */
typedef struct jsb {
    jarena *a;
    char *p;
    size_t n, cap;
} jsb;

void sb_init(jsb *b, jarena *a);
void sb_put(jsb *b, const char *s, size_t n);
void sb_puts(jsb *b, const char *s);
void sb_putc(jsb *b, char c);
void sb_printf(jsb *b, const char *fmt, ...) MF_PRINTF(2, 3);
/* Append code point cp as UTF-8. */
void sb_utf8(jsb *b, uint32_t cp);

#endif
