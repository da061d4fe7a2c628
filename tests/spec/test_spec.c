/* test_spec.c - the pieces of speculative decoding on hand-made data:
 * prompt lookup finds the latest, longest n-gram match; mf_sampler_verify
 * returns tokens distributed exactly as plain sampling (checked by the
 * empirical distribution for drafts of high, low and zero probability, with
 * top-k / min-p cut-offs), and is the argmax when greedy; the vocabulary check
 * refuses a draft whose tokens differ. */
#include "testutil.h"
#include "minfer.h"

#include <math.h>
#include <string.h>

static void test_lookup(void) {
    mf_token out[16];
    /* ... 5 6 7 8 ... 5 6 7 | 9 ... 5 6 7 -> the latest match continues with 9 */
    const mf_token h[] = {1, 5, 6, 7, 8, 2, 5, 6, 7, 9, 4, 3, 5, 6, 7};
    int32_t n = mf_lookup_draft(h, 15, 1, 3, 4, out);
    CHECK(n == 4 && out[0] == 9 && out[1] == 4 && out[2] == 3 && out[3] == 5, "lookup: latest 3-gram match: n %d [%d %d %d %d]",
          n, out[0], out[1], out[2], out[3]);
    /* a longer n-gram wins over a more recent shorter one: 4 6 7 matches at 1, 6 7 alone also at 7 */
    const mf_token h2[] = {4, 6, 7, 11, 12, 0, 6, 7, 13, 4, 6, 7};
    n = mf_lookup_draft(h2, 12, 2, 3, 2, out);
    CHECK(n == 2 && out[0] == 11 && out[1] == 12, "lookup: longest match first: n %d [%d %d]", n, out[0], out[1]);
    n = mf_lookup_draft(h2, 12, 2, 2, 2, out);
    CHECK(n == 2 && out[0] == 13 && out[1] == 4, "lookup: 2-grams only: the latest: n %d [%d %d]", n, out[0], out[1]);
    /* the draft stops at the end of the history */
    const mf_token h3[] = {3, 4, 5, 3, 4};
    n = mf_lookup_draft(h3, 5, 2, 2, 8, out);
    CHECK(n == 3 && out[0] == 5 && out[1] == 3 && out[2] == 4, "lookup: continuation clipped at the end: n %d", n);
    /* no match, too short a history, ngram_min above what exists */
    const mf_token h4[] = {1, 2, 3, 4};
    CHECK(mf_lookup_draft(h4, 4, 1, 3, 8, out) == 0, "lookup: no repeated token, no draft");
    CHECK(mf_lookup_draft(h4, 1, 1, 3, 8, out) == 0, "lookup: one token, no draft");
    CHECK(mf_lookup_draft(h3, 5, 3, 3, 8, out) == 0, "lookup: no 3-gram repeats");
}

/* The target's distribution under p (penalties off), as the chain computes it. */
static void expect(const float *l, int V, const mf_sampler_params *p, double *q) {
    double mx = -1e30, sum = 0;
    int order[64];
    for (int i = 0; i < V; i++) order[i] = i;
    for (int i = 0; i < V; i++) /* descending logits */
        for (int j = i + 1; j < V; j++)
            if (l[order[j]] > l[order[i]]) { int t = order[i]; order[i] = order[j]; order[j] = t; }
    int keep = p->top_k > 0 && p->top_k < V ? p->top_k : V;
    for (int i = 0; i < V; i++) q[i] = 0;
    for (int i = 0; i < keep; i++) mx = fmax(mx, l[order[i]]);
    for (int i = 0; i < keep; i++) {
        const int t = order[i];
        if (p->min_p > 0 && l[t] < mx + log(p->min_p)) continue;
        q[t] = exp((l[t] - mx) / p->temp);
        sum += q[t];
    }
    for (int i = 0; i < V; i++) q[i] /= sum;
}

