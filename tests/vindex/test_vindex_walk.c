/* test_vindex_walk.c - the walk FFN's threaded, vectorised gather: the AVX2
 * and AVX-512 down-row kernels equal their scalar twin bit for bit (random
 * f32, f16 and q8_0 rows, lengths with and without a tail) and a q8_0 or f16
 * row adds exactly what its f32 decoding adds; the two-row gate/up dot and
 * the KNN's raw gate scores equal the KNN's scalar twin; on zoo models (SwiGLU, GeGLU
 * and non-gated GELU; f32, f16 and q8_0 features) the walk's logits for
 * several K are bitwise alike at the scalar level on 1 thread and at the
 * CPU's best level on 1, 2 and 3 threads and on a pool the context and the
 * vindex share (mf_vindex_set_threadpool), and through an exhaustive HNSW
 * search (the walk then scores gate rows itself); K = all equals the dense FFN
 * within test_vindex_build's tolerances; a mixture-of-experts model is
 * refused. */
#include "testutil.h"
#include "minfer.h"
#include "vindex/walk_kern.h"
#include "vindex/knn_kern.h"
#include "vindex/vindex.h"
#include "cpu/kern/features.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* test_vindex_build.c's: another sum order (and exact GELU) than the dense FFN */
#define WALK_TOL 2e-4
#define WALK_TOL_GELU 5e-3

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static double urand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}
static float grand(void) { return (float)(sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand())); }

static void test_kernels(void) {
    static const mf_type types[3] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_Q8_0};
    static const int ns[] = {1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 64, 96, 100, 255, 2560};
    static const float as[] = {0.75f, -3.1f, 1e-30f, 1e20f, 0.0f};
    const mf_cpu_level lv = mf_cpu_level_supported();
    if (lv < MF_CPU_AVX512) printf("test_vindex_walk: no AVX-512 on this CPU, its kernels not run\n");
    for (int it = 0; it < 3; it++) {
        const mf_type t = types[it];
        const vx_axpy_fn ref = vx_axpy_scalar(t), f32 = vx_axpy_scalar(MF_TYPE_F32);
        const vx_axpy_fn fast[2] = {lv >= MF_CPU_AVX2 ? vx_axpy_avx2(t) : NULL, lv >= MF_CPU_AVX512 ? vx_axpy_avx512(t) : NULL};
        CHECK(ref && vx_axpy_avx2(t) && vx_axpy_avx512(t), "no gather kernel for %s", mf_type_name(t));
        if (!ref) continue;
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
            const int n = ns[in];
            if (t == MF_TYPE_Q8_0 && n % 32) continue;
            float *w = malloc((size_t)n * sizeof *w), *wd = malloc((size_t)n * sizeof *wd);
            float *acc = malloc((size_t)n * sizeof *acc), *a0 = malloc((size_t)n * sizeof *a0);
            float *a1 = malloc((size_t)n * sizeof *a1);
            uint8_t *row = malloc(mf_row_size(t, n));
            for (int i = 0; i < n; i++) w[i] = grand() * (i % 13 == 0 ? 50.0f : 1.0f), acc[i] = grand();
            mf_type_traits_ref(t)->from_float_ref(w, row, n);
            mf_type_traits_ref(t)->to_float(row, wd, n);
            for (size_t ia = 0; ia < sizeof as / sizeof as[0]; ia++) {
                const float a = as[ia];
                memcpy(a0, acc, (size_t)n * sizeof *a0);
                ref(a, row, n, a0);
                memcpy(a1, acc, (size_t)n * sizeof *a1);
                f32(a, wd, n, a1);
                CHECK(!memcmp(a0, a1, (size_t)n * sizeof *a0), "%s n=%d a=%g: the row adds other than its f32 decoding",
                      mf_type_name(t), n, a);
                for (int k = 0; k < 2; k++) {
                    if (!fast[k]) continue;
                    memcpy(a1, acc, (size_t)n * sizeof *a1);
                    fast[k](a, row, n, a1);
                    CHECK(!memcmp(a0, a1, (size_t)n * sizeof *a0), "%s %s n=%d a=%g: differs from the scalar twin",
                          k ? "AVX-512" : "AVX2", mf_type_name(t), n, a);
                }
            }
            free(w), free(wd), free(acc), free(a0), free(a1), free(row);
        }
    }
}

