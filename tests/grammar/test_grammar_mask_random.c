/* test_grammar_mask_random.c - the optimized token mask (trie walk, per-set
 * records, subtree shortcut, run list, state cache) against a straightforward
 * reference over many random grammars and states.
 *
 * The reference knows nothing of the trie: it keeps its own set of stacks for
 * the text accepted so far (stacks.c, the matcher that defines the grammar's
 * language) and steps every token's piece through it byte by byte. A token is
 * allowed when every byte of its piece keeps a stack alive and, after the
 * last, a stack is left or the grammar may end there with no character half
 * done; an end-of-generation token when the grammar may end; a token with no
 * text never. The masks must be bitwise equal, on first computation and when
 * served from the cache on a replay of the same tokens.
 *
 * Grammars are drawn from literals, classes (ranges, negation, code points
 * above U+0080, up to U+1F600), any-char, groups, alternation, every repeat
 * form and references to later rules; states from random walks that take a
 * random allowed token at each step. Three vocabularies: stories260K (SPM
 * with byte tokens), GPT-2 (byte-level BPE, 50,257) and Qwen2 (151,936). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "minfer.h"
#include "testutil.h"

static uint64_t rng;
static uint32_t rnd(uint32_t n) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)((rng >> 11) % n);
}

/* ---- random grammars ------------------------------------------------------ */

typedef struct buf {
    char s[8192];
    size_t n;
    bool full;
} buf;

static void put(buf *b, const char *t) {
    size_t l = strlen(t);
    if (b->n + l + 1 > sizeof b->s) { b->full = true; return; }
    memcpy(b->s + b->n, t, l + 1);
    b->n += l;
}

/* characters that are common in the vocabularies, and some above U+0080 */
static const uint32_t g_chars[] = {'a', 'e', 't', 'o', 'n', 's', 'r', 'h', 'l', 'd', ' ', '.', ',', '"', '\\', '{', '}',
                                   '[', ']', ':', '0', '1', '2', '\n', 'T', 0xE9, 0xFC, 0x4E2D, 0x6587, 0x2014, 0x1F600};
#define N_CHARS (sizeof g_chars / sizeof *g_chars)

static void put_char(buf *b, uint32_t c, bool in_class) {
    char t[16];
    if (c == '"' || c == '\\' || (in_class && (c == ']' || c == '-' || c == '^'))) snprintf(t, sizeof t, "\\%c", (char)c);
    else if (c == '\n') snprintf(t, sizeof t, "\\n");
    else if (c < 0x80) snprintf(t, sizeof t, "%c", (char)c);
    else if (c < 0x10000) snprintf(t, sizeof t, "\\u%04X", c);
    else snprintf(t, sizeof t, "\\U%08X", c);
    put(b, t);
}

static void gen_class(buf *b) {
    static const uint32_t ranges[][2] = {{'a', 'z'}, {'0', '9'}, {'A', 'Z'}, {' ', '~'}, {0xE0, 0xFF},
                                         {0x80, 0x7FF}, {0x4E00, 0x9FFF}, {0x800, 0xFFFF}, {0x10000, 0x10FFFF}, {'a', 'f'}};
    put(b, rnd(4) ? "[" : "[^");
    for (uint32_t k = 1 + rnd(3); k--;) {
        if (rnd(2)) {
            const uint32_t *r = ranges[rnd(sizeof ranges / sizeof *ranges)];
            put_char(b, r[0], true);
            put(b, "-");
            put_char(b, r[1], true);
        } else {
            put_char(b, g_chars[rnd(N_CHARS)], true);
        }
    }
    put(b, "]");
}

static void gen_alts(buf *b, uint32_t rule, uint32_t n_rules, int depth);

