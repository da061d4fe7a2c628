/* stacks.c - matching a grammar one code point at a time over a set of
 * stacks of parse positions (the technique of llama.cpp's grammar engine).
 *
 * Stacks are linked lists in a pool, so advancing shares the unchanged rest
 * of each stack instead of copying it. Every set of stacks is "expanded":
 * each top is a terminal (a character, class or any-char); a rule reference
 * on top is replaced by its alternatives. The set is bounded (G_MAX_STACKS),
 * as are the pool and the expansion work, so an ambiguous or hostile grammar
 * fails with a message instead of eating memory or time. */
#include "grammar/grammar.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

typedef struct work {
    uint32_t pos, parent, self; /* self: an existing node for (pos, parent), or 0 */
} work;

/* One work list per thread would be cleaner but the sets are small: a
 * fixed-size local array covers every rule with up to this many alternatives
 * pending at once, beyond which the grammar is refused. */
#define G_MAX_WORK 4096

void g_set_free(gset *s) {
    free(s->s);
    memset(s, 0, sizeof *s);
}

static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t g_set_hash(const gpool *p, const gset *s, const gutf8 *u) {
    uint64_t h = 0;
    for (uint32_t i = 0; i < s->n; i++) h += mix64(p->n[s->s[i]].h + 0x9e3779b97f4a7c15ull);
    return mix64(h ^ ((uint64_t)s->done << 63) ^ ((uint64_t)u->val << 8) ^ ((uint64_t)u->need << 4) ^ u->len);
}

static mf_status new_node(gpool *p, uint32_t pos, uint32_t parent, uint32_t *out) {
    if (p->len == 0) p->len = 1; /* node 0 means "none" */
    if (p->len >= p->cap) {
        if (p->cap >= G_MAX_NODES)
            return mf_err(MF_ERR_FORMAT, "grammar: the parse stacks grew past %u nodes (grammar too ambiguous)",
                          G_MAX_NODES);
        uint32_t nc = p->cap ? p->cap * 2 : 1024;
        gnode *n = realloc(p->n, sizeof *n * nc);
        if (!n) return mf_err(MF_ERR_NOMEM, "out of memory");
        p->n = n;
        p->cap = nc;
    }
    p->n[p->len] = (gnode){pos, parent, mix64(((uint64_t)pos << 32 | 0x5bd1e995u) ^ (parent ? p->n[parent].h : 0))};
    *out = p->len++;
    return MF_OK;
}

static bool stack_eq(const gpool *p, uint32_t a, uint32_t b) {
    if (a != b && a && b && p->n[a].h != p->n[b].h) return false;
    while (a != b) {
        if (!a || !b || p->n[a].pos != p->n[b].pos) return false;
        a = p->n[a].parent;
        b = p->n[b].parent;
    }
    return true;
}

static mf_status set_add(const gpool *p, gset *s, uint32_t node) {
    for (uint32_t i = 0; i < s->n; i++)
        if (stack_eq(p, s->s[i], node)) return MF_OK;
    if (s->n >= G_MAX_STACKS)
        return mf_err(MF_ERR_FORMAT, "grammar: more than %d parse stacks at once (grammar too ambiguous)", G_MAX_STACKS);
    if (s->n == s->cap) {
        uint32_t nc = s->cap ? s->cap * 2 : 8;
        uint32_t *q = realloc(s->s, sizeof *q * nc);
        if (!q) return mf_err(MF_ERR_NOMEM, "out of memory");
        s->s = q;
        s->cap = nc;
    }
    s->s[s->n++] = node;
    return MF_OK;
}

static bool at_end(const mf_grammar *g, uint32_t pos) { return g->elem[pos].type <= G_ALT; }

/* Adds to out every stack reachable from (pos, parent) whose top is a terminal. */
static mf_status expand(const mf_grammar *g, gpool *p, uint32_t pos, uint32_t parent, uint32_t self, gset *out) {
    work w[G_MAX_WORK];
    uint32_t nw = 0, steps = 0;
    w[nw++] = (work){pos, parent, self};
    mf_status st;
    while (nw) {
        work x = w[--nw];
        for (;;) {
            if (++steps > G_MAX_EXPAND)
                return mf_err(MF_ERR_FORMAT, "grammar: expanding the rules took more than %u steps", G_MAX_EXPAND);
            const gelem *e = &g->elem[x.pos];
            if (e->type <= G_ALT) { /* the rule is complete: return to the position below */
                if (!x.parent) {
                    out->done = true;
                    break;
                }
                x.self = x.parent;
                x.pos = p->n[x.self].pos;
                x.parent = p->n[x.self].parent;
                continue;
            }
            if (e->type != G_REF) {
                if (!x.self && (st = new_node(p, x.pos, x.parent, &x.self))) return st;
                if ((st = set_add(p, out, x.self))) return st;
                break;
            }
            uint32_t base = x.parent; /* a reference last in its alternative returns straight to the parent */
            if (!at_end(g, x.pos + 1) && (st = new_node(p, x.pos + 1, x.parent, &base))) return st;
            uint32_t r = e->v;
            if (nw + (g->alt_first[r + 1] - g->alt_first[r]) > G_MAX_WORK)
                return mf_err(MF_ERR_FORMAT, "grammar: more than %d alternatives pending at once", G_MAX_WORK);
            for (uint32_t a = g->alt_first[r + 1]; a-- > g->alt_first[r];) w[nw++] = (work){g->alts[a], base, 0};
            break;
        }
    }
    return MF_OK;
}

