/* test_hooks.c - the library's hooks: the log callback receives what the
 * library says (and stderr nothing), detokenize round-trips, the per-layer
 * residual callback sees (and may change) every layer's output, and the FFN
 * override replaces a layer's FFN - or, declining, leaves the logits bitwise
 * as they were; two contexts on one shared thread pool decode at once from
 * two threads and get the bits of one alone; a decode resumed at a layer
 * from the saved residual equals the full one bit for bit. */
#include "testutil.h"
#include "minfer.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static char g_log[8192];
static int g_log_lines;
static void log_cb(mf_log_level level, const char *msg, void *ud) {
    (void)level;
    CHECK(ud == (void *)g_log, "log callback: user data not passed through");
    size_t n = strlen(g_log);
    snprintf(g_log + n, sizeof g_log - n, "%s", msg);
    g_log_lines++;
}

typedef struct hook_state {
    int calls, rows, n_layer;
    int zero_layer;     /* layer_cb zeroes the residual after this layer (-1: never) */
    int ffn_mode;       /* 0 decline, 1 write zeros, -1 abort */
    int ffn_calls;
    bool pos_ok;
} hook_state;

static bool layer_cb(int layer, float *x, int n_rows, int n_embd, const int32_t *seq, const int32_t *pos, void *ud) {
    hook_state *h = ud;
    h->calls++;
    h->rows = n_rows;
    for (int r = 0; r < n_rows; r++) h->pos_ok &= seq[r] == 0 && pos[r] == r;
    if (layer == h->zero_layer) memset(x, 0, sizeof(float) * (size_t)n_rows * (size_t)n_embd);
    return true;
}

static int ffn_cb(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq, const int32_t *pos,
                  void *ud) {
    (void)layer, (void)xn, (void)seq, (void)pos;
    hook_state *h = ud;
    h->ffn_calls++;
    if (h->ffn_mode == 1) memset(out, 0, sizeof(float) * (size_t)n_rows * (size_t)n_embd);
    return h->ffn_mode;
}

/* resuming at a layer: the residual entering layer `at` saved, calls counted */
typedef struct resume_state {
    int at, calls, ffn_zero; /* ffn_zero: the FFN of this layer writes zeros (-1: none) */
    float *saved;
} resume_state;

static bool save_cb(int layer, float *x, int n_rows, int n_embd, const int32_t *seq, const int32_t *pos, void *ud) {
    (void)seq, (void)pos;
    resume_state *r = ud;
    r->calls++;
    if (layer == r->at - 1) memcpy(r->saved, x, sizeof(float) * (size_t)n_rows * (size_t)n_embd);
    return true;
}

static int zero_ffn_cb(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq,
                       const int32_t *pos, void *ud) {
    (void)xn, (void)seq, (void)pos;
    resume_state *r = ud;
    if (layer != r->ffn_zero) return 0;
    memset(out, 0, sizeof(float) * (size_t)n_rows * (size_t)n_embd);
    return 1;
}

static bool same_logits(mf_context *c, const float *want, int V) {
    const float *lg = mf_get_logits(c, -1);
    return lg && !memcmp(lg, want, sizeof(float) * (size_t)V);
}

/* mf_context_set_resume: a decode from the saved residual at layer 2 equals
 * the full decode bit for bit, with and without an FFN change above it,
 * runs only the layers from there, and refuses what it cannot do */
