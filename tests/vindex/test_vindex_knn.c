/* test_vindex_knn.c - the gate KNN: the AVX2 and AVX-512 kernels (the
 * latter where the CPU has it) equal their scalar twins bit for bit (random
 * rows of every gate type, every tile shape and tail of rows, queries and
 * elements) and all are within the float sum's rounding bound of a float64
 * dot; the
 * top-K of mf_vindex_knn equals a float64 brute-force reference (up to ties
 * closer than rounding) for f32, f16 and q8_0 gates built from a random
 * model (synth tiny) and a real one (stories260K), for random and real
 * (embedding) queries, single and batched, and it does not depend on the
 * thread count; a k above the 4096 the heaps start with grows them and
 * still equals the reference. The q8_0 integer pre-scan: its VNNI kernel
 * equals its twin, its bound holds on stressing queries, and the KNN through
 * it equals the float scan bit for bit. */
#include "testutil.h"
#include "minfer.h"
#include "vindex/knn_kern.h"
#include "vindex/vindex.h"
#include "rand_vindex.h"
#include "cpu/kern/features.h"
#include "quant/types.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t g_rng = 0x9e3779b97f4a7c15ull;
static double urand(void) {
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (double)(g_rng >> 11) / 9007199254740992.0;
}
static float grand(void) { return (float)(sqrt(-2 * log(urand() + 1e-300)) * cos(6.283185307179586 * urand())); }

static const mf_type g_types[3] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_Q8_0};

/* Every fast kernel this CPU runs against the scalar twin, bitwise: rows
 * counts that reach every tile shape (16, 8, 2 and a lone row) and their
 * mixes, 1-8 queries, element counts with and without a tail. */
static void test_kernels(void) {
    const int ns[] = {32, 64, 96, 37, 8, 13, 27, 40, 256, 2560};
    const int nrs[] = {1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 24, 31, 33, 37};
    enum { NR = 37, NX = 8, SS = 40 };
    const int avx512 = mf_cpu_level_supported() >= MF_CPU_AVX512;
    for (int it = 0; it < 3; it++) {
        const mf_type t = g_types[it];
        vx_dot_fn ref = vx_dot_scalar(t);
        vx_dot_fn fast[2] = {vx_dot_avx2(t), avx512 ? vx_dot_avx512(t) : NULL};
        const char *fname[2] = {"AVX2", "AVX-512"};
        CHECK(ref && fast[0] && vx_dot_avx512(t), "no kernel for %s", mf_type_name(t));
        if (!ref || !fast[0]) continue;
        if (!avx512 && it == 0) printf("test_vindex_knn: no AVX-512 on this CPU, its kernels not run\n");
        for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
            const int n = ns[in];
            if (t == MF_TYPE_Q8_0 && n % 32) continue;
            const size_t rb = mf_row_size(t, n);
            uint8_t *rows = malloc(rb * NR);
            float *w = malloc((size_t)NR * n * sizeof(float)), *x = malloc((size_t)NX * n * sizeof(float));
            float *wd = malloc((size_t)NR * n * sizeof(float));
            for (int i = 0; i < NR * n; i++) w[i] = grand() * (i % 17 == 0 ? 100.0f : 1.0f);
            for (int i = 0; i < NX * n; i++) x[i] = grand();
            for (int r = 0; r < NR; r++) {
                mf_type_traits_ref(t)->from_float_ref(w + (size_t)r * n, rows + r * rb, n);
                mf_type_traits_ref(t)->to_float(rows + r * rb, wd + (size_t)r * n, n);
            }
            for (size_t ir = 0; ir < sizeof nrs / sizeof nrs[0]; ir++)
                for (int snx = 1; snx <= NX; snx++) {
                    const int snr = nrs[ir];
                    if (n == 2560 && snx > 2) continue; /* the bench shape: enough with 1 and 2 queries */
                    float sa[NX * SS], sb[NX * SS];
                    memset(sa, 0, sizeof sa);
                    ref(rows, rb, snr, x, (size_t)n, snx, n, sa, SS);
                    for (int fi = 0; fi < 2; fi++) {
                        if (!fast[fi]) continue;
                        /* a sentinel past the rows asked for: nothing else is written */
                        for (int i = 0; i < NX * SS; i++) sb[i] = -7.0f;
                        fast[fi](rows, rb, snr, x, (size_t)n, snx, n, sb, SS);
                        int same = 1;
                        for (int q = 0; q < NX; q++)
                            for (int r = 0; r < SS; r++) {
                                const int in_range = q < snx && r < snr;
                                if (in_range ? memcmp(&sa[q * SS + r], &sb[q * SS + r], 4) : sb[q * SS + r] != -7.0f)
                                    same = 0;
                            }
                        CHECK(same, "%s n=%d nr=%d nx=%d: %s != scalar", mf_type_name(t), n, snr, snx, fname[fi]);
                    }
                    for (int q = 0; q < snx; q++)
                        for (int r = 0; r < snr; r++) {
                            double d = 0, mag = 0;
                            for (int i = 0; i < n; i++) {
                                d += (double)wd[(size_t)r * n + i] * x[(size_t)q * n + i];
                                mag += fabs((double)wd[(size_t)r * n + i] * x[(size_t)q * n + i]);
                            }
                            /* 2^-24 per rounding on a lane's path: n/8 adds, the
                             * block's and the reduction's few more */
                            const double tol = (n / 8 + 16) * 5.960464477539063e-8 * mag + 1e-30;
                            CHECK(fabs(sa[q * SS + r] - d) <= tol, "%s n=%d: %g vs float64 %g",
                                  mf_type_name(t), n, sa[q * SS + r], d);
                        }
                }
            free(rows), free(w), free(x), free(wd);
        }
    }
}

