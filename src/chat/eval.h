/* eval.h - the evaluator's state and the interface between it and the builtins
 * (filters, tests, methods, global functions). */
#ifndef MF_CHAT_EVAL_H
#define MF_CHAT_EVAL_H

#include "chat/ast.h"

typedef struct jscope {
    struct jscope *parent;
    jdict vars;
} jscope;

/* Arguments of a call: positional, then keyword. */
typedef struct jargs {
    jval *pos;
    size_t npos;
    const char **kwn;
    jval *kwv;
    size_t nkw;
} jargs;

typedef struct jctx jctx;
/* One signature for filters (self = the filtered value), tests (returns a
 * bool value), methods (self = receiver) and global functions (self unused). */
typedef jval (*jbuiltin_fn)(jctx *c, jval self, jargs *args);

typedef struct jbuiltin {
    const char *name;
    jbuiltin_fn fn;
} jbuiltin;

enum { F_BUILTIN = 0, F_METHOD, F_MACRO, F_CALLER, F_LOOP_CYCLE, F_LOOP_CHANGED };

typedef struct jfunc {
    int kind;
    const char *name;
    jval self;          /* F_METHOD receiver; F_LOOP_*: the loop */
    jbuiltin_fn fn;
    jnode *node;        /* F_MACRO: S_MACRO; F_CALLER: S_CALLBLOCK */
    jscope *closure;    /* scope the macro was defined in */
    jval caller;        /* F_MACRO invoked from {% call %}: the caller() function */
} jfunc;

typedef struct jloop {
    jlist *items;
    size_t index0;
    int depth;
    jval last_changed;  /* loop.changed() state */
    bool has_changed;
} jloop;

#define JCTX_MAX_CALL_DEPTH 64
#define JCTX_MAX_STEPS 10000000ull

struct jctx {
    jarena *a;
    jfail *fail;
    jscope *globals;
    jsb *out;
    int line;
    int call_depth;
    uint64_t steps, max_steps;
    int64_t now;        /* strftime_now's clock (unix seconds, UTC); 0 = local time now */
    int loop_ctl;       /* pending {% break %} (1) / {% continue %} (2) */
};

/* Raise an error of a Python class at the current line. */
_Noreturn void jerr(jctx *c, const char *type, const char *fmt, ...) MF_PRINTF(3, 4);
/* Using an undefined value: UndefinedError (or SecurityError) with its message. */
_Noreturn void jerr_undef(jctx *c, jval u);

/* Builtin tables (builtins.c). known: the name is a Jinja builtin minfer does
 * not implement (an error at render time, not parse time). */
const jbuiltin *jfilter_find(const char *name, bool *known);
const jbuiltin *jtest_find(const char *name, bool *known);
/* Attribute of a value that names a method (str.strip, dict.items, ...), or
 * JV_UNDEF when there is none; sandbox-refused methods give an unsafe undefined. */
jval jmethod_get(jctx *c, jval obj, const char *name);
/* Global functions (range, namespace, raise_exception, strftime_now, dict, ...). */
void jglobals_install(jctx *c, jscope *s);

/* Evaluator entry points used by builtins. */
jval jcall(jctx *c, jval fn, jargs *args);
jval jgetattr(jctx *c, jval obj, const char *name);
jval jgetitem(jctx *c, jval obj, jval key);
/* Items of an iterable (list, tuple, dict keys, string characters, generator
 * (consumed), undefined = empty); raises TypeError for the rest. */
jlist *jiter(jctx *c, jval v);
jval jstr_val(jctx *c, jval v);  /* str(v); raises nothing (Undefined -> "") */
void jstep(jctx *c);            /* count work; raises LimitError past the budget */

/* Renders a parsed template with variables already set in c->globals. */
void jrender(jctx *c, jnodes *body);

#endif
