/* ast.h - the syntax tree the parser builds and the evaluator walks. */
#ifndef MF_CHAT_AST_H
#define MF_CHAT_AST_H

#include "chat/lexer.h"

typedef enum jnode_kind {
    /* expressions */
    N_CONST,      /* cval */
    N_NAME,       /* str */
    N_LIST,       /* list = items */
    N_TUPLE,      /* list = items */
    N_DICT,       /* list = keys, list2 = values */
    N_GETATTR,    /* a.str */
    N_GETITEM,    /* a[b] */
    N_SLICE,      /* a:b:c (each may be NULL); only as a GETITEM index */
    N_CALL,       /* a(list): list holds positional args and N_KWARG nodes */
    N_KWARG,      /* str=a */
    N_FILTER,     /* a|str(list); a is NULL in filter blocks */
    N_TEST,       /* a is str(list) */
    N_NOT, N_NEG, N_POS, /* unary on a */
    N_BINOP,      /* a op b: + - * / // % ** ~ */
    N_COMPARE,    /* a then list of N_CMPOP */
    N_CMPOP,      /* op a (op: OP_EQ.. or CMP_IN / CMP_NOTIN) */
    N_AND, N_OR,  /* a, b */
    N_COND,       /* a if b else c (c may be NULL) */
    N_NSREF,      /* target ns.attr in {% set %}: str = name, str2 = attr */
    /* statements */
    S_TEXT,       /* str */
    S_OUTPUT,     /* {{ a }} */
    S_IF,         /* if a: list else list2 */
    S_FOR,        /* for target in a [if b]: list else list2 */
    S_SET,        /* set target = a */
    S_SETBLOCK,   /* set target | filters(list2) : body list */
    S_MACRO,      /* macro str(params: list2 of N_NAME with optional default a): body list */
    S_CALLBLOCK,  /* call(params list2) a: body list */
    S_FILTERBLOCK,/* filter chain list2: body list */
    S_WITH,       /* with targets (list2 of S_SET): body list */
    S_BREAK, S_CONTINUE,
} jnode_kind;

enum { CMP_IN = 100, CMP_NOTIN = 101 };
/* S_MACRO / S_CALLBLOCK op bits */
enum { MACRO_VARARGS = 1, MACRO_KWARGS = 2 };

typedef struct jnode jnode;
typedef struct jnodes {
    jnode **v;
    size_t n, cap;
} jnodes;

struct jnode {
    uint8_t kind;
    uint8_t op;
    bool soft;          /* N_FILTER/N_TEST: unknown name is a runtime, not a parse, error */
    int line;
    jval cval;
    const char *str, *str2;
    jnode *a, *b, *c, *target;
    jnodes list, list2;
    void *impl;         /* N_FILTER/N_TEST: resolved builtin (NULL = unknown) */
};

/* Parses a whole template into a list of statements. Raises
 * TemplateSyntaxError / TemplateAssertionError through a->fail. */
jnodes jparse(jarena *a, const char *src, size_t n);

#endif