static void test_resume(mf_model *m, const mf_token *t, int n, const float *plain) {
    const int V = mf_model_n_vocab(m), L = mf_model_n_layer(m), E = mf_model_n_embd(m);
    resume_state r = {.at = 2, .ffn_zero = -1, .saved = calloc((size_t)n * E, sizeof(float))};
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64, cp.n_threads = 2, cp.n_batch = 32;
    cp.layer_cb = save_cb, cp.layer_ud = &r, cp.ffn_cb = zero_ffn_cb, cp.ffn_ud = &r;
    mf_context *c;
    if (mf_context_new(m, &cp, &c)) {
        CHECK(0, "context: %s", mf_last_error());
        return;
    }
    CHECK(mf_decode(c, t, n, false) == MF_OK && same_logits(c, plain, V) && r.calls == L, "the saving decode: %d calls",
          r.calls);
    CHECK(mf_context_set_resume(c, 2, r.saved, n) == MF_OK, "set_resume: %s", mf_last_error());
    r.calls = 0;
    mf_kv_truncate(c, 0);
    CHECK(mf_decode(c, t, n, false) == MF_OK && same_logits(c, plain, V), "resumed at layer 2: logits differ from the full decode");
    CHECK(r.calls == L - 2, "resumed at layer 2: %d layers ran, want %d", r.calls, L - 2);
    /* an FFN change at layer 3: the resumed decode equals a full one with it, and both differ from plain */
    r.ffn_zero = 3;
    mf_kv_truncate(c, 0);
    CHECK(mf_decode(c, t, n, false) == MF_OK, "resumed with a zero FFN: %s", mf_last_error());
    float *res = malloc(sizeof(float) * (size_t)V);
    memcpy(res, mf_get_logits(c, -1), sizeof(float) * (size_t)V);
    CHECK(memcmp(res, plain, sizeof(float) * (size_t)V) != 0, "zeroing layer 3's FFN changed nothing");
    CHECK(mf_context_set_resume(c, 0, NULL, 0) == MF_OK, "resume off");
    mf_kv_truncate(c, 0);
    CHECK(mf_decode(c, t, n, false) == MF_OK && same_logits(c, res, V),
          "a full decode with layer 3's FFN zeroed differs from the resumed one");
    r.ffn_zero = -1;
    mf_kv_truncate(c, 0);
    CHECK(mf_decode(c, t, n, false) == MF_OK && same_logits(c, plain, V), "resume off: logits differ from plain");
    /* refused: another row count (the cache as before), layers out of range, more rows than a pass */
    CHECK(mf_context_set_resume(c, 2, r.saved, n) == MF_OK, "set_resume again: %s", mf_last_error());
    mf_kv_truncate(c, 0);
    const mf_status st = mf_decode(c, t, n - 1, false);
    CHECK(st == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "the saved residuals are") && mf_context_n_past(c) == 0,
          "a resumed decode of other rows: %d '%s', %u positions kept", (int)st, mf_last_error(), mf_context_n_past(c));
    CHECK(mf_context_set_resume(c, 0, r.saved, n) == MF_ERR_INVALID_ARG, "resume at layer 0 accepted");
    CHECK(mf_context_set_resume(c, L, r.saved, n) == MF_ERR_INVALID_ARG &&
              strstr(mf_last_error(), "resume layer") != NULL,
          "resume at layer %d accepted: %s", L, mf_last_error());
    CHECK(mf_context_set_resume(c, 1, r.saved, 33) == MF_ERR_INVALID_ARG, "33 rows with n_batch 32 accepted");
    free(res), free(r.saved);
    mf_context_free(c);
}

/* two contexts on one shared pool, decoding at once from two threads */
typedef struct shared_job {
    mf_context *c;
    const mf_token *t;
    int n;
    const float *want;
    int V;
    int bad;
} shared_job;

static void *shared_worker(void *arg) {
    shared_job *j = arg;
    for (int rep = 0; rep < 6; rep++) {
        mf_kv_truncate(j->c, 0);
        if (mf_decode(j->c, j->t, j->n, false) || memcmp(mf_get_logits(j->c, -1), j->want, sizeof(float) * (size_t)j->V))
            j->bad++;
    }
    return NULL;
}

static float *run(mf_model *m, mf_context_params cp, const mf_token *t, int n, mf_status *st) {
    mf_context *c;
    if (mf_context_new(m, &cp, &c)) {
        CHECK(0, "context: %s", mf_last_error());
        return NULL;
    }
    const int V = mf_model_n_vocab(m);
    *st = mf_decode(c, t, n, false);
    float *out = NULL;
    if (!*st) {
        out = malloc(sizeof(float) * V);
        memcpy(out, mf_get_logits(c, -1), sizeof(float) * V);
    } else {
        CHECK(mf_context_n_past(c) == 0, "a failed decode kept %u positions", mf_context_n_past(c));
    }
    mf_context_free(c);
    return out;
}

