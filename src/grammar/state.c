/* state.c - one sequence's position in a grammar: the set of parse stacks,
 * the token mask at that position, and advancing by an accepted token.
 *
 * The mask is computed by walking the vocabulary trie depth-first, carrying
 * the set of stacks after each prefix; a subtree is cut as soon as no stack
 * survives. Masks are cached per state (keyed by the stacks themselves), so a
 * position the sequence has been in before (inside a string, after a comma at
 * the same depth) costs a lookup and the pass over the logits. */
#include "grammar/grammar.h"
#include "grammar/state.h"
#include "grammar/trie.h"
#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Masks kept per state: as many as fit in G_CACHE_BYTES (220 for a
 * 151,936-token vocabulary), between 16 and 256. */
#define G_CACHE_BYTES (4u << 20)
#define G_CACHE_MIN 16
#define G_CACHE_MAX 256

/* Within one mask computation every distinct set of stacks met in the walk
 * gets a record with its transitions by byte, filled as they are first
 * needed: inside a string every character leads back to the same set, so
 * most trie nodes cost one table lookup instead of a grammar step. */
#define G_RECS      2048        /* records per computation (partial UTF-8 states count); then direct steps */
#define G_REC_SLOTS 4096        /* hash slots over the records: at least twice G_RECS */
#define G_REC_TOPS  (1u << 16)  /* stack tops the records hold */
#define T_UNKNOWN   (-2)
#define T_DEAD      (-1)
#define T_NOREC     (-3)        /* record_of: none left */

_Static_assert(G_REC_SLOTS >= 2 * G_RECS, "the record table must keep free slots");

typedef struct srec {
    uint64_t h;
    uint32_t off, n; /* tops[off .. off + n) */
    gutf8 u;
    bool done;
    int32_t mbt;        /* the record every character >= U+0080 leads to: T_UNKNOWN, T_DEAD (none, or not one) */
    int32_t tgt;        /* the record the shortcut expects every byte to lead to (T_UNKNOWN: not chosen) */
    uint64_t to_tgt[2]; /* ASCII bytes known to lead to tgt */
    uint64_t known[2];  /* ASCII bytes whose answer is known */
    int16_t next[256];  /* record after each byte, T_UNKNOWN or T_DEAD */
} srec;

typedef struct centry {
    uint64_t hash, stamp;
    uint32_t *key, klen;
    uint64_t *bits;
} centry;

struct mf_grammar_state {
    const mf_grammar *g;
    const mf_grammar_vocab *v;
    gpool pool;
    gset cur, tmp, save; /* save: the tops before an accept, restored if it fails */
    gutf8 u;
    gset *lvl;          /* the trie walk's set at each depth */
    uint32_t n_lvl;
    uint32_t *key, kcap, klen;
    centry *cache;
    uint32_t n_cache;
    uint64_t clock;
    uint32_t n_words;
    mf_grammar_stats stats;
    srec *rec;
    uint32_t *slot;  /* record id + 1, 0 = empty */
    uint32_t *tops;
    uint32_t n_rec, tops_n;
    gset chk, chk2;  /* scratch of the subtree shortcut */
    uint32_t (*run)[2]; /* the mask being computed: allowed ranges of dfs_tok, ascending, apart */
    uint32_t n_run, cap_run;
    uint32_t *reps;  /* one code point >= U+0080 per stretch the grammar treats alike */
    int32_t n_reps;  /* -1: not computed yet; -2: too many (no shortcut for non-ASCII) */
};

void mf_grammar_state_free(mf_grammar_state *s) {
    if (!s) return;
    free(s->pool.n);
    g_set_free(&s->cur);
    g_set_free(&s->tmp);
    g_set_free(&s->save);
    for (uint32_t i = 0; i < s->n_lvl; i++) g_set_free(&s->lvl[i]);
    free(s->lvl);
    free(s->key);
    free(s->rec);
    free(s->slot);
    free(s->tops);
    g_set_free(&s->chk);
    g_set_free(&s->chk2);
    free(s->reps);
    free(s->run);
    for (uint32_t i = 0; s->cache && i < s->n_cache; i++) {
        free(s->cache[i].key);
        free(s->cache[i].bits);
    }
    free(s->cache);
    free(s);
}