/* The q8_0 integer pre-scan: the VNNI kernel equals its scalar twin bit for
 * bit, and the widened bound holds against the float scan's own score for
 * every row, on queries made to stress it (outliers, tiny and zero blocks,
 * saturated rows, zero scales, odd block counts); non-finite and huge
 * queries are refused. */
static void test_q8pre(void) {
    const int ns[] = {32, 64, 96, 288, 2560};
    const int vnni = mf_cpu_level_supported() >= MF_CPU_AVX512_VNNI;
    vx_q8pre_fn ref = vx_q8pre_scalar(), fast = vnni ? vx_q8pre_vnni() : NULL;
    vx_dot_fn dot = vx_dot_scalar(MF_TYPE_Q8_0);
    double worst = 0;
    for (size_t in = 0; in < sizeof ns / sizeof ns[0]; in++) {
        const int n = ns[in], NR = 21, np = (n / 32 + 1) / 2;
        const size_t rb = mf_row_size(MF_TYPE_Q8_0, n);
        uint8_t *rows = malloc(rb * NR), *u = malloc((size_t)np * 64);
        float *w = malloc((size_t)NR * n * sizeof(float)), *x = malloc((size_t)n * sizeof(float));
        float *dx = malloc((size_t)np * 16 * sizeof(float)), *c = malloc((size_t)np * 16 * sizeof(float));
        for (int kind = 0; kind < 6; kind++) {
            for (int i = 0; i < NR * n; i++) w[i] = grand() * (kind == 3 && i % 5 == 0 ? 50.0f : 1.0f);
            if (kind == 4)
                for (int i = 0; i < n; i++) w[7 * n + i] = 0.0f; /* a row of zero scales */
            for (int r = 0; r < NR; r++) mf_type_traits_ref(MF_TYPE_Q8_0)->from_float_ref(w + (size_t)r * n, rows + r * rb, n);
            for (int i = 0; i < n; i++) {
                const float g = grand();
                x[i] = kind == 1 ? (i % 97 == 3 ? 3e3f * g : g)           /* massive activations */
                       : kind == 2 ? (i < 32 ? 1e-35f * g : i < 64 ? 0.0f : g) /* tiny, zero blocks */
                       : kind == 5 ? 1e15f * g                              /* large but accepted */
                                   : g;
            }
            CHECK(vx_q8_prep(x, n, u, dx, c), "n=%d kind %d: query refused", n, kind);
            float sa[21], ea[21], sb[21], eb[21], t[21];
            ref(rows, rb, NR, &(vx_q8q){u, dx, c}, n, sa, ea);
            dot(rows, rb, NR, x, (size_t)n, 1, n, t, 21);
            if (fast) {
                for (int nr = 1; nr <= NR; nr += 4) {
                    fast(rows, rb, nr, &(vx_q8q){u, dx, c}, n, sb, eb);
                    CHECK(!memcmp(sa, sb, (size_t)nr * 4) && !memcmp(ea, eb, (size_t)nr * 4),
                          "n=%d kind %d nr=%d: VNNI pre-scan != scalar twin", n, kind, nr);
                }
            }
            for (int r = 0; r < NR; r++) {
                const float e = vx_q8_widen(sa[r], ea[r]);
                CHECK(fabsf(t[r] - sa[r]) <= e, "n=%d kind %d row %d: |%.9g - %.9g| > bound %.9g", n, kind, r, t[r], sa[r], e);
                if (e > 0 && fabsf(t[r] - sa[r]) / e > worst) worst = fabsf(t[r] - sa[r]) / e;
            }
        }
        x[5] = NAN;
        CHECK(!vx_q8_prep(x, n, u, dx, c), "NaN query accepted");
        x[5] = INFINITY;
        CHECK(!vx_q8_prep(x, n, u, dx, c), "inf query accepted");
        x[5] = 2e20f;
        CHECK(!vx_q8_prep(x, n, u, dx, c), "query beyond 1e20 accepted");
        free(rows), free(u), free(w), free(x), free(dx), free(c);
    }
    printf("test_vindex_knn: q8_0 pre-scan: worst error / bound %.3f%s\n", worst, vnni ? "" : " (no VNNI: twin only)");
}

