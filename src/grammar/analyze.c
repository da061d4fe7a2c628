/* analyze.c - refuses left recursion. A rule that can reach itself without
 * consuming a character (directly, `a ::= a "x"`, or through rules that may
 * match the empty string, `a ::= b? a`) would make the stack machine expand
 * forever, so it is an error that names the cycle. */
#include "grammar/grammar.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* nullable[r]: rule r can match the empty string (fixpoint over the rules). */
static void compute_nullable(const mf_grammar *g, bool *nullable) {
    bool changed = true;
    while (changed) {
        changed = false;
        for (uint32_t r = 0; r < g->n_rules; r++) {
            if (nullable[r]) continue;
            for (uint32_t a = g->alt_first[r]; a < g->alt_first[r + 1] && !nullable[r]; a++) {
                uint32_t p = g->alts[a];
                while (g->elem[p].type == G_REF && nullable[g->elem[p].v]) p++;
                if (g->elem[p].type == G_END || g->elem[p].type == G_ALT) nullable[r] = changed = true;
            }
        }
    }
}

/* Chains of rules each starting with the next one, longer than this, are
 * refused: they bound the recursion here and in the matcher's expansion. */
#define G_MAX_LEFT_DEPTH 4096
#define G_TOO_DEEP (UINT32_MAX - 1)

typedef struct walk {
    const mf_grammar *g;
    const bool *nullable;
    uint8_t *color; /* 0 new, 1 on the path, 2 done */
    uint32_t *path;
    uint32_t depth;
} walk;

/* Depth-first over "r may start with rule s"; returns the rule closing a cycle or UINT32_MAX. */
static uint32_t visit(walk *w, uint32_t r) {
    if (w->depth >= G_MAX_LEFT_DEPTH) return G_TOO_DEEP;
    w->color[r] = 1;
    w->path[w->depth++] = r;
    const mf_grammar *g = w->g;
    for (uint32_t a = g->alt_first[r]; a < g->alt_first[r + 1]; a++) {
        for (uint32_t p = g->alts[a]; g->elem[p].type == G_REF; p++) {
            uint32_t s = g->elem[p].v;
            if (w->color[s] == 1) return s;
            if (w->color[s] == 0) {
                if (w->depth >= G_MAX_LEFT_DEPTH) return G_TOO_DEEP;
                uint32_t c = visit(w, s);
                if (c != UINT32_MAX) return c;
            }
            if (!w->nullable[s]) break;
        }
    }
    w->color[r] = 2;
    w->depth--;
    return UINT32_MAX;
}

mf_status g_check_left_recursion(const mf_grammar *g) {
    bool *nullable = calloc(g->n_rules, sizeof *nullable);
    uint8_t *color = calloc(g->n_rules, 1);
    uint32_t *path = malloc(sizeof *path * g->n_rules);
    if (!nullable || !color || !path) {
        free(nullable);
        free(color);
        free(path);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    compute_nullable(g, nullable);
    walk w = {g, nullable, color, path, 0};
    mf_status st = MF_OK;
    for (uint32_t r = 0; r < g->n_rules && !st; r++) {
        if (color[r]) continue;
        w.depth = 0;
        uint32_t c = visit(&w, r);
        if (c == UINT32_MAX) continue;
        if (c == G_TOO_DEEP) {
            st = mf_err(MF_ERR_FORMAT, "grammar: more than %d rules each starting with the next", G_MAX_LEFT_DEPTH);
            break;
        }
        char chain[512];
        size_t n = 0;
        uint32_t i = 0;
        while (i < w.depth && path[i] != c) i++;
        for (; i < w.depth && n < sizeof chain - 80; i++)
            n += (size_t)snprintf(chain + n, sizeof chain - n, "%s -> ", g->rule_name[path[i]]);
        snprintf(chain + n, sizeof chain - n, "%s", g->rule_name[c]);
        st = mf_err(MF_ERR_FORMAT, "grammar: left recursion in rule '%s' (%s): it can reach itself without matching a character",
                    g->rule_name[c], chain);
    }
    free(nullable);
    free(color);
    free(path);
    return st;
}