mf_status mf_grammar_state_reset(mf_grammar_state *s) {
    s->pool.len = 1;
    s->u = (gutf8){0, 0, 0};
    return g_initial(s->g, &s->pool, &s->cur);
}

mf_status mf_grammar_state_new(const mf_grammar *g, const mf_grammar_vocab *v, mf_grammar_state **out) {
    if (!out || !g) return mf_err(MF_ERR_INVALID_ARG, "grammar state: no grammar");
    *out = NULL;
    mf_grammar_state *s = calloc(1, sizeof *s);
    if (!s) return mf_err(MF_ERR_NOMEM, "out of memory");
    s->g = g;
    s->v = v;
    s->n_reps = -1;
    if (v) {
        s->n_lvl = v->max_depth + 2;
        s->lvl = calloc(s->n_lvl, sizeof *s->lvl);
        s->n_words = (uint32_t)((v->n_vocab + 63) / 64);
        s->rec = malloc(sizeof *s->rec * G_RECS);
        s->slot = malloc(sizeof *s->slot * G_REC_SLOTS);
        s->tops = malloc(sizeof *s->tops * G_REC_TOPS);
        uint32_t nc = G_CACHE_BYTES / (s->n_words * 8u);
        s->n_cache = nc < G_CACHE_MIN ? G_CACHE_MIN : nc > G_CACHE_MAX ? G_CACHE_MAX : nc;
        s->cache = calloc(s->n_cache, sizeof *s->cache);
        if (!s->lvl || !s->rec || !s->slot || !s->tops || !s->cache) {
            mf_grammar_state_free(s);
            return mf_err(MF_ERR_NOMEM, "out of memory");
        }
    }
    mf_status st = mf_grammar_state_reset(s);
    if (st) {
        mf_grammar_state_free(s);
        return st;
    }
    *out = s;
    return MF_OK;
}

bool mf_grammar_done(const mf_grammar_state *s) { return s->cur.done && !s->u.need; }

mf_grammar_stats mf_grammar_state_stats(const mf_grammar_state *s) { return s->stats; }

/* Advances the state by the bytes; when they are rejected (MF_ERR_FORMAT,
 * no message set) or on any error the state is as it was before. */
static mf_status advance_bytes(mf_grammar_state *s, const char *b, size_t n) {
    /* the pool only grows until g_compact, so saving the tops is enough */
    if (s->save.cap < s->cur.n) {
        uint32_t *q = realloc(s->save.s, sizeof *q * s->cur.n);
        if (!q) return mf_err(MF_ERR_NOMEM, "out of memory");
        s->save.s = q;
        s->save.cap = s->cur.n;
    }
    if (s->cur.n) memcpy(s->save.s, s->cur.s, sizeof *s->save.s * s->cur.n);
    s->save.n = s->cur.n;
    s->save.done = s->cur.done;
    const gutf8 u0 = s->u;
    mf_status st = MF_OK;
    for (size_t i = 0; i < n && !st; i++) {
        gutf8 uo;
        st = g_step_byte(s->g, &s->pool, &s->cur, &s->u, (uint8_t)b[i], &s->tmp, &uo);
        if (st) break;
        gset t = s->cur;
        s->cur = s->tmp;
        s->tmp = t;
        s->u = uo;
        if (!s->cur.n && !(s->cur.done && i + 1 == n)) st = MF_ERR_FORMAT; /* the caller words the message */
    }
    if (!st) st = g_compact(&s->pool, &s->cur);
    if (st) { /* put the saved tops back */
        if (s->cur.cap < s->save.n) {
            gset t = s->cur;
            s->cur = s->save;
            s->save = t;
        } else {
            if (s->save.n) memcpy(s->cur.s, s->save.s, sizeof *s->cur.s * s->save.n);
            s->cur.n = s->save.n;
            s->cur.done = s->save.done;
        }
        s->u = u0;
    }
    return st;
}