/* mf_vindex_knn through the pre-scan equals the float scan bit for bit
 * (features and scores), on 1 and 3 threads, with deleted features, for
 * random rows of spread norms and queries with and without outliers. */
static void test_q8pre_knn(const char *tmp) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/pre", tmp);
    const int F = 3000, E = 256, NQ = 11;
    mf_vindex *v;
    if (rand_vindex_write(dir, 2, F, E, "q8_0", 5, 0.5) || mf_vindex_open(dir, &v)) {
        CHECK(0, "%s: %s", dir, mf_last_error());
        return;
    }
    float *x = malloc((size_t)NQ * E * sizeof *x);
    for (int i = 0; i < NQ * E; i++) x[i] = grand() * (i % 61 == 0 ? 40.0f : 1.0f);
    x[3 * E + 7] = NAN; /* one query the pre-scan refuses: its group takes the float scan */
    const int ks[] = {1, 10, 150, 3000};
    int32_t *fa = malloc((size_t)NQ * F * sizeof *fa), *fb = malloc((size_t)NQ * F * sizeof *fb);
    float *sa = malloc((size_t)NQ * F * sizeof *sa), *sb = malloc((size_t)NQ * F * sizeof *sb);
    for (int del = 0; del < 2; del++) {
        if (del)
            for (int f = 0; f < F; f += 7) mf_vindex_delete_feature(v, 1, f);
        for (int ik = 0; ik < 4; ik++)
            for (int th = 1; th <= 3; th += 2) {
                const int k = ks[ik];
                for (int layer = 0; layer < 2; layer++) {
                    mf_vindex_set_threads(v, th);
                    v->q8pre_mode = 1;
                    mf_status s1 = mf_vindex_knn(v, layer, x, NQ, k, fa, sa);
                    v->q8pre_mode = 2;
                    mf_status s2 = mf_vindex_knn(v, layer, x, NQ, k, fb, sb);
                    CHECK(!s1 && !s2, "knn: %s", mf_last_error());
                    CHECK(!memcmp(fa, fb, (size_t)NQ * k * 4) && !memcmp(sa, sb, (size_t)NQ * k * 4),
                          "pre-scan != float scan: layer %d k=%d threads %d deleted %d", layer, k, th, del);
                }
            }
    }
    v->q8pre_mode = 0;
    free(fa), free(fb), free(sa), free(sb), free(x);
    mf_vindex_free(v);
}

