/* grammar.h - the compiled form of a GBNF grammar and the stack machine that
 * matches it, shared by the parser (parse.c), the checks (analyze.c), the
 * matcher (stacks.c) and the token mask (mask.c).
 *
 * A grammar is a flat array of elements. Rule r occupies
 * elem[rule_start[r] ..] as its alternatives, each ended by G_ALT, the last
 * by G_END. A parse position is an index into elem; a stack is a linked list
 * of positions (top = the next element to match, below it the return
 * positions of the rules being expanded). */
#ifndef MF_GRAMMAR_H
#define MF_GRAMMAR_H

#include <stdbool.h>
#include <stdint.h>

#include "minfer.h"

enum { G_END, G_ALT, G_REF, G_CHR, G_CLS, G_ANY };

typedef struct gelem {
    uint8_t type;
    uint32_t v; /* G_REF: rule; G_CHR: code point; G_CLS: class index */
} gelem;

typedef struct gclass {
    uint32_t first, n; /* ranges[first .. first+n) */
    bool neg;
} gclass;

struct mf_grammar {
    gelem *elem;
    uint32_t n_elem;
    uint32_t *rule_start;  /* per rule: first element */
    uint32_t *alt_first;   /* per rule: index into alts of its first alternative */
    uint32_t *alts;        /* start positions of alternatives, rule after rule */
    uint32_t n_rules;
    char **rule_name;
    gclass *cls;
    uint32_t (*ranges)[2];
    uint32_t root;
};

/* Limits that keep a hostile grammar from exhausting memory or time. */
#define G_MAX_ELEMS     (1u << 21)
#define G_MAX_REPEAT    10000u
#define G_MAX_STACKS    1024
#define G_MAX_NODES     (1u << 22)
#define G_MAX_EXPAND    (1u << 16) /* expansion steps for one code point */

/* analyze.c: refuses left recursion; message names the rules. */
mf_status g_check_left_recursion(const mf_grammar *g);

/* ---- stacks.c ----------------------------------------------------------- */

typedef struct gnode {
    uint32_t pos, parent; /* parent 0 = bottom of the stack */
    uint64_t h;           /* hash of the whole stack from here down (equal stacks, equal h) */
} gnode;

/* A pool of stack nodes; node 0 is unused so 0 can mean "empty". */
typedef struct gpool {
    gnode *n;
    uint32_t len, cap;
} gpool;

/* A set of stacks: what the grammar can be matching now. */
typedef struct gset {
    uint32_t *s;  /* node indices (tops); never 0 */
    uint32_t n, cap;
    bool done;    /* the empty stack is in the set: the grammar may end here */
} gset;

/* A UTF-8 sequence started but not finished by the bytes seen so far. */
typedef struct gutf8 {
    uint32_t val;
    uint8_t need; /* continuation bytes still to come; 0 = none pending */
    uint8_t len;  /* bytes of the whole sequence (to refuse overlong forms) */
} gutf8;

void g_set_free(gset *s);
/* The stacks at the start of the root rule. */
mf_status g_initial(const mf_grammar *g, gpool *p, gset *out);
/* out = the stacks after reading code point c from in (out is cleared). */
mf_status g_advance(const mf_grammar *g, gpool *p, const gset *in, uint32_t c, gset *out);
/* out = in advanced by one byte (UTF-8 decoded across calls through *u). */
mf_status g_step_byte(const mf_grammar *g, gpool *p, const gset *in, const gutf8 *u, uint8_t b, gset *out,
                      gutf8 *uo);
/* A hash of the set (order-independent) with the pending UTF-8 state. */
uint64_t g_set_hash(const gpool *p, const gset *s, const gutf8 *u);
/* Copies the stacks of s into a fresh pool (drops the garbage). */
mf_status g_compact(gpool *p, gset *s);

#endif