mf_status mf_grammar_accept_text(mf_grammar_state *s, const char *text, size_t len) {
    mf_err_clear();
    mf_status st = advance_bytes(s, text, len);
    if (st == MF_ERR_FORMAT && !*mf_last_error())
        return mf_err(MF_ERR_FORMAT, "grammar: the text is not allowed here");
    return st;
}

mf_status mf_grammar_accept(mf_grammar_state *s, mf_token tok) {
    const mf_grammar_vocab *v = s->v;
    if (!v) return mf_err(MF_ERR_INVALID_ARG, "grammar: the state has no vocabulary");
    if (tok < 0 || tok >= v->n_vocab) return mf_err(MF_ERR_INVALID_ARG, "grammar: token %d out of range", tok);
    if (v->eog[tok]) {
        if (mf_grammar_done(s)) return MF_OK;
        return mf_err(MF_ERR_FORMAT, "grammar: end of generation (token %d) before the grammar is complete", tok);
    }
    if (!v->len[tok]) return mf_err(MF_ERR_FORMAT, "grammar: token %d has no text and is never allowed", tok);
    mf_err_clear();
    mf_status st = advance_bytes(s, v->bytes + v->off[tok], v->len[tok]);
    if (st == MF_ERR_FORMAT && !*mf_last_error())
        return mf_err(MF_ERR_FORMAT, "grammar: token %d is not allowed here", tok);
    return st;
}

/* ---- the mask ----------------------------------------------------------- */

static mf_status key_push(mf_grammar_state *s, uint32_t x) {
    if (s->klen == s->kcap) {
        uint32_t nc = s->kcap ? s->kcap * 2 : 256;
        uint32_t *q = realloc(s->key, sizeof *q * nc);
        if (!q) return mf_err(MF_ERR_NOMEM, "out of memory");
        s->key = q;
        s->kcap = nc;
    }
    s->key[s->klen++] = x;
    return MF_OK;
}

/* The cache key: every stack's positions top to bottom, the end flag, the
 * pending UTF-8 bytes. */
static mf_status build_key(mf_grammar_state *s, uint64_t *hash) {
    s->klen = 0;
    mf_status st = MF_OK;
    for (uint32_t i = 0; i < s->cur.n && !st; i++) {
        for (uint32_t x = s->cur.s[i]; x && !st; x = s->pool.n[x].parent) st = key_push(s, s->pool.n[x].pos);
        if (!st) st = key_push(s, UINT32_MAX);
    }
    if (!st) st = key_push(s, s->cur.done);
    if (!st) st = key_push(s, s->u.val);
    if (!st) st = key_push(s, s->u.need);
    if (!st) st = key_push(s, s->u.len);
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < s->klen; i++) h = (h ^ s->key[i]) * 1099511628211ull;
    *hash = h;
    return st;
}

/* The walk goes through the trie in the order of the depth-first token
 * list, so what it allows is a rising sequence of ranges of that list:
 * they are noted (merging touching ones) and turned into bits at the end,
 * from whichever side is shorter. Setting bits token by token as the walk
 * went was half of a first mask inside a string (150,000 allowed tokens,
 * each a dependent load through a per-token chain). */
static mf_status allow_push(mf_grammar_state *s, uint32_t b, uint32_t e) {
    if (s->n_run == s->cap_run) {
        uint32_t nc = s->cap_run ? s->cap_run * 2 : 1024;
        uint32_t(*q)[2] = realloc(s->run, sizeof *q * nc);
        if (!q) return mf_err(MF_ERR_NOMEM, "out of memory");
        s->run = q;
        s->cap_run = nc;
    }
    s->run[s->n_run][0] = b;
    s->run[s->n_run++][1] = e;
    return MF_OK;
}