/* vx_dot2_fn: each of the two scores is the twin's score of that row, on
 * the same row twice, two rows, and lengths with tails. */
static void test_dot2(void) {
    static const mf_type types[3] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_Q8_0};
    static const int ns[] = {8, 13, 32, 37, 64, 100, 2560};
    for (int it = 0; it < 3; it++) {
        const mf_type t = types[it];
        const vx_dot_fn ref = vx_dot_scalar(t);
        const vx_dot2_fn f2[2] = {vx_dot2_best(t), mf_cpu_level_supported() >= MF_CPU_AVX512 ? vx_dot2_avx512(t) : NULL};
        CHECK(ref && f2[0], "no dot2 for %s", mf_type_name(t));
        if (!ref || !f2[0]) continue;
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
            const int n = ns[in];
            if (t == MF_TYPE_Q8_0 && n % 32) continue;
            const size_t rb = mf_row_size(t, n);
            float *w = malloc((size_t)2 * n * sizeof *w), *x = malloc((size_t)n * sizeof *x);
            uint8_t *rows = malloc(2 * rb);
            for (int i = 0; i < 2 * n; i++) w[i] = grand() * (i % 11 == 0 ? 30.0f : 1.0f);
            for (int i = 0; i < n; i++) x[i] = grand();
            mf_type_traits_ref(t)->from_float_ref(w, rows, n);
            mf_type_traits_ref(t)->from_float_ref(w + n, rows + rb, n);
            float e[2], got[2];
            ref(rows, rb, 2, x, 0, 1, n, e, 1);
            for (int k = 0; k < 2; k++) {
                if (!f2[k]) continue;
                f2[k](rows, rows + rb, x, n, got);
                CHECK(!memcmp(e, got, sizeof e), "dot2 %s %s n=%d: %.9g %.9g vs the twin's %.9g %.9g", k ? "AVX-512" : "best",
                      mf_type_name(t), n, got[0], got[1], e[0], e[1]);
                f2[k](rows + rb, rows + rb, x, n, got);
                CHECK(got[0] == e[1] && got[1] == e[1], "dot2 %s %s n=%d: a row paired with itself", k ? "AVX-512" : "best",
                      mf_type_name(t), n);
            }
            free(w), free(x), free(rows);
        }
    }
}

static const mf_token g_ids[] = {1, 20, 30, 40, 7, 3};
enum { NT = sizeof g_ids / sizeof g_ids[0] };

/* The logits of every position of g_ids, the FFN given by (cb, ud). */
static float *logits_of(mf_model *m, int threads, mf_threadpool *tp, mf_ffn_fn cb, void *ud, int *nv) {
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 64, cp.n_threads = threads, cp.threadpool = tp, cp.kv_type = MF_KV_F32, cp.ffn_cb = cb, cp.ffn_ud = ud;
    mf_context *c;
    float *out = NULL;
    if (mf_context_new(m, &cp, &c)) {
        CHECK(0, "context: %s", mf_last_error());
        return NULL;
    }
    if (!mf_decode(c, g_ids, NT, true)) {
        *nv = mf_model_n_vocab(m);
        out = malloc((size_t)NT * *nv * sizeof(float));
        for (int i = 0; i < NT; i++) memcpy(out + (size_t)i * *nv, mf_get_logits(c, i), (size_t)*nv * sizeof(float));
    } else CHECK(0, "decode: %s", mf_last_error());
    mf_context_free(c);
    return out;
}

/* One walk's logits at a CPU level and thread count (the model and the walk
 * made after the level is set: they pick their kernels then); threads < 0:
 * a pool of -threads shared by the context and the vindex. */