static void gen_atom(buf *b, uint32_t rule, uint32_t n_rules, int depth) {
    uint32_t k = rnd(depth > 0 ? 10 : 8);
    if (k < 3) {
        put(b, "\"");
        for (uint32_t i = 1 + rnd(4); i--;) put_char(b, g_chars[rnd(N_CHARS)], false);
        put(b, "\"");
    } else if (k < 6) {
        gen_class(b);
    } else if (k == 6) {
        put(b, rnd(3) ? "[a-z]" : ".");
    } else if (k == 7) {
        if (rule + 1 < n_rules) { /* references go to later rules only: no left recursion */
            char t[16];
            snprintf(t, sizeof t, "r%u", rule + 1 + rnd(n_rules - rule - 1));
            put(b, t);
        } else {
            put(b, "\"x\"");
        }
    } else {
        put(b, "(");
        gen_alts(b, rule, n_rules, depth - 1);
        put(b, ")");
    }
    static const char *const rep[] = {"*", "+", "?", "{2}", "{0,3}", "{1,}", "{2,5}"};
    if (!rnd(3)) put(b, rep[rnd(sizeof rep / sizeof *rep)]);
}

static void gen_alts(buf *b, uint32_t rule, uint32_t n_rules, int depth) {
    for (uint32_t a = 1 + rnd(3), i = 0; i < a; i++) {
        if (i) put(b, " | ");
        for (uint32_t e = 1 + rnd(3), j = 0; j < e; j++) {
            if (j) put(b, " ");
            gen_atom(b, rule, n_rules, depth);
        }
    }
}

static void gen_grammar(buf *b) {
    b->n = 0;
    b->s[0] = 0;
    b->full = false;
    const uint32_t n_rules = 1 + rnd(4);
    for (uint32_t r = 0; r < n_rules; r++) {
        char t[32];
        snprintf(t, sizeof t, r ? "r%u ::= " : "root ::= ", r);
        put(b, t);
        gen_alts(b, r, n_rules, 2);
        put(b, "\n");
    }
}

/* ---- the reference -------------------------------------------------------- */

typedef struct ref {
    const mf_grammar *g;
    gpool pool;
    gset cur, tmp, tmp2;
    gutf8 u;
} ref;

/* The reference's stacks after `n` more bytes; false when they are refused. */
static bool ref_feed(ref *r, const char *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        gutf8 uo;
        if (g_step_byte(r->g, &r->pool, &r->cur, &r->u, (uint8_t)b[i], &r->tmp, &uo)) return false;
        gset t = r->cur;
        r->cur = r->tmp;
        r->tmp = t;
        r->u = uo;
        if (!r->cur.n && !(r->cur.done && i + 1 == n)) return false;
    }
    return true;
}

/* Token by token: is the piece allowed from the reference's current stacks?
 * Returns -1 when the matcher itself fails (a grammar too ambiguous). */
static int ref_allows(ref *r, const char *piece, int32_t len) {
    const uint32_t mark = r->pool.len;
    const gset *in = &r->cur;
    gutf8 u = r->u, uo;
    gset *a = &r->tmp, *b = &r->tmp2;
    int ok = 1;
    for (int32_t i = 0; i < len && ok == 1; i++) {
        if (g_step_byte(r->g, &r->pool, in, &u, (uint8_t)piece[i], a, &uo)) { ok = -1; break; }
        u = uo;
        if (!a->n && !(a->done && !u.need && i + 1 == len)) ok = 0;
        in = a;
        gset *t = a;
        a = b;
        b = t;
    }
    r->pool.len = mark; /* what the piece made is garbage */
    return ok;
}

static void ref_free(ref *r) {
    free(r->pool.n);
    g_set_free(&r->cur);
    g_set_free(&r->tmp);
    g_set_free(&r->tmp2);
}

/* ---- the comparison ------------------------------------------------------- */

typedef struct vocab {
    const char *name;
    mf_model *m;
    mf_grammar_vocab *v;
    int32_t n;
    char **piece;
    int32_t *len;
    bool *eog;
} vocab;

typedef struct tally {
    int grammars, refused, states, masks, cached, ambiguous, tokens_checked, dense, partial;
} tally;

/* The optimized mask at the state's position, as allowed flags; false when
 * no token at all is allowed (apply's MF_ERR_FORMAT) */