static inline mf_status allow(mf_grammar_state *s, uint32_t b, uint32_t e) {
    if (b >= e) return MF_OK;
    if (s->n_run && s->run[s->n_run - 1][1] >= b) { /* touching or overlapping the last (a shortcut over a node) */
        if (e > s->run[s->n_run - 1][1]) s->run[s->n_run - 1][1] = e;
        return MF_OK;
    }
    return allow_push(s, b, e);
}

static inline mf_status allow_own(mf_grammar_state *s, const tnode *c) {
    return allow(s, c->dfs, tnode_own_end(s->v, c));
}

/* The runs as bits: set the allowed tokens, or when they are the majority
 * start from every token with a piece and clear the ones between the runs. */
static void runs_to_bits(const mf_grammar_state *s, uint64_t *bits) {
    const mf_grammar_vocab *v = s->v;
    const int32_t *dt = v->dfs_tok;
    uint32_t allowed = 0;
    for (uint32_t i = 0; i < s->n_run; i++) allowed += s->run[i][1] - s->run[i][0];
    if (allowed <= v->n_dfs / 2) {
        memset(bits, 0, sizeof *bits * s->n_words);
        for (uint32_t i = 0; i < s->n_run; i++)
            for (uint32_t k = s->run[i][0]; k < s->run[i][1]; k++) bits[dt[k] >> 6] |= 1ull << (dt[k] & 63);
        return;
    }
    memcpy(bits, v->has_piece, sizeof *bits * s->n_words);
    uint32_t at = 0;
    for (uint32_t i = 0; i <= s->n_run; i++) {
        const uint32_t end = i < s->n_run ? s->run[i][0] : v->n_dfs;
        for (uint32_t k = at; k < end; k++) bits[dt[k] >> 6] &= ~(1ull << (dt[k] & 63));
        if (i < s->n_run) at = s->run[i][1];
    }
}

/* Without records (they ran out): step every byte, free what a subtree made. */
static mf_status walk_direct(mf_grammar_state *s, uint32_t node, uint32_t d, const gset *in, gutf8 u) {
    const mf_grammar_vocab *v = s->v;
    gset *o = &s->lvl[d + 1];
    const tnode *t = &v->node[node];
    for (uint32_t c = t->first; c < t->first + t->n; c++) {
        const uint32_t mark = s->pool.len;
        gutf8 uo;
        mf_status st = g_step_byte(s->g, &s->pool, in, &u, v->node[c].b, o, &uo);
        if (st) return st;
        s->stats.trie_nodes++;
        if (o->n || (o->done && !uo.need)) {
            if ((st = allow_own(s, &v->node[c]))) return st;
            if (o->n && v->node[c].n && (st = walk_direct(s, c, d + 1, o, uo))) return st;
        }
        s->pool.len = mark;
    }
    return MF_OK;
}

/* The record of set o (a new one if needed); T_NOREC when they ran out. */
static int32_t record_of(mf_grammar_state *s, const gset *o, gutf8 uo) {
    uint64_t h = g_set_hash(&s->pool, o, &uo);
    uint32_t i = (uint32_t)h & (G_REC_SLOTS - 1);
    for (; s->slot[i]; i = (i + 1) & (G_REC_SLOTS - 1)) {
        srec *r = &s->rec[s->slot[i] - 1];
        if (r->h == h && r->n == o->n && r->done == o->done) return (int32_t)s->slot[i] - 1;
    }
    if (s->n_rec >= G_RECS || s->tops_n + o->n > G_REC_TOPS) return T_NOREC;
    srec *r = &s->rec[s->n_rec];
    r->h = h;
    r->off = s->tops_n;
    r->n = o->n;
    r->u = uo;
    r->done = o->done;
    r->mbt = r->tgt = T_UNKNOWN;
    r->to_tgt[0] = r->to_tgt[1] = r->known[0] = r->known[1] = 0;
    for (int b = 0; b < 256; b++) r->next[b] = T_UNKNOWN;
    if (o->n) memcpy(s->tops + s->tops_n, o->s, sizeof *o->s * o->n);
    s->tops_n += o->n;
    s->slot[i] = ++s->n_rec;
    return (int32_t)s->n_rec - 1;
}