/* mf_vindex_knn against the float64 reference for queries x[n_rows][E]. */
static void check_knn(mf_vindex *v, const char *what, const float *x, int n_rows, int k) {
    mf_vindex_info vi;
    mf_vindex_get_info(v, &vi);
    const int E = vi.n_embd, F = vi.n_features;
    int32_t *feat = malloc((size_t)n_rows * k * sizeof *feat), *feat3 = malloc((size_t)n_rows * k * sizeof *feat);
    float *sc = malloc((size_t)n_rows * k * sizeof *sc), *sc3 = malloc((size_t)n_rows * k * sizeof *sc);
    double *refs = malloc((size_t)F * sizeof *refs), *sorted = malloc((size_t)F * sizeof *sorted);
    float *row = malloc((size_t)E * sizeof *row);
    mf_vindex_set_threads(v, 1);
    mf_status s = mf_vindex_knn(v, 0, x, n_rows, k, feat, sc);
    mf_vindex_set_threads(v, 3);
    mf_status s3 = mf_vindex_knn(v, 0, x, n_rows, k, feat3, sc3);
    CHECK(!s && !s3, "%s: knn: %s", what, mf_last_error());
    CHECK(!memcmp(feat, feat3, (size_t)n_rows * k * 4) && !memcmp(sc, sc3, (size_t)n_rows * k * 4),
          "%s k=%d: 1 and 3 threads differ", what, k);
    for (int q = 0; q < n_rows; q++) {
        double mag = 0;
        for (int f = 0; f < F; f++) {
            mf_vindex_feature_row(v, 0, 0, f, row);
            double d = 0, m = 0;
            for (int e = 0; e < E; e++) d += (double)row[e] * x[(size_t)q * E + e], m += fabs((double)row[e] * x[(size_t)q * E + e]);
            refs[f] = sorted[f] = d;
            if (m > mag) mag = m;
        }
        /* k-th largest reference score */
        for (int i = 0; i < k; i++)
            for (int j = i + 1; j < F; j++)
                if (sorted[j] > sorted[i]) {
                    double t = sorted[i]; sorted[i] = sorted[j]; sorted[j] = t;
                }
        const double kth = sorted[k - 1], tol = 1e-6 * mag;
        char *seen = calloc((size_t)F, 1);
        int ok = 1;
        for (int i = 0; i < k; i++) {
            const int32_t f = feat[(size_t)q * k + i];
            if (f < 0 || f >= F || seen[f]) { ok = 0; break; }
            seen[f] = 1;
            if (fabs(sc[(size_t)q * k + i] - refs[f]) > tol || refs[f] < kth - 2 * tol) ok = 0;
            if (i && sc[(size_t)q * k + i] > sc[(size_t)q * k + i - 1]) ok = 0;
        }
        for (int f = 0; ok && f < F; f++)
            if (refs[f] > kth + 2 * tol && !seen[f]) ok = 0;
        CHECK(ok, "%s k=%d row %d: top-K differs from the float64 reference", what, k, q);
        free(seen);
    }
    free(feat), free(feat3), free(sc), free(sc3), free(refs), free(sorted), free(row);
}

