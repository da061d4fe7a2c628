/* test_sampler.c - the sampler chain's stages on hand-made logits: greedy,
 * top-k / top-p / min-p cut-offs, repetition / frequency / presence penalties
 * (llama.cpp's rules), temperature, and seeded determinism. Each stage is
 * isolated by switching the others off, then checked by the empirical
 * distribution of many draws. */
#include "testutil.h"
#include "minfer.h"

#include <math.h>
#include <string.h>

static mf_sampler_params off(void) {
    mf_sampler_params p = mf_sampler_default_params();
    p.temp = 1.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    p.penalty_last_n = 64;
    return p;
}

/* Draws n tokens and returns the histogram over V tokens. */
static void histogram(const mf_sampler_params *p, const float *logits, int V, int n, int *h) {
    mf_sampler *s;
    CHECK(mf_sampler_new(p, V, &s) == MF_OK, "sampler_new: %s", mf_last_error());
    memset(h, 0, sizeof(int) * (size_t)V);
    for (int i = 0; i < n; i++) h[mf_sampler_sample(s, logits)]++;
    mf_sampler_free(s);
}

int main(void) {
    enum { V = 8, N = 20000 };
    /* probabilities proportional to exp(l): 0 is best */
    const float l[V] = {3.0f, 2.5f, 2.0f, 1.0f, 0.0f, -1.0f, -2.0f, -5.0f};
    int h[V];

    /* greedy */
    mf_sampler_params p = off();
    p.temp = 0;
    histogram(&p, l, V, 50, h);
    CHECK(h[0] == 50, "greedy must always pick token 0 (got %d/50)", h[0]);

    /* plain sampling at temp 1 follows softmax within a few percent */
    p = off();
    histogram(&p, l, V, N, h);
    double z = 0;
    for (int i = 0; i < V; i++) z += exp(l[i]);
    for (int i = 0; i < 4; i++) {
        double want = exp(l[i]) / z, got = (double)h[i] / N;
        CHECK(fabs(got - want) < 0.02, "softmax token %d: frequency %.3f, expected %.3f", i, got, want);
    }

    /* top-k 2: only tokens 0 and 1 */
    p = off();
    p.top_k = 2;
    histogram(&p, l, V, N, h);
    CHECK(h[0] + h[1] == N && h[1] > 0, "top-k 2 drew outside {0,1}: %d %d", h[0], h[1]);

    /* top-p: p0 = 0.46, p0+p1 = 0.74, +p2 = 0.91 -> top-p 0.8 keeps 3 tokens */
    p = off();
    p.top_p = 0.8f;
    histogram(&p, l, V, N, h);
    CHECK(h[0] + h[1] + h[2] == N && h[2] > 0, "top-p 0.8 should keep exactly tokens 0..2 (%d %d %d)", h[0], h[1], h[2]);

    /* min-p 0.3: keep p_i >= 0.3 p_max <=> l_i >= 3 + ln 0.3 = 1.796 -> tokens 0..2 */
    p = off();
    p.min_p = 0.3f;
    histogram(&p, l, V, N, h);
    CHECK(h[0] + h[1] + h[2] == N && h[2] > 0, "min-p 0.3 should keep exactly tokens 0..2");

    /* low temperature sharpens: token 0 dominates */
    p = off();
    p.temp = 0.1f;
    histogram(&p, l, V, 2000, h);
    CHECK(h[0] > 1980, "temp 0.1: token 0 drawn %d/2000", h[0]);

    /* repetition penalty: positive logit divided, negative multiplied */
    p = off();
    p.temp = 0;
    p.repeat_penalty = 2.0f;
    mf_sampler *s;
    mf_sampler_new(&p, V, &s);
    mf_sampler_accept(s, 0); /* 3.0 -> 1.5: token 1 (2.5) wins */
    CHECK(mf_sampler_sample(s, l) == 1, "repeat penalty: expected token 1");
    mf_sampler_accept(s, 1); /* 2.5 -> 1.25: token 2 (2.0) wins */
    CHECK(mf_sampler_sample(s, l) == 2, "repeat penalty: expected token 2");
    mf_sampler_free(s);
    /* a negative logit gets multiplied: -1 * 2 = -2, so with all else penalised... */
    const float neg[3] = {-1.0f, -1.5f, -3.0f};
    mf_sampler_new(&p, 3, &s);
    mf_sampler_accept(s, 0); /* -1 -> -2: token 1 (-1.5) wins */
    CHECK(mf_sampler_sample(s, neg) == 1, "repeat penalty on a negative logit must multiply");
    mf_sampler_free(s);

    /* frequency + presence: token 0 seen 3 times -> 3 - 3*0.2 - 0.5 = 1.9 < 2.0 */
    p = off();
    p.temp = 0;
    p.freq_penalty = 0.2f;
    p.presence_penalty = 0.5f;
    mf_sampler_new(&p, V, &s);
    for (int i = 0; i < 3; i++) mf_sampler_accept(s, 0);
    mf_sampler_accept(s, 1); /* 2.5 - 0.2 - 0.5 = 1.8 */
    CHECK(mf_sampler_sample(s, l) == 2, "frequency/presence penalties: expected token 2");
    mf_sampler_free(s);

    /* penalty window: only the last N tokens count */
    p = off();
    p.temp = 0;
    p.repeat_penalty = 2.0f;
    p.penalty_last_n = 2;
    mf_sampler_new(&p, V, &s);
    mf_sampler_accept(s, 0);
    mf_sampler_accept(s, 5);
    mf_sampler_accept(s, 6); /* token 0 fell out of the window */
    CHECK(mf_sampler_sample(s, l) == 0, "penalty window of 2 must forget token 0");
    mf_sampler_free(s);

    /* determinism: same seed same stream; reset replays it */
    p = mf_sampler_default_params();
    p.seed = 42;
    mf_token a[64], b[64];
    mf_sampler_new(&p, V, &s);
    for (int i = 0; i < 64; i++) a[i] = mf_sampler_sample(s, l);
    mf_sampler_reset(s);
    for (int i = 0; i < 64; i++) b[i] = mf_sampler_sample(s, l);
    CHECK(!memcmp(a, b, sizeof a), "reset must replay the same draws");
    mf_sampler_free(s);

    /* bad parameters are refused */
    p = mf_sampler_default_params();
    p.repeat_penalty = 0;
    CHECK(mf_sampler_new(&p, V, &s) != MF_OK, "repeat penalty 0 must be refused");
    CHECK(mf_sampler_new(NULL, 0, &s) != MF_OK, "vocabulary of 0 must be refused");
    return test_summary("test_sampler");
}