/* ---- the subtree shortcut ----------------------------------------------
 * Inside a string nearly every token is allowed, and walking the 300,000
 * trie nodes below took 7-12 ms. When every byte of a subtree leads a record
 * to one next record, that one likewise, for as many characters as the
 * subtree holds (subtree_free), all of its tokens are allowed: they are set
 * from the trie's depth-first token list without the walk. */

#define G_MAX_REPS 256

static int cmp_u32(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* The code points >= U+0080 where some character element of the grammar
 * changes its answer; between two of them every element answers alike, so
 * one code point stands for the stretch. */
static mf_status make_reps(mf_grammar_state *s) {
    const mf_grammar *g = s->g;
    uint32_t cap = 64, n = 0, *p = malloc(sizeof *p * cap);
    if (!p) return mf_err(MF_ERR_NOMEM, "out of memory");
#define ADD(x)                                                                             \
    do {                                                                                   \
        uint32_t x_ = (x);                                                                 \
        if (x_ <= 0x80 || x_ > 0x10FFFF) break;                                            \
        if (n == cap) {                                                                    \
            uint32_t *q_ = realloc(p, sizeof *q_ * (cap *= 2));                            \
            if (!q_) { free(p); return mf_err(MF_ERR_NOMEM, "out of memory"); }           \
            p = q_;                                                                        \
        }                                                                                  \
        p[n++] = x_;                                                                       \
    } while (0)
    p[n++] = 0x80;
    ADD(0xD800);
    ADD(0xE000);
    bool over = false;
    for (uint32_t i = 0; i < g->n_elem && !(over = n > 4 * G_MAX_REPS); i++) {
        const gelem *e = &g->elem[i];
        if (e->type == G_CHR) { ADD(e->v); ADD(e->v + 1); }
        else if (e->type == G_CLS)
            for (uint32_t k = 0; k < g->cls[e->v].n; k++) {
                ADD(g->ranges[g->cls[e->v].first + k][0]);
                ADD(g->ranges[g->cls[e->v].first + k][1] + 1);
            }
    }
#undef ADD
    qsort(p, n, sizeof *p, cmp_u32);
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
        if ((!k || p[i] != p[k - 1]) && !(p[i] >= 0xD800 && p[i] < 0xE000)) p[k++] = p[i];
    s->reps = p;
    s->n_reps = over || k > G_MAX_REPS ? -2 : (int32_t)k;
    return MF_OK;
}

/* The record after byte b from rid, stepping the grammar if not known yet;
 * T_NOREC when the records ran out (the caller then gives up the shortcut). */
static mf_status next_rec(mf_grammar_state *s, int32_t rid, uint8_t b, int32_t *nx) {
    *nx = s->rec[rid].next[b];
    if (*nx != T_UNKNOWN) return MF_OK;
    const srec *r = &s->rec[rid];
    const gset in = {s->tops + r->off, r->n, r->n, r->done};
    gutf8 uo;
    const uint32_t mark = s->pool.len, before = s->n_rec;
    mf_status st = g_step_byte(s->g, &s->pool, &in, &r->u, b, &s->chk, &uo);
    if (st) return st;
    *nx = !s->chk.n && !(s->chk.done && !uo.need) ? T_DEAD : record_of(s, &s->chk, uo);
    if (s->n_rec == before) s->pool.len = mark;
    if (*nx != T_NOREC) s->rec[rid].next[b] = (int16_t)*nx;
    return MF_OK;
}

/* The record every character >= U+0080 leads rid to, or T_DEAD. */
static mf_status multibyte_target(mf_grammar_state *s, int32_t rid, int32_t *out) {
    *out = T_DEAD;
    if (s->n_reps == -1) {
        mf_status st = make_reps(s);
        if (st) return st;
    }
    if (s->n_reps <= 0) return MF_OK;
    const srec *r = &s->rec[rid];
    const gset in = {s->tops + r->off, r->n, r->n, r->done};
    const gutf8 u0 = {0, 0, 0};
    const uint32_t mark = s->pool.len;
    mf_status st = g_advance(s->g, &s->pool, &in, s->reps[0], &s->chk);
    if (st) return st;
    const uint64_t h = g_set_hash(&s->pool, &s->chk, &u0);
    const uint32_t mark1 = s->pool.len;
    bool same = s->chk.n || s->chk.done;
    for (int32_t i = 1; i < s->n_reps && same && !st; i++) {
        st = g_advance(s->g, &s->pool, &in, s->reps[i], &s->chk2);
        same = !st && s->chk2.n == s->chk.n && s->chk2.done == s->chk.done && g_set_hash(&s->pool, &s->chk2, &u0) == h;
        s->pool.len = mark1;
    }
    if (st) return st;
    const uint32_t before = s->n_rec;
    int32_t t = same ? record_of(s, &s->chk, u0) : T_NOREC;
    if (s->n_rec == before) s->pool.len = mark;
    *out = t >= 0 ? t : T_DEAD;
    return MF_OK;
}

/* Are all of sub's tokens allowed at a node where `need` continuation bytes
 * are due, rid being the record at the last character boundary? Yes when,
 * from rid on, every byte the subtree has (and every character >= U+0080 if
 * it has such bytes) leads one record to one next record, for as many
 * characters as a path below holds: then every path is alive. A record that
 * leads back to itself (inside an unbounded string) answers for any depth;
 * a bounded one (maxLength) for the characters it has left. Midway through
 * a character the record at its start stands in: the character completes to
 * the same record whichever it becomes. */
static mf_status subtree_free(mf_grammar_state *s, int32_t rid, uint8_t need, const tsub *sub, bool *yes) {
    *yes = false;
    if (!(sub->ok >> need & 1)) return MF_OK;
    const uint32_t levels = sub->depth + (need > 0);
    int32_t cur = rid;
    for (uint32_t j = 0; j < levels; j++) {
        srec *r = &s->rec[cur];
        if (r->u.need || !r->n) return MF_OK; /* no further character */
        if (r->mbt == T_UNKNOWN) {
            mf_status st = multibyte_target(s, cur, &r->mbt);
            if (st) return st;
        }
        if (r->tgt == T_UNKNOWN && r->mbt >= 0) r->tgt = r->mbt;
        if (r->tgt == T_UNKNOWN) { /* no multibyte target: the one of a common byte, else of the first */
            int32_t nx;
            mf_status st = next_rec(s, cur, 'e', &nx);
            if (st) return st;
            if (nx < 0) {
                int w = sub->ascii[0] ? 0 : 1;
                if (!sub->ascii[w] || (st = next_rec(s, cur, (uint8_t)(w * 64 + __builtin_ctzll(sub->ascii[w])), &nx)))
                    return st;
            }
            if (nx < 0) return MF_OK;
            r->tgt = nx;
        }
        if ((sub->nonascii || (need && !j)) && r->mbt != r->tgt) return MF_OK;
        for (int w = 0; w < 2; w++) {
            if (sub->ascii[w] & r->known[w] & ~r->to_tgt[w]) return MF_OK; /* a byte known to lead elsewhere */
            for (uint64_t z = sub->ascii[w] & ~r->known[w]; z; z &= z - 1) {
                int bit = __builtin_ctzll(z);
                int32_t nx;
                mf_status st = next_rec(s, cur, (uint8_t)(w * 64 + bit), &nx);
                if (st) return st;
                if (nx == T_NOREC) return MF_OK;
                r->known[w] |= 1ull << bit;
                if (nx != r->tgt) return MF_OK;
                r->to_tgt[w] |= 1ull << bit;
            }
        }
        if (r->tgt == cur) break; /* back to itself: as deep as it goes */
        cur = r->tgt;
    }
    *yes = true;
    return MF_OK;
}

/* Node c leads to one token only, whose piece goes on past c (a chain of
 * single children): half the nodes a mask inside a string visits. The
 * chain's nodes lie one after another (each block of one child follows its
 * parent's), so they are followed in a loop rather than a call per node.
 * *handled false: the records ran out on the way; the caller walks the
 * chain the usual way. */
static mf_status walk_chain(mf_grammar_state *s, const tnode *c, int32_t rid, bool *handled) {
    const tnode *node = s->v->node;
    *handled = true;
    for (const tnode *x = c; x->n;) {
        x = &node[x->first];
        s->stats.trie_nodes++;
        if (!s->rec[rid].n) return MF_OK; /* the grammar can only end here: the rest of the piece is refused */
        int32_t nx;
        mf_status st = next_rec(s, rid, x->b, &nx);
        if (st) return st;
        if (nx == T_DEAD) return MF_OK;
        if (nx == T_NOREC) {
            *handled = false;
            return MF_OK;
        }
        rid = nx;
    }
    return allow(s, c->dfs, c->dfs + 1);
}

/* bnd: the record at the last character boundary on the way here. */
static mf_status walk(mf_grammar_state *s, uint32_t node, int32_t rid, int32_t bnd, uint32_t d) {
    const mf_grammar_vocab *v = s->v;
    /* the arrays in locals: stores through s (the run list) would make the
     * compiler reload them for every child */
    const tnode *const tn = v->node;
    const uint32_t *const big = v->big;
    srec *const rec = s->rec;
    const uint32_t first = tn[node].first, end = first + tn[node].n;
    s->stats.trie_nodes += tn[node].n; /* once, not per child */
    for (uint32_t c = first; c < end; c++) {
        const tnode *const cn = &tn[c];
        const uint8_t b = cn->b;
        int32_t nx = rec[rid].next[b];
        if (nx == T_UNKNOWN) {
            const srec *r = &rec[rid];
            gset in = {s->tops + r->off, r->n, r->n, r->done};
            gset *o = &s->lvl[d + 1];
            gutf8 uo;
            const uint32_t mark = s->pool.len, before = s->n_rec;
            mf_status st = g_step_byte(s->g, &s->pool, &in, &r->u, b, o, &uo);
            if (st) return st;
            if (!o->n && !(o->done && !uo.need)) nx = T_DEAD;
            else nx = record_of(s, o, uo);
            if (nx == T_NOREC) { /* no records left: finish this subtree directly */
                if ((st = allow_own(s, cn))) return st;
                if (o->n && cn->n && (st = walk_direct(s, c, d + 1, o, uo))) return st;
                s->pool.len = mark;
                continue;
            }
            if (s->n_rec == before) s->pool.len = mark; /* dead or an old set: the new nodes are garbage */
            rec[rid].next[b] = (int16_t)nx;
        }
        if (nx == T_DEAD) continue;
        mf_status st = allow_own(s, cn);
        if (st) return st;
        const srec *const rn = &rec[nx];
        if (!rn->n) continue; /* the grammar can only end here: nothing below is allowed */
        const gutf8 un = rn->u;
        if (big[c]) {
            /* right after a lead byte whose next byte is restricted (E0, ED,
             * F0, F4: overlong, surrogate, beyond U+10FFFF) not every
             * continuation is taken: no shortcut there */
            const bool restricted = un.need && un.need + 1 == un.len &&
                                    (un.val == 0 || (un.len == 3 && un.val == 0xD) || (un.len == 4 && un.val == 4));
            const int32_t nb = restricted ? -1 : un.need ? bnd : nx;
            bool all = false;
            if (nb >= 0 && (st = subtree_free(s, nb, un.need, &v->sub[big[c] - 1], &all))) return st;
            if (all) {
                if ((st = allow(s, cn->dfs, cn->dend))) return st;
                s->stats.trie_nodes++;
                continue;
            }
        }
        if (!cn->n) continue;
        if (cn->dend - cn->dfs == 1 && !cn->own) {
            bool handled;
            if ((st = walk_chain(s, cn, nx, &handled))) return st;
            if (handled) continue;
        }
        if ((st = walk(s, c, nx, un.need ? bnd : nx, d + 1))) return st;
    }
    return MF_OK;
}

/* The allowed-token bitmap at the current position (cached). */
static mf_status get_mask(mf_grammar_state *s, const uint64_t **out) {
    const mf_grammar_vocab *v = s->v;
    if (!v) return mf_err(MF_ERR_INVALID_ARG, "grammar: the state has no vocabulary");
    uint64_t h;
    mf_status st = build_key(s, &h);
    if (st) return st;
    centry *victim = &s->cache[0];
    for (uint32_t i = 0; i < s->n_cache; i++) {
        centry *e = &s->cache[i];
        if (e->bits && e->hash == h && e->klen == s->klen && !memcmp(e->key, s->key, sizeof *s->key * s->klen)) {
            e->stamp = ++s->clock;
            s->stats.cache_hits++;
            *out = e->bits;
            return MF_OK;
        }
        if (!e->bits || e->stamp < victim->stamp) victim = e;
        if (!victim->bits) break;
    }
    s->stats.cache_misses++;
    if (!victim->bits) victim->bits = malloc(sizeof *victim->bits * s->n_words);
    uint32_t *k = realloc(victim->key, sizeof *k * (s->klen ? s->klen : 1));
    if (!victim->bits || !k) {
        free(k == victim->key ? NULL : k);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    victim->key = k;
    memcpy(k, s->key, sizeof *k * s->klen);
    victim->klen = s->klen;
    victim->hash = 0;
    const uint32_t mark = s->pool.len;
    s->n_rec = s->tops_n = 0;
    s->n_run = 0;
    memset(s->slot, 0, sizeof *s->slot * G_REC_SLOTS);
    if (s->cur.n) {
        int32_t root = record_of(s, &s->cur, s->u);
        st = root != T_NOREC ? walk(s, 0, root, s->u.need ? -1 : root, 0) : walk_direct(s, 0, 0, &s->cur, s->u);
    }
    s->pool.len = mark;
    if (st) {
        victim->stamp = 0;
        return st;
    }
    runs_to_bits(s, victim->bits);
    if (mf_grammar_done(s))
        for (int32_t i = 0; i < v->n_eog; i++) victim->bits[v->eog_list[i] >> 6] |= 1ull << (v->eog_list[i] & 63);
    victim->hash = h;
    victim->stamp = ++s->clock;
    *out = victim->bits;
    return MF_OK;
}

mf_status g_state_mask(mf_grammar_state *s, const uint64_t **bits, int32_t *n_vocab) {
    *n_vocab = s->v ? s->v->n_vocab : 0;
    return get_mask(s, bits);
}

/* 64 minus infinities, copied over a word of tokens that are all disallowed */
#define NINF8 -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY
static const float g_ninf64[64] = {NINF8, NINF8, NINF8, NINF8, NINF8, NINF8, NINF8, NINF8};

mf_status mf_grammar_apply(mf_grammar_state *s, float *logits) {
    const uint64_t *bits;
    mf_status st = get_mask(s, &bits);
    if (st) return st;
    const int32_t n = s->v->n_vocab;
    bool any = false;
    const uint32_t full = (uint32_t)n / 64; /* words covering 64 tokens */
    for (uint32_t w = 0; w < full; w++) {
        const uint64_t m = bits[w];
        float *l = logits + (size_t)w * 64;
        if (m == ~0ull) { any = true; continue; }
        if (!m) { memcpy(l, g_ninf64, sizeof g_ninf64); continue; }
        any = true;
        for (uint64_t z = ~m; z; z &= z - 1) l[__builtin_ctzll(z)] = -INFINITY; /* cost: the disallowed ones */
    }
    for (int32_t t = (int32_t)full * 64; t < n; t++) {
        if (bits[t >> 6] >> (t & 63) & 1) any = true;
        else logits[t] = -INFINITY;
    }
    if (!any) return mf_err(MF_ERR_FORMAT, "grammar: no token of the vocabulary can continue the grammar here");
    return MF_OK;
}