static float *walk_logits(mf_vindex *v, const char *path, int k, mf_cpu_level lv, int threads, int *nv) {
    mf_cpu_level_override(lv);
    mf_model_params mp = mf_model_default_params();
    mf_model *m;
    mf_walk *w = NULL;
    float *out = NULL;
    if (mf_model_load(path, &mp, &m)) {
        CHECK(0, "%s: %s", path, mf_last_error());
        return NULL;
    }
    mf_threadpool *tp = NULL;
    if (threads < 0 && mf_threadpool_new(-threads, &tp)) CHECK(0, "pool: %s", mf_last_error());
    const mf_status s = tp ? mf_vindex_set_threadpool(v, tp) : mf_vindex_set_threads(v, threads);
    if (!s && !mf_walk_new(v, m, k, &w)) out = logits_of(m, threads, tp, mf_walk_ffn, w, nv);
    else CHECK(0, "walk k=%d: %s", k, mf_last_error());
    mf_walk_free(w);
    mf_model_free(m);
    if (tp) mf_vindex_set_threads(v, 1), mf_threadpool_free(tp);
    return out;
}

static void check_model(const char *tmp, const char *path, const char *ftype, double tol) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s-%s", tmp, strrchr(path, '/') + 1, ftype);
    mf_vindex_build_params bp = mf_vindex_default_build_params();
    bp.level = MF_VINDEX_INFERENCE, bp.feature_type = ftype, bp.down_top_k = 0, bp.n_threads = 2;
    mf_vindex *v = NULL;
    if (mf_vindex_build(path, dir, &bp) || mf_vindex_open(dir, &v)) {
        CHECK(0, "%s (%s): %s", path, ftype, mf_last_error());
        mf_vindex_free(v);
        return;
    }
    mf_vindex_info vi;
    mf_vindex_get_info(v, &vi);
    const int F = vi.n_features, E = vi.n_embd;
    {
        /* the raw gate scores the KNN hands the walk are the twin's dots, for every row */
        float *x = malloc((size_t)3 * E * sizeof *x), *g = malloc((size_t)3 * F * sizeof *g), *sc = malloc(3 * 8 * sizeof *sc);
        int32_t *ft = malloc(3 * 8 * sizeof *ft);
        for (int i = 0; i < 3 * E; i++) x[i] = grand();
        bool set = false;
        CHECK(vx_knn_g(v, 1, x, 3, 8, VX_RANK_SILU_ABS, NULL, ft, sc, g, &set) == MF_OK && set, "%s: vx_knn_g", dir);
        const vx_dot_fn ref = vx_dot_scalar(v->ix.ftype);
        int bad = 0;
        for (int q = 0; set && q < 3; q++)
            for (int f = 0; f < F; f++) {
                float e;
                ref(vx_layer_rows(v, VX_GATE, 1) + (size_t)f * v->row_bytes, v->row_bytes, 1, x + (size_t)q * E, 0, 1, E, &e, 1);
                bad += e != g[(size_t)q * F + f];
            }
        CHECK(!bad, "%s: %d raw gate scores from the KNN differ from the twin's", dir, bad);
        free(x), free(g), free(sc), free(ft);
    }
    const mf_cpu_level best = mf_cpu_level_supported();
    const int ks[] = {1, 5, 17, F / 10, F / 2 + 3, F};
    int nv = 0;
    for (size_t ik = 0; ik < sizeof ks / sizeof ks[0]; ik++) {
        const int k = ks[ik];
        float *ref = walk_logits(v, path, k, MF_CPU_SCALAR, 1, &nv);
        static const int ths[] = {1, 2, 3, -2};
        for (int it = 0; ref && it < 4; it++) {
            float *l = walk_logits(v, path, k, best, ths[it], &nv);
            CHECK(l && !memcmp(ref, l, (size_t)NT * nv * sizeof(float)),
                  "%s (%s) k=%d: %s on %d threads%s differs from the scalar walk on 1", path, ftype, k,
                  mf_cpu_level_name(best), abs(ths[it]), ths[it] < 0 ? " (a shared pool)" : "");
            free(l);
        }
        if (k == F / 10) {
            /* through HNSW the KNN hands over no scores: the walk computes them (gate and up in one
             * pass); with ef >= the features the graph search is exhaustive, the same features */
            mf_vindex_hnsw_params hp = mf_vindex_default_hnsw_params();
            hp.m = 4, hp.ef = F;
            float *h = NULL;
            if (mf_vindex_set_hnsw(v, &hp) == MF_OK) h = walk_logits(v, path, k, best, 2, &nv);
            CHECK(ref && h && !memcmp(ref, h, (size_t)NT * nv * sizeof(float)), "%s (%s) k=%d: the walk via HNSW differs",
                  path, ftype, k);
            mf_vindex_set_hnsw(v, NULL);
            free(h);
        }
        if (k == F && tol > 0) {
            /* every feature: the dense FFN in another sum order */
            mf_model_params mp = mf_model_default_params();
            mf_model *m;
            float *d = NULL;
            if (!mf_model_load(path, &mp, &m)) d = logits_of(m, 2, NULL, NULL, NULL, &nv), mf_model_free(m);
            double dm = 0;
            for (size_t i = 0; ref && d && i < (size_t)NT * nv; i++) dm = fmax(dm, fabs(ref[i] - d[i]));
            CHECK(ref && d && dm <= tol, "%s (%s): walk over all features differs from dense by %g", path, ftype, dm);
            printf("%-24s %-5s walk(all) vs dense: max |logit diff| %.3g\n", strrchr(path, '/') + 1, ftype, dm);
            free(d);
        }
        free(ref);
    }
    mf_cpu_level_override(best);
    mf_vindex_free(v);
}

