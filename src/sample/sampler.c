/* sampler.c - the sampler chain: penalties -> top-k -> top-p -> min-p ->
 * temperature -> random draw, or argmax when temp <= 0. Semantics follow
 * llama.cpp's samplers so the same flags mean the same thing; the random
 * stream is our own (xoshiro256**), deterministic for a seed.
 *
 * Everything is allocated in mf_sampler_new: sampling allocates nothing. */
#include "minfer.h"
#include "core/error.h"
#include "grammar/state.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct cand {
    float logit;
    float p;
    mf_token id;
} cand;

struct mf_sampler {
    mf_sampler_params p;
    int32_t n_vocab;
    cand *c;
    int32_t n;          /* live candidates */
    int32_t *count;     /* per-token occurrences in the penalty window (kept zero between calls) */
    mf_token *hist;     /* ring buffer of the last hist_cap accepted tokens */
    int32_t hist_cap, hist_len, hist_pos;
    uint64_t s[4];      /* xoshiro256** state */
};

mf_sampler_params mf_sampler_default_params(void) {
    mf_sampler_params p = {
        .temp = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .freq_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .penalty_last_n = 64,
        .seed = 0xdeadbeef,
    };
    return p;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(mf_sampler *s) {
    uint64_t *q = s->s;
    uint64_t r = rotl(q[1] * 5, 7) * 9, t = q[1] << 17;
    q[2] ^= q[0];
    q[3] ^= q[1];
    q[1] ^= q[2];
    q[0] ^= q[3];
    q[2] ^= t;
    q[3] = rotl(q[3], 45);
    return r;
}

/* uniform in [0, 1) with 53 random bits */
static double next_unit(mf_sampler *s) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

static void seed_rng(mf_sampler *s) {
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++) s->s[i] = splitmix64(&x);
}

mf_status mf_sampler_new(const mf_sampler_params *params, int32_t n_vocab, mf_sampler **out) {
    *out = NULL;
    if (n_vocab <= 0) return mf_err(MF_ERR_INVALID_ARG, "sampler: vocabulary size %d", n_vocab);
    mf_sampler_params p = params ? *params : mf_sampler_default_params();
    if (!(p.temp == p.temp) || !(p.top_p == p.top_p) || !(p.min_p == p.min_p) || !(p.repeat_penalty > 0))
        return mf_err(MF_ERR_INVALID_ARG, "sampler: temperature, top-p and min-p must be numbers and repeat penalty > 0");
    mf_sampler *s = calloc(1, sizeof *s);
    if (!s) return mf_err(MF_ERR_NOMEM, "out of memory");
    s->p = p;
    s->n_vocab = n_vocab;
    s->hist_cap = p.penalty_last_n > 0 ? p.penalty_last_n : 0;
    s->c = malloc(sizeof *s->c * (size_t)n_vocab);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    s->hist = malloc(sizeof *s->hist * (size_t)(s->hist_cap ? s->hist_cap : 1));
    if (!s->c || !s->count || !s->hist) {
        mf_sampler_free(s);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    seed_rng(s);
    *out = s;
    return MF_OK;
}

void mf_sampler_free(mf_sampler *s) {
    if (!s) return;
    free(s->c);
    free(s->count);
    free(s->hist);
    free(s);
}

void mf_sampler_reset(mf_sampler *s) {
    s->hist_len = s->hist_pos = 0;
    seed_rng(s);
}

void mf_sampler_accept(mf_sampler *s, mf_token tok) {
    if (!s->hist_cap || tok < 0 || tok >= s->n_vocab) return;
    s->hist[s->hist_pos] = tok;
    s->hist_pos = (s->hist_pos + 1) % s->hist_cap;
    if (s->hist_len < s->hist_cap) s->hist_len++;
}

static bool penalties_on(const mf_sampler_params *p) {
    return p->repeat_penalty != 1.0f || p->freq_penalty != 0.0f || p->presence_penalty != 0.0f;
}

/* llama.cpp's rule: a positive logit is divided by the repeat penalty and a
 * negative one multiplied, then frequency and presence are subtracted. */
static void apply_penalties(mf_sampler *s) {
    if (!s->hist_len || !penalties_on(&s->p)) return;
    for (int32_t i = 0; i < s->hist_len; i++) s->count[s->hist[i]]++;
    for (int32_t i = 0; i < s->hist_len; i++) {
        mf_token t = s->hist[i];
        int32_t c = s->count[t];
        if (!c) continue; /* already applied for a repeated token */
        float *l = &s->c[t].logit;
        *l = *l <= 0 ? *l * s->p.repeat_penalty : *l / s->p.repeat_penalty;
        *l -= (float)c * s->p.freq_penalty + s->p.presence_penalty;
        s->count[t] = 0;
    }
}

/* descending by logit, ties by id so the order is total */
static int cmp_desc(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
    return (x->id > y->id) - (x->id < y->id);
}

static bool better(const cand *x, const cand *y) { return x->logit > y->logit || (x->logit == y->logit && x->id < y->id); }

/* Moves the k best candidates to the front, sorted (min-heap selection, O(n log k)). */
static void keep_top_k(mf_sampler *s, int32_t k) {
    cand *c = s->c;
    /* heap of the k best seen so far, worst at c[0] */
    for (int32_t i = 0; i < s->n; i++) {
        int32_t n = i < k ? i + 1 : k;
        cand x = c[i];
        int32_t j;
        if (i < k) {
            j = i; /* sift up */
            while (j > 0 && better(&c[(j - 1) / 2], &x)) {
                c[j] = c[(j - 1) / 2];
                j = (j - 1) / 2;
            }
            c[j] = x;
            continue;
        }
        if (!better(&x, &c[0])) continue;
        j = 0; /* replace the worst, sift down */
        for (;;) {
            int32_t l = 2 * j + 1, r = l + 1, m = j;
            const cand *mv = &x;
            if (l < n && better(mv, &c[l])) { m = l; mv = &c[l]; }
            if (r < n && better(mv, &c[r])) { m = r; }
            if (m == j) break;
            c[j] = c[m];
            j = m;
        }
        c[j] = x;
    }
    s->n = k;
    qsort(c, (size_t)k, sizeof *c, cmp_desc);
}

static void softmax(cand *c, int32_t n, float temp) {
    float mx = c[0].logit;
    for (int32_t i = 1; i < n; i++)
        if (c[i].logit > mx) mx = c[i].logit;
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        c[i].p = expf((c[i].logit - mx) / temp);
        sum += c[i].p;
    }
    for (int32_t i = 0; i < n; i++) c[i].p = (float)(c[i].p / sum);
}