static mf_status opt_mask(mf_grammar_state *s, const vocab *V, float *l, bool *any) {
    for (int32_t t = 0; t < V->n; t++) l[t] = 0.0f;
    mf_status st = mf_grammar_apply(s, l);
    *any = st == MF_OK;
    if (st == MF_ERR_FORMAT && strstr(mf_last_error(), "no token")) return MF_OK;
    return st;
}

/* One random walk of up to `steps` tokens, checked at every position; then
 * the same tokens replayed, the masks now from the state's cache. */
static void walk_states(const vocab *V, const mf_grammar *g, const char *text, int steps, tally *ty) {
    mf_grammar_state *s = NULL;
    if (mf_grammar_state_new(g, V->v, &s)) {
        CHECK(0, "%s: state: %s", V->name, mf_last_error());
        return;
    }
    ref r = {g, {0}, {0}, {0}, {0}, {0, 0, 0}};
    float *l = malloc(sizeof *l * (size_t)V->n);
    mf_token *path = malloc(sizeof *path * (size_t)(steps + 1));
    int32_t *allowed = malloc(sizeof *allowed * (size_t)V->n);
    int n_path = 0, bad = 0;
    if (!l || !path || !allowed || g_initial(g, &r.pool, &r.cur)) {
        CHECK(0, "%s: setup: %s", V->name, mf_last_error());
        goto out;
    }
    for (int pass = 0; pass < 2 && !bad; pass++) {
        if (pass) {
            CHECK(!mf_grammar_state_reset(s), "reset: %s", mf_last_error());
            r.pool.len = 1;
            r.u = (gutf8){0, 0, 0};
            CHECK(!g_initial(g, &r.pool, &r.cur), "initial: %s", mf_last_error());
        }
        const uint64_t hits0 = mf_grammar_state_stats(s).cache_hits;
        for (int k = 0; k <= (pass ? n_path : steps) && !bad; k++) {
            bool any;
            mf_status st = opt_mask(s, V, l, &any);
            if (st) { /* the matcher's limits (a grammar too ambiguous): the reference must hit them too */
                int hit = 0;
                for (int32_t t = 0; t < V->n && !hit; t++) hit = !V->eog[t] && V->len[t] && ref_allows(&r, V->piece[t], V->len[t]) < 0;
                CHECK(hit, "%s: apply failed (%s) where the reference did not\n%s", V->name, mf_last_error(), text);
                ty->ambiguous++;
                goto out;
            }
            ty->masks++;
            int32_t n_allowed = 0, n_pieces = 0;
            for (int32_t t = 0; t < V->n && bad < 3; t++) {
                int want;
                if (V->eog[t]) want = r.cur.done && !r.u.need;
                else if (!V->len[t]) want = 0;
                else {
                    want = ref_allows(&r, V->piece[t], V->len[t]);
                    if (want < 0) { ty->ambiguous++; goto out; }
                }
                const int got = l[t] == 0.0f;
                if (!got && l[t] != -INFINITY) {
                    bad++;
                    CHECK(0, "%s: logit %d is %g, neither kept nor -inf", V->name, t, l[t]);
                }
                if (got != want) {
                    bad++;
                    CHECK(0, "%s, pass %d, step %d: token %d (%s) mask %s, reference %s\ngrammar:\n%s", V->name, pass, k, t,
                          mf_token_text(V->m, t), got ? "allows" : "refuses", want ? "allows" : "refuses", text);
                }
                if (want && !V->eog[t]) allowed[n_pieces++] = t;
                n_allowed += want;
            }
            ty->tokens_checked += V->n;
            ty->dense += n_allowed > V->n / 2; /* inside a string-like loop: the shortcut and the complement */
            ty->partial += r.u.need > 0;      /* midway through a character */
            CHECK(any == (n_allowed > 0), "%s: apply says %s token is allowed, the reference %d", V->name, any ? "a" : "no",
                  n_allowed);
            if (bad) break;
            mf_token t;
            if (pass) {
                if (k == n_path) break;
                t = path[k];
            } else {
                if (k == steps || !n_pieces) break;
                t = allowed[rnd((uint32_t)n_pieces)];
                path[n_path++] = t;
            }
            CHECK(!mf_grammar_accept(s, t), "%s: accept %d: %s", V->name, t, mf_last_error());
            CHECK(ref_feed(&r, V->piece[t], (size_t)V->len[t]), "%s: the reference refuses token %d", V->name, t);
        }
        if (pass) {
            const uint64_t hits = mf_grammar_state_stats(s).cache_hits - hits0;
            CHECK(hits >= (uint64_t)n_path, "%s: the replay of %d tokens hit the cache %llu times", V->name, n_path,
                  (unsigned long long)hits);
            ty->cached += (int)hits;
        }
    }
    ty->states += n_path + 1;
out:
    ref_free(&r);
    free(l);
    free(path);
    free(allowed);
    mf_grammar_state_free(s);
}