/* The walk is of dense FFNs: a mixture of experts is refused by name. */
static void check_moe(const char *tmp, const char *path) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmp, strrchr(path, '/') + 1);
    mf_vindex_build_params bp = mf_vindex_default_build_params();
    bp.level = MF_VINDEX_INFERENCE, bp.down_top_k = 0, bp.n_threads = 2;
    mf_vindex *v = NULL;
    mf_model *m = NULL;
    mf_model_params mp = mf_model_default_params();
    if (mf_vindex_build(path, dir, &bp) || mf_vindex_open(dir, &v) || mf_model_load(path, &mp, &m)) {
        CHECK(0, "%s: %s", path, mf_last_error());
        mf_vindex_free(v);
        return;
    }
    mf_walk *w = NULL;
    const mf_status s = mf_walk_new(v, m, 8, &w);
    CHECK(s == MF_ERR_UNSUPPORTED && !w && strstr(mf_last_error(), "mixture of experts"), "%s: walk not refused (%s: %s)",
          path, mf_status_name(s), mf_last_error());
    mf_walk_free(w);
    mf_model_free(m);
    mf_vindex_free(v);
}

int main(void) {
    test_kernels();
    test_dot2();
    char tmp[256], cmd[600];
    snprintf(tmp, sizeof tmp, "/tmp/test_vindex_walk.%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmp);
    if (system(cmd) != 0) return 1;
    check_model(tmp, "../shared/models/zoo/llama.gguf", "f32", WALK_TOL);
    check_model(tmp, "../shared/models/zoo/llama.gguf", "q8_0", 0);
    check_model(tmp, "../shared/models/zoo/gemma3.gguf", "f16", 0);
    check_model(tmp, "../shared/models/zoo/gpt2.gguf", "f32", WALK_TOL_GELU);
    check_moe(tmp, "../shared/models/zoo/qwen3moe.gguf");
    check_moe(tmp, "../shared/models/zoo/mixtral.gguf");
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) CHECK(0, "cannot remove %s", tmp);
    return test_summary("test_vindex_walk");
}