static void load_logits(mf_sampler *s, const float *logits) {
    for (int32_t i = 0; i < s->n_vocab; i++) {
        s->c[i].id = i;
        s->c[i].logit = logits[i];
    }
    s->n = s->n_vocab;
    apply_penalties(s);
}

/* The live candidate with the largest logit (the first one on ties). */
static int32_t argmax_cand(const mf_sampler *s) {
    int32_t best = 0;
    for (int32_t i = 1; i < s->n; i++)
        if (s->c[i].logit > s->c[best].logit) best = i;
    return best;
}

/* The chain after the penalties, over the live candidates c[0 .. n): leaves
 * the final distribution in c[0 .. n).p (temp > 0 only). */
static void distribution(mf_sampler *s) {
    const mf_sampler_params *p = &s->p;

    bool sorted = false;
    if (p->top_k > 0 && p->top_k < s->n) {
        keep_top_k(s, p->top_k);
        sorted = true;
    }
    if (p->top_p < 1.0f) {
        if (!sorted) qsort(s->c, (size_t)s->n, sizeof *s->c, cmp_desc);
        sorted = true;
        softmax(s->c, s->n, 1.0f);
        double cum = 0;
        int32_t keep = s->n;
        for (int32_t i = 0; i < s->n; i++) {
            cum += s->c[i].p;
            if (cum >= p->top_p) {
                keep = i + 1;
                break;
            }
        }
        s->n = keep;
    }
    if (p->min_p > 0.0f) {
        /* p_i >= min_p * p_max  <=>  logit_i >= logit_max + ln(min_p) */
        float mx = -INFINITY;
        for (int32_t i = 0; i < s->n; i++)
            if (s->c[i].logit > mx) mx = s->c[i].logit;
        const float thr = mx + logf(p->min_p);
        int32_t w = 0;
        for (int32_t i = 0; i < s->n; i++)
            if (s->c[i].logit >= thr) s->c[w++] = s->c[i];
        s->n = w > 0 ? w : 1;
    }
    softmax(s->c, s->n, p->temp);
}

/* A random draw from c[0 .. n).p, which sums to `total`. */
static mf_token draw_from(mf_sampler *s, double total) {
    double u = next_unit(s) * total, cum = 0;
    int32_t last = s->n - 1;
    for (int32_t i = 0; i < s->n; i++) {
        cum += s->c[i].p;
        if (u < cum) return s->c[i].id;
        if (s->c[i].p > 0) last = i;
    }
    /* rounding left u past the sum: the last candidate that has mass (one
     * masked to -inf in place by the grammar has none) */
    return s->c[last].id;
}

static mf_token draw(mf_sampler *s) {
    if (s->p.temp <= 0) return s->c[argmax_cand(s)].id;
    distribution(s);
    return draw_from(s, 1.0);
}

mf_token mf_sampler_sample(mf_sampler *s, const float *logits) {
    load_logits(s, logits);
    return draw(s);
}

/* Drops the candidates the grammar's mask disallows (after the penalties,
 * which index the candidates by id). */
