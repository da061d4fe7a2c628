/* trie.c - a model's vocabulary as a byte trie, built once and shared
 * read-only by every grammar state: tokens that share a prefix are checked
 * against the grammar together, so the mask costs one grammar step per trie
 * node rather than per byte of every token. */
#include "grammar/trie.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

typedef struct piece_ref {
    const char *s;
    uint32_t len;
    int32_t id;
} piece_ref;

static int cmp_piece(const void *a, const void *b) {
    const piece_ref *x = a, *y = b;
    uint32_t l = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->s, y->s, l);
    if (c) return c;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

void mf_grammar_vocab_free(mf_grammar_vocab *v) {
    if (!v) return;
    free(v->node);
    free(v->off);
    free(v->len);
    free(v->bytes);
    free(v->eog);
    free(v->big);
    free(v->sub);
    free(v->dfs_tok);
    free(v->has_piece);
    free(v->eog_list);
    free(v);
}

static mf_status read_pieces(const mf_model *m, mf_grammar_vocab *v) {
    size_t cap = 1 << 20, used = 0;
    v->bytes = malloc(cap);
    if (!v->bytes) return mf_err(MF_ERR_NOMEM, "out of memory");
    char buf[512];
    for (int32_t t = 0; t < v->n_vocab; t++) {
        v->eog[t] = mf_token_is_eog(m, t);
        int32_t n = v->eog[t] ? 0 : mf_token_to_piece(m, t, buf, (int32_t)sizeof buf, false);
        if (n < 0) return mf_err(MF_ERR_UNSUPPORTED, "grammar: token %d has a piece over %zu bytes", t, sizeof buf);
        if (used + (size_t)n > cap) {
            while (used + (size_t)n > cap) cap *= 2;
            char *q = realloc(v->bytes, cap);
            if (!q) return mf_err(MF_ERR_NOMEM, "out of memory");
            v->bytes = q;
        }
        memcpy(v->bytes + used, buf, (size_t)n);
        v->off[t] = (uint32_t)used;
        v->len[t] = (uint32_t)n;
        used += (size_t)n;
    }
    return MF_OK;
}

/* The trie while it is built: first child / next sibling links. */
typedef struct lnode {
    uint32_t child, sib;
    int32_t tok;
    uint8_t b;
} lnode;

static mf_status add_node(lnode **nodes, uint32_t *n_nodes, uint32_t *cap, uint8_t b, uint32_t *out) {
    if (*n_nodes == *cap) {
        uint32_t nc = *cap * 2;
        lnode *q = realloc(*nodes, sizeof *q * nc);
        if (!q) return mf_err(MF_ERR_NOMEM, "out of memory");
        *nodes = q;
        *cap = nc;
    }
    (*nodes)[*n_nodes] = (lnode){0, 0, -1, b};
    *out = (*n_nodes)++;
    return MF_OK;
}

/* Renumbers the linked trie into v->node with each node's children in one
 * block, the blocks in depth-first order: the mask's depth-first walk then
 * reads memory mostly forward. tok[id]: the first token ending at the node. */