static void test_knn(const char *model, const char *tmp) {
    for (int it = 0; it < 3; it++) {
        char dir[512], what[600];
        snprintf(dir, sizeof dir, "%s/%s", tmp, mf_type_name(g_types[it]));
        mf_vindex_build_params bp = mf_vindex_default_build_params();
        bp.feature_type = mf_type_name(g_types[it]);
        bp.down_top_k = 0;
        bp.n_threads = 2;
        mf_vindex *v;
        if (mf_vindex_build(model, dir, &bp) || mf_vindex_open(dir, &v)) {
            CHECK(0, "%s: %s", dir, mf_last_error());
            continue;
        }
        mf_vindex_info vi;
        mf_vindex_get_info(v, &vi);
        const int E = vi.n_embd, n = 11;
        float *x = malloc((size_t)n * E * sizeof *x);
        for (int i = 0; i < n * E; i++) x[i] = grand();
        snprintf(what, sizeof what, "%s %s random queries", model, bp.feature_type);
        const int ks[] = {1, 10, vi.n_features};
        for (int i = 0; i < 3; i++) check_knn(v, what, x, ks[i] == 1 ? 1 : n, ks[i]);
        for (int q = 0; q < n; q++) mf_vindex_embedding(v, 5 + 37 * q, x + (size_t)q * E);
        snprintf(what, sizeof what, "%s %s embedding queries", model, bp.feature_type);
        for (int i = 0; i < 3; i++) check_knn(v, what, x, n, ks[i]);
        /* refused: out-of-range layer and k */
        int32_t f1;
        float s1;
        CHECK(mf_vindex_knn(v, vi.n_layer, x, 1, 1, &f1, &s1) == MF_ERR_INVALID_ARG, "bad layer accepted");
        CHECK(mf_vindex_knn(v, 0, x, 1, vi.n_features + 1, &f1, &s1) == MF_ERR_INVALID_ARG, "k > features accepted");
        free(x);
        mf_vindex_free(v);
    }
}

/* k above the 4096 the heaps are sized for at open (a walk at K = 25% of
 * 64k features): the heaps grow once and the answer is still the float64
 * reference's, on 1 and 3 threads; smaller k after the growth too. */
static void test_large_k(const char *tmp) {
    char dir[300];
    snprintf(dir, sizeof dir, "%s/wide", tmp);
    const int F = 5000, E = 32;
    mf_vindex *v;
    if (rand_vindex_write(dir, 1, F, E, "f16", 11, 0.5) || mf_vindex_open(dir, &v)) {
        CHECK(0, "%s: %s", dir, mf_last_error());
        return;
    }
    float *x = malloc((size_t)9 * E * sizeof *x);
    for (int i = 0; i < 9 * E; i++) x[i] = grand();
    check_knn(v, "random f16, k above 4096", x, 2, 4500);
    check_knn(v, "random f16, every feature", x, 1, F);
    check_knn(v, "random f16, k 10 after the growth", x, 9, 10);
    int32_t f1;
    float s1;
    CHECK(mf_vindex_knn(v, 0, x, 1, F + 1, &f1, &s1) == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "(1..5000)"),
          "k > features: %s", mf_last_error());
    free(x);
    mf_vindex_free(v);
}

int main(void) {
    test_kernels();
    char tmp[256], cmd[1024];
    snprintf(tmp, sizeof tmp, "/tmp/test_vindex_knn.%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmp);
    if (system(cmd) != 0) return 1;
    char synth[300];
    snprintf(synth, sizeof synth, "%s/tiny.gguf", tmp);
    mf_synth_params sp = mf_synth_default_params();
    sp.preset = "tiny", sp.type = "F32", sp.n_threads = 2;
    CHECK(mf_synth(&sp, synth, NULL) == MF_OK, "synth: %s", mf_last_error());
    char d1[300], d2[300];
    snprintf(d1, sizeof d1, "%s/random", tmp);
    snprintf(d2, sizeof d2, "%s/real", tmp);
    snprintf(cmd, sizeof cmd, "mkdir -p %s %s", d1, d2);
    if (system(cmd) != 0) return 1;
    test_knn(synth, d1);
    test_knn("../shared/models/stories260K.gguf", d2);
    test_large_k(tmp);
    test_q8pre();
    test_q8pre_knn(tmp);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) CHECK(0, "cannot remove %s", tmp);
    return test_summary("test_vindex_knn");
}