mf_status g_initial(const mf_grammar *g, gpool *p, gset *out) {
    out->n = 0;
    out->done = false;
    /* a root reference expands to the root's alternatives with nothing below */
    uint32_t r = g->root;
    for (uint32_t a = g->alt_first[r]; a < g->alt_first[r + 1]; a++) {
        mf_status st = expand(g, p, g->alts[a], 0, 0, out);
        if (st) return st;
    }
    return MF_OK;
}

static bool match_cp(const mf_grammar *g, const gelem *e, uint32_t c) {
    switch (e->type) {
    case G_CHR: return e->v == c;
    case G_ANY: return true;
    case G_CLS: {
        const gclass *k = &g->cls[e->v];
        for (uint32_t i = 0; i < k->n; i++) {
            const uint32_t *r = g->ranges[k->first + i];
            if (c >= r[0] && c <= r[1]) return !k->neg;
        }
        return k->neg;
    }
    default: return false;
    }
}

/* Could the element match some code point in [lo, hi]? (A negated class is
 * answered generously: only a single range covering all of [lo, hi] says no.) */
static bool match_range(const mf_grammar *g, const gelem *e, uint32_t lo, uint32_t hi) {
    switch (e->type) {
    case G_CHR: return e->v >= lo && e->v <= hi;
    case G_ANY: return true;
    case G_CLS: {
        const gclass *k = &g->cls[e->v];
        for (uint32_t i = 0; i < k->n; i++) {
            const uint32_t *r = g->ranges[k->first + i];
            if (k->neg && r[0] <= lo && r[1] >= hi) return false;
            if (!k->neg && r[0] <= hi && r[1] >= lo) return true;
        }
        return k->neg;
    }
    default: return false;
    }
}

mf_status g_advance(const mf_grammar *g, gpool *p, const gset *in, uint32_t c, gset *out) {
    out->n = 0;
    out->done = false;
    for (uint32_t i = 0; i < in->n; i++) {
        const gnode nd = p->n[in->s[i]];
        if (!match_cp(g, &g->elem[nd.pos], c)) continue;
        mf_status st = expand(g, p, nd.pos + 1, nd.parent, 0, out);
        if (st) return st;
    }
    return MF_OK;
}

static mf_status filter_partial(const mf_grammar *g, const gpool *p, const gset *in, uint32_t lo, uint32_t hi,
                                gset *out) {
    out->n = 0;
    out->done = false;
    for (uint32_t i = 0; i < in->n; i++) {
        if (!match_range(g, &g->elem[p->n[in->s[i]].pos], lo, hi)) continue;
        mf_status st = set_add(p, out, in->s[i]);
        if (st) return st;
    }
    return MF_OK;
}

static mf_status reject(gset *out, gutf8 *uo) {
    out->n = 0;
    out->done = false;
    *uo = (gutf8){0, 0, 0};
    return MF_OK;
}

mf_status g_step_byte(const mf_grammar *g, gpool *p, const gset *in, const gutf8 *u, uint8_t b, gset *out,
                      gutf8 *uo) {
    /* the smallest code point each sequence length may encode */
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t val;
    uint8_t need, len;
    if (!u->need) {
        if (b < 0x80) {
            *uo = (gutf8){0, 0, 0};
            return g_advance(g, p, in, b, out);
        }
        need = b >= 0xC2 && b < 0xE0 ? 1 : b >= 0xE0 && b < 0xF0 ? 2 : b >= 0xF0 && b < 0xF5 ? 3 : 0;
        if (!need) return reject(out, uo);
        val = b & (0x3Fu >> need);
        len = (uint8_t)(need + 1);
    } else {
        if ((b & 0xC0) != 0x80) return reject(out, uo);
        val = u->val << 6 | (b & 0x3Fu);
        need = (uint8_t)(u->need - 1);
        len = u->len;
    }
    /* the code points this prefix can still become */
    uint32_t lo = val << (6 * need), hi = lo | ((1u << (6 * need)) - 1);
    if (lo < min_cp[len]) lo = min_cp[len];
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi) return reject(out, uo); /* overlong or beyond U+10FFFF */
    if (!need) {
        if (val >= 0xD800 && val < 0xE000) return reject(out, uo);
        *uo = (gutf8){0, 0, 0};
        return g_advance(g, p, in, val, out);
    }
    *uo = (gutf8){val, need, len};
    return filter_partial(g, p, in, lo, hi, out);
}

mf_status g_compact(gpool *p, gset *s) {
    uint32_t *map = calloc(p->len ? p->len : 1, sizeof *map);
    gpool q = {0};
    if (!map) return mf_err(MF_ERR_NOMEM, "out of memory");
    mf_status st = MF_OK;
    uint32_t chain[256];
    for (uint32_t i = 0; i < s->n && !st; i++) {
        /* copy the chain bottom-up, in pieces of up to 256 unmapped nodes */
        while (!map[s->s[i]] && !st) {
            uint32_t n = 0, x = s->s[i];
            while (x && !map[x] && n < 256) {
                chain[n++] = x;
                x = p->n[x].parent;
            }
            if (x && !map[x]) { /* deeper than 256: map the lower part first */
                uint32_t y = x;
                while (p->n[y].parent && !map[p->n[y].parent]) y = p->n[y].parent;
                st = new_node(&q, p->n[y].pos, p->n[y].parent ? map[p->n[y].parent] : 0, &map[y]);
                continue;
            }
            while (n-- && !st) {
                uint32_t o = chain[n], par = p->n[o].parent;
                st = new_node(&q, p->n[o].pos, par ? map[par] : 0, &map[o]);
            }
        }
        if (!st) s->s[i] = map[s->s[i]];
    }
    free(map);
    if (st) {
        free(q.n);
        return st;
    }
    free(p->n);
    *p = q;
    return MF_OK;
}