static mf_status mask_grammar(mf_sampler *s, mf_grammar_state *g) {
    const uint64_t *bits;
    int32_t nv;
    mf_status st = g_state_mask(g, &bits, &nv);
    if (st) return st;
    if (nv != s->n_vocab)
        return mf_err(MF_ERR_INVALID_ARG, "sampler: the grammar's vocabulary has %d tokens, the sampler %d", nv, s->n_vocab);
    int32_t w = 0;
    if (s->n == s->n_vocab) {
        /* straight after load_logits candidate i is token i: a word of the
         * mask at a time. Per candidate this loop cost 0.2-0.3 ms on a
         * 151,936-token vocabulary, ten times the cached mask itself; now a
         * word of disallowed tokens is skipped and a word of allowed ones
         * moved as a block, in the same order. */
        const int32_t nw = (s->n + 63) / 64;
        int32_t allowed = 0;
        for (int32_t k = 0; k < nw; k++) allowed += __builtin_popcountll(bits[k]);
        if (allowed > s->n / 2) {
            /* most tokens allowed (inside a string): moving them all cost more
             * than the mask; the others get -inf in place, which every stage
             * after this one treats as absent (p = 0, never in a top-k that
             * has enough finite candidates, the argmax unchanged), so the
             * draws are the same (test_grammar_mask_random checks it) */
            for (int32_t k = 0; k < nw; k++) {
                uint64_t z = ~bits[k];
                if (k == nw - 1 && s->n % 64) z &= (1ull << (s->n % 64)) - 1;
                for (; z; z &= z - 1) s->c[k * 64 + __builtin_ctzll(z)].logit = -INFINITY;
            }
            return MF_OK;
        }
        for (int32_t k = 0; k < nw; k++) {
            uint64_t m = bits[k];
            if (k == nw - 1 && s->n % 64) m &= (1ull << (s->n % 64)) - 1; /* past the vocabulary */
            const int32_t base = k * 64;
            if (!m) continue;
            if (m == ~0ull) {
                memmove(&s->c[w], &s->c[base], sizeof *s->c * 64);
                w += 64;
                continue;
            }
            for (uint64_t z = m; z; z &= z - 1) s->c[w++] = s->c[base + __builtin_ctzll(z)];
        }
    } else {
        for (int32_t i = 0; i < s->n; i++) {
            mf_token t = s->c[i].id;
            if (bits[t >> 6] >> (t & 63) & 1) s->c[w++] = s->c[i];
        }
    }
    if (!w) return mf_err(MF_ERR_FORMAT, "grammar: no token of the vocabulary can continue the grammar here");
    s->n = w;
    return MF_OK;
}

mf_status mf_sampler_sample_grammar(mf_sampler *s, const float *logits, mf_grammar_state *g, mf_token *out) {
    *out = -1;
    load_logits(s, logits);
    mf_status st = mask_grammar(s, g);
    if (st) return st;
    mf_token t = draw(s);
    if ((st = mf_grammar_accept(g, t))) return st;
    *out = t;
    return MF_OK;
}

/* Speculative verification of a deterministic draft (the draft "distribution"
 * q is all mass on `draft`). The standard rejection rule then reads: accept
 * with probability min(1, p(draft) / 1) = p(draft); on rejection draw from
 * the residual max(0, p - q), which is p with the draft's mass removed. The
 * token returned is therefore distributed exactly as a plain draw from p.
 * Greedy: accepted iff the draft is the argmax, so the output is the argmax
 * either way, token for token what plain decoding gives. */
mf_status mf_sampler_verify(mf_sampler *s, const float *logits, mf_grammar_state *g, mf_token draft, mf_token *out) {
    *out = -1;
    load_logits(s, logits);
    mf_status st = g ? mask_grammar(s, g) : MF_OK;
    if (st) return st;
    mf_token t;
    if (s->p.temp <= 0) {
        t = s->c[argmax_cand(s)].id;
    } else if (draft < 0) {
        t = draw(s); /* a plain draw, the random stream used as mf_sampler_sample does */
    } else {
        distribution(s);
        int32_t at = -1;
        for (int32_t i = 0; i < s->n; i++)
            if (s->c[i].id == draft) { at = i; break; }
        if (at >= 0 && s->c[at].logit == -INFINITY) at = -1; /* masked in place: as if filtered out */
        const double pd = at >= 0 ? s->c[at].p : 0.0;
        if (at >= 0 && next_unit(s) < pd) {
            t = draft;
        } else {
            if (at >= 0) s->c[at].p = 0.0f;
            double total = 0;
            for (int32_t i = 0; i < s->n; i++) total += s->c[i].p;
            /* total 0: the draft held all the mass but for rounding */
            t = total > 0 ? draw_from(s, total) : draft;
        }
    }
    if (g && (st = mf_grammar_accept(g, t))) return st;
    *out = t;
    return MF_OK;
}