static bool load_vocab(vocab *V, const char *path) {
    mf_model_params mp = mf_model_default_params();
    mp.vocab_only = true;
    memset(V, 0, sizeof *V);
    V->name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (mf_model_load(path, &mp, &V->m) || mf_grammar_vocab_new(V->m, &V->v)) {
        CHECK(0, "%s: %s", path, mf_last_error());
        return false;
    }
    V->n = mf_model_n_vocab(V->m);
    V->piece = calloc((size_t)V->n, sizeof *V->piece);
    V->len = calloc((size_t)V->n, sizeof *V->len);
    V->eog = calloc((size_t)V->n, sizeof *V->eog);
    char tmp[512];
    for (int32_t t = 0; t < V->n; t++) {
        V->eog[t] = mf_token_is_eog(V->m, t);
        int32_t n = V->eog[t] ? 0 : mf_token_to_piece(V->m, t, tmp, (int32_t)sizeof tmp, false);
        V->len[t] = n > 0 ? n : 0;
        V->piece[t] = malloc((size_t)V->len[t] + 1);
        memcpy(V->piece[t], tmp, (size_t)V->len[t]);
    }
    return true;
}

static void free_vocab(vocab *V) {
    for (int32_t t = 0; V->piece && t < V->n; t++) free(V->piece[t]);
    free(V->piece);
    free(V->len);
    free(V->eog);
    mf_grammar_vocab_free(V->v);
    mf_model_free(V->m);
}

/* mf_sampler_sample_grammar (which filters the candidates by the mask a
 * word at a time) draws exactly what mf_grammar_apply's -inf logits followed
 * by a plain mf_sampler_sample draw: greedy and the default chain, with a
 * repetition penalty, over random logits. */
static void sampler_equivalence(const vocab *V, const char *gbnf, bool greedy) {
    mf_grammar *g = NULL;
    mf_grammar_state *a = NULL, *b = NULL;
    mf_sampler *sa = NULL, *sb = NULL;
    mf_sampler_params sp = mf_sampler_default_params();
    if (greedy) sp.temp = 0;
    sp.repeat_penalty = 1.3f;
    sp.seed = 42;
    float *l = malloc(sizeof *l * (size_t)V->n), *lb = malloc(sizeof *lb * (size_t)V->n);
    if (!l || !lb || mf_grammar_parse(gbnf, strlen(gbnf), NULL, &g) || mf_grammar_state_new(g, V->v, &a) ||
        mf_grammar_state_new(g, V->v, &b) || mf_sampler_new(&sp, V->n, &sa) || mf_sampler_new(&sp, V->n, &sb)) {
        CHECK(0, "sampler setup: %s", mf_last_error());
        goto out;
    }
    int same = 0, steps = 80;
    for (int k = 0; k < steps; k++) {
        for (int32_t t = 0; t < V->n; t++) l[t] = (float)rnd(1000) / 100.0f;
        for (int j = 0; j < 32; j++) l[rnd((uint32_t)V->n)] += 8.0f;
        memcpy(lb, l, sizeof *l * (size_t)V->n);
        mf_token ta = -1, tb;
        mf_status st = mf_sampler_sample_grammar(sa, l, a, &ta);
        mf_status stb = mf_grammar_apply(b, lb);
        if (st == MF_ERR_FORMAT && stb == MF_ERR_FORMAT) { /* a dead end (a vocabulary without the needed piece): both say so */
            same++;
            mf_grammar_state_reset(a);
            mf_grammar_state_reset(b);
            continue;
        }
        CHECK(!st && !stb, "sample_grammar / apply: %s", mf_last_error());
        tb = mf_sampler_sample(sb, lb);
        CHECK(ta == tb, "%s, %s, step %d: sample_grammar drew %d, apply + sample %d", V->name, greedy ? "greedy" : "chain", k, ta, tb);
        if (st || ta != tb) break;
        same++;
        CHECK(!mf_grammar_accept(b, tb), "accept: %s", mf_last_error());
        mf_sampler_accept(sa, ta);
        mf_sampler_accept(sb, tb);
        if (V->eog[ta] || mf_grammar_done(a)) { /* a value is complete: start the next */
            mf_grammar_state_reset(a);
            mf_grammar_state_reset(b);
        }
    }
    CHECK(same == steps, "%s: %d of %d draws equal", V->name, same, steps);
out:
    free(l);
    free(lb);
    mf_sampler_free(sa);
    mf_sampler_free(sb);
    mf_grammar_state_free(a);
    mf_grammar_state_free(b);
    mf_grammar_free(g);
}