static mf_status relayout(mf_grammar_vocab *v, const lnode *L, uint32_t n, int32_t *tok) {
    uint32_t(*stack)[2] = malloc(sizeof *stack * n); /* (old id, new id) */
    v->node = malloc(sizeof *v->node * n);
    if (!stack || !v->node) {
        free(stack);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    uint32_t sp = 0, next = 1;
    stack[sp][0] = 0;
    stack[sp++][1] = 0;
    while (sp) {
        sp--;
        const uint32_t o = stack[sp][0], id = stack[sp][1];
        tnode *t = &v->node[id];
        tok[id] = L[o].tok;
        t->b = L[o].b;
        t->first = next;
        t->n = 0;
        for (uint32_t c = L[o].child; c; c = L[c].sib) t->n++;
        next += t->n;
        /* the first child on top, so its block comes next */
        sp += t->n;
        uint32_t j = 0;
        for (uint32_t c = L[o].child; c; c = L[c].sib, j++) {
            stack[sp - 1 - j][0] = c;
            stack[sp - 1 - j][1] = t->first + j;
        }
    }
    v->n_nodes = n;
    free(stack);
    return MF_OK;
}

/* ---- the subtree table ---------------------------------------------------- */

#define SUB_MIN_TOKENS 2 /* tokens below the node; one is cheaper walked */

/* The UTF-8 state after byte b (0..3 continuation bytes still due), or -1.
 * Leads whose next byte is restricted (E0, ED, F0, F4) count as malformed,
 * so a subtree marked well-formed never needs those checks. */
static int utf8_next(int st, uint8_t b) {
    if (st) return (b & 0xC0) == 0x80 ? st - 1 : -1;
    if (b < 0x80) return 0;
    if (b >= 0xC2 && b <= 0xDF) return 1;
    if ((b >= 0xE1 && b <= 0xEC) || b == 0xEE || b == 0xEF) return 2;
    if (b >= 0xF1 && b <= 0xF3) return 3;
    return -1;
}

typedef struct subinfo {
    uint64_t ascii[2];
    uint32_t depth;
    bool nonascii;
    uint8_t ok; /* bit st: every path below is well-formed from UTF-8 state st */
} subinfo;

typedef struct subctx {
    mf_grammar_vocab *v;
    const int32_t *tok, *next_tok; /* per node its first token, per token the next with the same piece */
    uint32_t n_dfs, cap_sub;
    bool oom;
} subctx;

static subinfo sub_visit(subctx *x, uint32_t node) {
    mf_grammar_vocab *v = x->v;
    tnode *t = &v->node[node];
    const uint32_t tb = x->n_dfs;
    t->dfs = tb;
    for (int32_t k = x->tok[node]; k >= 0; k = x->next_tok[k]) v->dfs_tok[x->n_dfs++] = k;
    t->own = (uint8_t)(x->n_dfs - tb < 255 ? x->n_dfs - tb : 255);
    subinfo r = {{0, 0}, 0, false, 0xF};
    for (uint32_t c = t->first; c < t->first + t->n; c++) {
        const uint8_t b = v->node[c].b;
        subinfo ci = sub_visit(x, c);
        if (b < 0x80) r.ascii[b >> 6] |= 1ull << (b & 63);
        r.nonascii |= b >= 0x80 || ci.nonascii;
        r.ascii[0] |= ci.ascii[0];
        r.ascii[1] |= ci.ascii[1];
        uint32_t dc = ci.depth + ((b & 0xC0) != 0x80); /* a continuation byte starts no character */
        if (dc > r.depth) r.depth = dc;
        for (int st = 0; st < 4; st++) {
            int nx = utf8_next(st, b);
            if (nx < 0 || !(ci.ok >> nx & 1)) r.ok &= (uint8_t)~(1u << st);
        }
    }
    t->dend = x->n_dfs;
    if (x->n_dfs - tb >= SUB_MIN_TOKENS + (x->tok[node] >= 0) && r.ok && t->n) {
        if (v->n_sub == x->cap_sub) {
            uint32_t nc = x->cap_sub ? x->cap_sub * 2 : 1024;
            tsub *q = realloc(v->sub, sizeof *q * nc);
            if (!q) { x->oom = true; return r; }
            v->sub = q;
            x->cap_sub = nc;
        }
        v->sub[v->n_sub] = (tsub){{r.ascii[0], r.ascii[1]}, r.nonascii, r.ok, (uint16_t)r.depth};
        v->big[node] = ++v->n_sub;
    }
    return r;
}

static mf_status build_subs(mf_grammar_vocab *v, const int32_t *tok, const int32_t *next_tok) {
    const size_t nv = (size_t)(v->n_vocab > 0 ? v->n_vocab : 1);
    v->big = calloc(v->n_nodes, sizeof *v->big);
    v->dfs_tok = malloc(sizeof *v->dfs_tok * nv);
    v->has_piece = calloc((nv + 63) / 64, sizeof *v->has_piece);
    if (!v->big || !v->dfs_tok || !v->has_piece) return mf_err(MF_ERR_NOMEM, "out of memory");
    subctx x = {v, tok, next_tok, 0, 0, false};
    sub_visit(&x, 0); /* recursion as deep as the longest piece (at most 512 bytes) */
    if (x.oom) return mf_err(MF_ERR_NOMEM, "out of memory");
    v->n_dfs = x.n_dfs;
    for (uint32_t i = 0; i < v->n_dfs; i++) v->has_piece[v->dfs_tok[i] >> 6] |= 1ull << (v->dfs_tok[i] & 63);
    int32_t n_eog = 0;
    for (int32_t t = 0; t < v->n_vocab; t++) n_eog += v->eog[t];
    v->eog_list = malloc(sizeof *v->eog_list * (size_t)(n_eog ? n_eog : 1));
    if (!v->eog_list) return mf_err(MF_ERR_NOMEM, "out of memory");
    for (int32_t t = 0; t < v->n_vocab; t++)
        if (v->eog[t]) v->eog_list[v->n_eog++] = t;
    return MF_OK;
}

mf_status mf_grammar_vocab_new(const mf_model *model, mf_grammar_vocab **out) {
    if (!out || !model) return mf_err(MF_ERR_INVALID_ARG, "grammar vocab: no model");
    *out = NULL;
    mf_grammar_vocab *v = calloc(1, sizeof *v);
    if (!v) return mf_err(MF_ERR_NOMEM, "out of memory");
    v->n_vocab = mf_model_n_vocab(model);
    size_t nv = (size_t)(v->n_vocab > 0 ? v->n_vocab : 1);
    v->off = malloc(sizeof *v->off * nv);
    v->len = malloc(sizeof *v->len * nv);
    v->eog = calloc(nv, 1);
    int32_t *next_tok = malloc(sizeof *next_tok * nv), *tok = NULL;
    piece_ref *order = malloc(sizeof *order * nv);
    uint32_t *path = NULL, *last = NULL, cap = 1024, n_nodes = 0;
    lnode *L = malloc(sizeof *L * cap);
    mf_status st = !v->off || !v->len || !v->eog || !next_tok || !order || !L
                       ? mf_err(MF_ERR_NOMEM, "out of memory")
                       : read_pieces(model, v);
    int32_t n = 0;
    uint32_t maxlen = 0;
    for (int32_t t = 0; !st && t < v->n_vocab; t++) {
        next_tok[t] = -1;
        if (v->len[t]) order[n++] = (piece_ref){NULL, v->len[t], t}; /* empty pieces (control tokens) are never allowed */
        if (v->len[t] > maxlen) maxlen = v->len[t];
    }
    if (!st) {
        for (int32_t i = 0; i < n; i++) order[i].s = v->bytes + v->off[order[i].id];
        qsort(order, (size_t)n, sizeof *order, cmp_piece);
        path = malloc(sizeof *path * (maxlen + 1));
        if (!path) st = mf_err(MF_ERR_NOMEM, "out of memory");
    }
    if (!st) {
        L[0] = (lnode){0, 0, -1, 0};
        n_nodes = 1;
        path[0] = 0;
        v->max_depth = maxlen;
    }
    /* Sorted insertion: a new child is always its parent's last, and the
     * path of the previous piece gives the shared prefix's nodes. */
    uint32_t prev_len = 0;
    int32_t prev = -1;
    uint32_t last_cap = 0;
    for (int32_t i = 0; !st && i < n; i++) {
        int32_t t = order[i].id;
        const uint8_t *s = (const uint8_t *)v->bytes + v->off[t];
        uint32_t l = v->len[t], lcp = 0;
        if (prev >= 0) {
            const uint8_t *ps = (const uint8_t *)v->bytes + v->off[prev];
            while (lcp < l && lcp < prev_len && s[lcp] == ps[lcp]) lcp++;
        }
        for (uint32_t d = lcp; d < l && !st; d++) {
            uint32_t nn = 0;
            if ((st = add_node(&L, &n_nodes, &cap, s[d], &nn))) break;
            if (nn >= last_cap) {
                uint32_t nc = cap;
                uint32_t *q = realloc(last, sizeof *q * nc);
                if (!q) { st = mf_err(MF_ERR_NOMEM, "out of memory"); break; }
                memset(q + last_cap, 0, sizeof *q * (nc - last_cap));
                last = q;
                last_cap = nc;
            }
            uint32_t par = path[d];
            if (par >= last_cap || !last[par]) L[par].child = nn;
            else L[last[par]].sib = nn;
            last[par] = nn;
            path[d + 1] = nn;
        }
        if (st) break;
        lnode *e = &L[path[l]];
        next_tok[t] = e->tok;
        e->tok = t;
        prev = t;
        prev_len = l;
    }
    free(order);
    free(path);
    free(last);
    if (!st && !(tok = malloc(sizeof *tok * n_nodes))) st = mf_err(MF_ERR_NOMEM, "out of memory");
    if (!st) st = relayout(v, L, n_nodes, tok);
    free(L);
    if (!st) st = build_subs(v, tok, next_tok);
    free(tok);
    free(next_tok);
    if (st) {
        mf_grammar_vocab_free(v);
        return st;
    }
    *out = v;
    return MF_OK;
}