static void test_verify_distribution(const char *what, const mf_sampler_params *p, const float *l, int V, mf_token draft) {
    enum { N = 100000 };
    double q[64];
    int h[64] = {0}, acc = 0;
    expect(l, V, p, q);
    mf_sampler *s;
    CHECK(mf_sampler_new(p, V, &s) == MF_OK, "sampler_new");
    for (int i = 0; i < N; i++) {
        mf_token t = -1;
        CHECK(mf_sampler_verify(s, l, NULL, draft, &t) == MF_OK && t >= 0 && t < V, "verify failed");
        h[t]++;
        acc += t == draft;
    }
    mf_sampler_free(s);
    double worst = 0;
    for (int i = 0; i < V; i++) {
        const double f = (double)h[i] / N, sd = sqrt(q[i] * (1 - q[i]) / N);
        const double z = sd > 0 ? fabs(f - q[i]) / sd : (h[i] ? 1e9 : 0);
        if (z > worst) worst = z;
        CHECK(z < 5.0, "%s, draft %d: token %d drawn %.5f of the time, the target's p %.5f (%.1f sd)", what, draft, i, f, q[i], z);
    }
    /* acceptance happens exactly as often as the draft's probability */
    const double fa = (double)acc / N;
    CHECK(fabs(fa - (draft >= 0 && draft < V ? q[draft] : 0)) < 5 * sqrt(0.25 / N) + 1e-9, "%s: acceptance %.4f", what, fa);
}

int main(void) {
    test_lookup();

    enum { V = 8 };
    const float l[V] = {3.0f, 2.5f, 2.0f, 1.0f, 0.0f, -1.0f, -2.0f, -5.0f};
    mf_sampler_params p = mf_sampler_default_params();
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    test_verify_distribution("plain", &p, l, V, 0);  /* the likeliest */
    test_verify_distribution("plain", &p, l, V, 4);  /* a middling one */
    test_verify_distribution("plain", &p, l, V, 7);  /* a rare one */
    test_verify_distribution("plain", &p, l, V, -1); /* no draft: a plain draw */
    p.temp = 0.7f;
    p.top_k = 4;
    test_verify_distribution("top-k 4, temp 0.7", &p, l, V, 1);
    test_verify_distribution("top-k 4, temp 0.7", &p, l, V, 6); /* cut off: never accepted */
    p.top_k = 0;
    p.min_p = 0.1f;
    test_verify_distribution("min-p 0.1", &p, l, V, 5);

    /* greedy: the argmax whatever the draft */
    p = mf_sampler_default_params();
    p.temp = 0;
    mf_sampler *s;
    CHECK(mf_sampler_new(&p, V, &s) == MF_OK, "sampler_new");
    for (mf_token d = -1; d < V; d++) {
        mf_token t;
        CHECK(mf_sampler_verify(s, l, NULL, d, &t) == MF_OK && t == 0, "greedy verify with draft %d gave %d", d, t);
    }
    /* with a repeat penalty the argmax moves as plain sampling's does */
    p.repeat_penalty = 4.0f;
    mf_sampler *s2;
    CHECK(mf_sampler_new(&p, V, &s2) == MF_OK, "sampler_new");
    mf_sampler_accept(s2, 0);
    mf_token t = -1;
    CHECK(mf_sampler_verify(s2, l, NULL, 0, &t) == MF_OK && t == 1, "greedy verify after a penalised 0 gave %d, want 1", t);
    CHECK(mf_sampler_sample(s2, l) == 1, "plain greedy after a penalised 0");
    mf_sampler_free(s2);
    mf_sampler_free(s);

    /* vocabularies: a model is its own draft; a different tokenizer is refused by name */
    mf_model_params mp = mf_model_default_params();
    mp.vocab_only = true;
    mf_model *a = NULL, *b = NULL, *c = NULL;
    CHECK(mf_model_load("../shared/models/zoo/llama.gguf", &mp, &a) == MF_OK, "load llama: %s", mf_last_error());
    CHECK(mf_model_load("../shared/models/zoo/llama-q8_0.gguf", &mp, &b) == MF_OK, "load llama-q8_0: %s", mf_last_error());
    CHECK(mf_model_load("../shared/models/zoo/qwen2.gguf", &mp, &c) == MF_OK, "load qwen2: %s", mf_last_error());
    if (a && b && c) {
        CHECK(mf_vocab_check_same(b, a) == MF_OK, "llama-q8_0 as a draft for llama: %s", mf_last_error());
        CHECK(mf_vocab_check_same(c, a) == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "draft model"),
              "qwen2 as a draft for llama was not refused: %s", mf_last_error());
    }
    mf_model_free(a);
    mf_model_free(b);
    mf_model_free(c);
    return test_summary("test_spec");
}