static void run_vocab(const char *path, int n_grammars, int steps, uint64_t seed) {
    vocab V;
    if (!load_vocab(&V, path)) { free_vocab(&V); return; }
    rng = seed;
    tally ty = {0};
    buf b;
    for (int i = 0; i < n_grammars; i++) {
        gen_grammar(&b);
        CHECK(!b.full, "generated grammar too long");
        mf_grammar *g = NULL;
        if (mf_grammar_parse(b.s, b.n, NULL, &g)) { /* e.g. a nullable repeat refused: must say why */
            CHECK(*mf_last_error(), "a refused grammar has a message");
            ty.refused++;
            continue;
        }
        ty.grammars++;
        walk_states(&V, g, b.s, steps, &ty);
        mf_grammar_free(g);
    }
    printf("  %s: %d grammars (%d refused by the parser, %d hit the matcher's limits), %d states, %d masks"
           " (%d from the cache, %d allowing over half the vocabulary, %d midway through a character), %d token checks\n",
           V.name, ty.grammars, ty.refused, ty.ambiguous, ty.states, ty.masks, ty.cached, ty.dense, ty.partial,
           ty.tokens_checked);
    /* the generator must mostly make grammars that run */
    CHECK(ty.grammars >= n_grammars * 3 / 4 && ty.ambiguous <= ty.grammars / 10, "%s: %d of %d grammars usable",
          V.name, ty.grammars - ty.ambiguous, n_grammars);
    CHECK(ty.cached > 0 && ty.dense > 0 && ty.partial > 0, "%s: cached, dense and mid-character masks among them",
          V.name);
    sampler_equivalence(&V, mf_grammar_json(), true);
    sampler_equivalence(&V, mf_grammar_json(), false);
    sampler_equivalence(&V, "root ::= [a-z ]{0,12} \".\"", false); /* a bounded string, then the end */
    sampler_equivalence(&V, "root ::= [^.]{0,300} \".\"", false); /* most tokens allowed: masked in place */
    sampler_equivalence(&V, "root ::= [^.]{0,300} \".\"", true);
    free_vocab(&V);
}

int main(void) {
    /* the same cases under ASan (about 55 s there, 7 s in Release): fewer
     * left the larger vocabularies without a dense mask to check */
    run_vocab("../shared/models/stories260K.gguf", 400, 24, 0x1234567u);
    run_vocab("../shared/tokenizer/ggml-vocab-gpt-2.gguf", 24, 8, 0xabcdefu);
    run_vocab("../shared/tokenizer/ggml-vocab-qwen2.gguf", 8, 6, 0x5eed5u);
    return test_summary("test_grammar_mask_random");
}