int main(void) {
    mf_model *m;
    mf_log_set(log_cb, g_log);
    mf_model_params mp = mf_model_default_params();
    if (mf_model_load("../shared/models/stories260K.gguf", &mp, &m)) {
        CHECK(0, "load: %s", mf_last_error());
        return test_summary("test_hooks");
    }
    const int V = mf_model_n_vocab(m), L = mf_model_n_layer(m);

    /* log: a verbose context speaks through the callback only */
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.verbose = true;
    mf_context *c;
    CHECK(mf_context_new(m, &cp, &c) == MF_OK, "context: %s", mf_last_error());
    mf_context_free(c);
    CHECK(strstr(g_log, "minfer: context n_ctx 64") != NULL && g_log_lines >= 2,
          "the verbose notes did not reach the log callback (%d lines: %s)", g_log_lines, g_log);
    mf_log_set(NULL, NULL);
    cp.verbose = false;

    /* detokenize */
    const char *text = "Once upon a time, there was a little cat.";
    mf_token t[64];
    /* without BOS the SentencePiece space in front is stripped again (with BOS
     * llama_detokenize keeps it, and so do we) */
    const int n0 = mf_tokenize(m, text, strlen(text), t, 64, false, false);
    char buf[256];
    const int32_t len = mf_detokenize(m, t, n0, buf, sizeof buf, true, false);
    CHECK(len == (int32_t)strlen(text) && !memcmp(buf, text, (size_t)len), "detokenize: '%.*s'", len > 0 ? len : 0, buf);
    CHECK(mf_detokenize(m, t, n0, buf, 4, true, false) == -(int32_t)strlen(text), "detokenize into a small buffer");
    const int n = mf_tokenize(m, text, strlen(text), t, 64, true, false);

    mf_status st;
    float *plain = run(m, cp, t, n, &st);

    /* the layer callback sees every layer once per decode, with the step's rows */
    hook_state h = {.zero_layer = -1, .pos_ok = true};
    cp.layer_cb = layer_cb;
    cp.layer_ud = &h;
    float *seen = run(m, cp, t, n, &st);
    CHECK(seen && !memcmp(seen, plain, sizeof(float) * V), "a layer callback that changes nothing changed the logits");
    CHECK(h.calls == L && h.rows == n && h.pos_ok, "layer callback: %d calls (%d layers), %d rows (%d), positions %s",
          h.calls, L, h.rows, n, h.pos_ok ? "right" : "wrong");
    /* a zero residual after the last layer: RMSNorm of zeros is zeros, so every logit is 0 */
    h.zero_layer = L - 1;
    float *zero = run(m, cp, t, n, &st);
    bool all0 = zero != NULL;
    for (int i = 0; zero && i < V; i++) all0 &= zero[i] == 0.0f;
    CHECK(all0, "an edited residual did not reach the output head");
    cp.layer_cb = NULL;

    /* the FFN override: declining is bitwise the model's own FFN; zeros change the result; -1 aborts */
    hook_state f = {.zero_layer = -1, .ffn_mode = 0};
    cp.ffn_cb = ffn_cb;
    cp.ffn_ud = &f;
    float *declined = run(m, cp, t, n, &st);
    CHECK(declined && !memcmp(declined, plain, sizeof(float) * V), "a declining FFN override changed the logits");
    CHECK(f.ffn_calls == L, "FFN override asked %d times for %d layers", f.ffn_calls, L);
    f.ffn_mode = 1;
    float *noffn = run(m, cp, t, n, &st);
    double diff = 0;
    for (int i = 0; noffn && i < V; i++) diff = fmax(diff, fabs(noffn[i] - plain[i]));
    CHECK(noffn && diff > 1e-3, "replacing every FFN by zeros did not change the logits (%g)", diff);
    f.ffn_mode = -1;
    float *ab = run(m, cp, t, n, &st);
    CHECK(!ab && st == MF_ERR_ABORTED, "an FFN callback returning -1 must abort (%d: %s)", (int)st, mf_last_error());

    test_resume(m, t, n, plain);

    /* a shared thread pool: two contexts, two threads, the same bits as alone */
    mf_threadpool *tp;
    CHECK(mf_threadpool_new(2, &tp) == MF_OK && mf_threadpool_n_threads(tp) == 2, "threadpool: %s", mf_last_error());
    mf_context_params sp = mf_context_default_params();
    sp.n_ctx = 64;
    sp.threadpool = tp;
    mf_context *c1, *c2;
    CHECK(mf_context_new(m, &sp, &c1) == MF_OK && mf_context_new(m, &sp, &c2) == MF_OK, "contexts: %s", mf_last_error());
    CHECK(mf_context_n_threads(c1) == 2, "a context on a 2-thread shared pool reports %d threads", mf_context_n_threads(c1));
    CHECK(mf_context_set_threads(c1, 1) == MF_ERR_INVALID_ARG, "resizing a shared pool through a context must be refused");
    shared_job j1 = {c1, t, n, plain, V, 0}, j2 = {c2, t, n, plain, V, 0};
    pthread_t th1, th2;
    pthread_create(&th1, NULL, shared_worker, &j1);
    pthread_create(&th2, NULL, shared_worker, &j2);
    pthread_join(th1, NULL);
    pthread_join(th2, NULL);
    CHECK(!j1.bad && !j2.bad, "contexts sharing a pool from two threads: %d and %d of 6 decodes differ", j1.bad, j2.bad);
    mf_context_free(c1);
    mf_context_free(c2);
    mf_threadpool_free(tp);

    free(plain), free(seen), free(zero), free(declined), free(noffn), free(ab);
    mf_model_free(m);
    return test_summary("test_hooks");
}
