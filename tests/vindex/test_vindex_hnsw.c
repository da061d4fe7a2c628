/* test_vindex_hnsw.c - the optional HNSW gate KNN: recall@10 on random rows
 * above a stated bound (M 16, ef 64); with ef >= the feature count the
 * answer equals brute force bit for bit (f32, f16, q8_0; the gate score and
 * the walk's |activation| ranking, which also falls back to the scan when
 * its k-th key is in reach of negative scores); the graph and every answer are the same
 * for 1 and 3 threads and for a layer built alone or with others; deleted
 * features are never returned; bad parameters are refused. */
#include "testutil.h"
#include "minfer.h"
#include "rand_vindex.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void gauss(float *x, int n, uint64_t *s) {
    for (int i = 0; i < n; i++)
        x[i] = (float)(sqrt(-2 * log(rv_uniform(s) + 1e-300)) * cos(6.283185307179586 * rv_uniform(s)));
}

static mf_vindex *open_rand(const char *tmp, const char *name, int L, int F, int E, const char *type) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    mf_vindex *v = NULL;
    CHECK(rand_vindex_write(dir, L, F, E, type, 11, 0.5) == 0, "cannot write %s", dir);
    CHECK(mf_vindex_open(dir, &v) == MF_OK, "open %s: %s", dir, mf_last_error());
    return v;
}

static mf_vindex_hnsw_params params(int m, int ef) {
    mf_vindex_hnsw_params p = mf_vindex_default_hnsw_params();
    p.m = m, p.ef = ef;
    return p;
}

/* recall@10 of HNSW against brute force, mean over nq queries */
static double recall(mf_vindex *v, int m, int ef, const float *x, int nq, int E) {
    int32_t *t = malloc((size_t)nq * 10 * sizeof *t), g[10];
    float s[10];
    double hit = 0;
    mf_vindex_set_hnsw(v, NULL);
    for (int q = 0; q < nq; q++) mf_vindex_knn(v, 0, x + (size_t)q * E, 1, 10, t + (size_t)q * 10, s);
    mf_vindex_hnsw_params p = params(m, ef);
    CHECK(mf_vindex_set_hnsw(v, &p) == MF_OK, "set_hnsw: %s", mf_last_error());
    for (int q = 0; q < nq; q++) {
        CHECK(mf_vindex_knn(v, 0, x + (size_t)q * E, 1, 10, g, s) == MF_OK, "hnsw knn: %s", mf_last_error());
        for (int i = 0; i < 10; i++)
            for (int j = 0; j < 10; j++) hit += g[i] == t[(size_t)q * 10 + j];
    }
    free(t);
    return hit / (10.0 * nq);
}

static void test_recall(const char *tmp) {
    const int F = 3000, E = 64, nq = 200;
    mf_vindex *v = open_rand(tmp, "recall", 1, F, E, "f32");
    if (!v) return;
    float *x = malloc((size_t)nq * E * sizeof *x);
    uint64_t s = 5;
    gauss(x, nq * E, &s);
    const double r16 = recall(v, 16, 64, x, nq, E), r8 = recall(v, 8, 16, x, nq, E);
    printf("recall@10, 3000 x 64 random: M 16 ef 64 %.3f, M 8 ef 16 %.3f\n", r16, r8);
    CHECK(r16 >= 0.95, "recall@10 at M 16, ef 64 is %.3f, below 0.95", r16);
    CHECK(r8 >= 0.50 && r8 < r16, "recall@10 at M 8, ef 16 is %.3f (want >= 0.50 and below M 16's %.3f)", r8, r16);
    free(x);
    mf_vindex_free(v);
}

static void test_exact(const char *tmp) {
    static const char *types[3] = {"f32", "f16", "q8_0"};
    const int F = 700, E = 96, nq = 5;
    for (int it = 0; it < 3; it++) {
        mf_vindex *v = open_rand(tmp, types[it], 1, F, E, types[it]);
        if (!v) continue;
        float *x = malloc((size_t)nq * E * sizeof *x);
        int32_t *fa = malloc((size_t)nq * F * sizeof *fa), *fb = malloc((size_t)nq * F * sizeof *fb);
        float *sa = malloc((size_t)nq * F * sizeof *sa), *sb = malloc((size_t)nq * F * sizeof *sb);
        uint64_t s = 9 + it;
        gauss(x, nq * E, &s);
        const int ks[] = {1, 10, F};
        for (int ik = 0; ik < 3; ik++) {
            const int k = ks[ik];
            for (int rank = 0; rank < 2; rank++) {
                /* rank 1: the walk's |silu| key */
                mf_vindex_set_hnsw(v, NULL);
                mf_status s1 = rank ? vx_knn(v, 0, x, nq, k, VX_RANK_SILU_ABS, NULL, fa, sa) : mf_vindex_knn(v, 0, x, nq, k, fa, sa);
                mf_vindex_hnsw_params p = params(8, F);
                mf_vindex_set_hnsw(v, &p);
                mf_status s2 = rank ? vx_knn(v, 0, x, nq, k, VX_RANK_SILU_ABS, NULL, fb, sb) : mf_vindex_knn(v, 0, x, nq, k, fb, sb);
                CHECK(!s1 && !s2, "%s k=%d: %s", types[it], k, mf_last_error());
                CHECK(!memcmp(fa, fb, (size_t)nq * k * sizeof *fa) && !memcmp(sa, sb, (size_t)nq * k * sizeof *sa),
                      "%s k=%d rank %d: HNSW with ef = features differs from brute force", types[it], k, rank);
            }
        }
        /* the walk's key with k past the positive scores: the k-th |silu| is in
         * reach of negative scores, which the graph does not find, so the rows
         * are scanned (fallbacks) and equal brute force even at a small ef */
        const int kw = F * 6 / 10;
        mf_vindex_set_hnsw(v, NULL);
        vx_knn(v, 0, x, nq, kw, VX_RANK_SILU_ABS, NULL, fa, sa);
        mf_vindex_hnsw_params p = params(8, 16);
        mf_vindex_set_hnsw(v, &p);
        CHECK(vx_knn(v, 0, x, nq, kw, VX_RANK_SILU_ABS, NULL, fb, sb) == MF_OK, "walk-key knn: %s", mf_last_error());
        mf_vindex_hnsw_stats st;
        mf_vindex_hnsw_get_stats(v, 0, &st);
        CHECK(st.fallbacks == (uint64_t)nq, "%s: %llu of %d rows fell back to the scan", types[it],
              (unsigned long long)st.fallbacks, nq);
        CHECK(!memcmp(fa, fb, (size_t)nq * kw * sizeof *fa) && !memcmp(sa, sb, (size_t)nq * kw * sizeof *sa),
              "%s: the walk key's fallback differs from brute force", types[it]);
        free(x), free(fa), free(fb), free(sa), free(sb);
        mf_vindex_free(v);
    }
}

static void test_determinism(const char *tmp) {
    const int F = 2500, E = 64, L = 3, nq = 40, k = 10;
    mf_vindex *v = open_rand(tmp, "det", L, F, E, "f16");
    if (!v) return;
    float *x = malloc((size_t)nq * E * sizeof *x);
    int32_t *f[3];
    float *sc[3];
    uint64_t s = 21;
    gauss(x, nq * E, &s);
    for (int run = 0; run < 3; run++) {
        f[run] = malloc((size_t)L * nq * k * sizeof *f[run]), sc[run] = malloc((size_t)L * nq * k * sizeof *sc[run]);
        mf_vindex_set_hnsw(v, NULL);
        mf_vindex_set_threads(v, run == 0 ? 1 : 3);
        mf_vindex_hnsw_params p = params(12, 24);
        mf_vindex_set_hnsw(v, &p);
        /* run 2: every layer built at once, one thread per layer; else each lazily on its first query */
        if (run == 2) CHECK(mf_vindex_hnsw_build(v, 0, L - 1) == MF_OK, "eager build: %s", mf_last_error());
        for (int l = 0; l < L; l++)
            CHECK(mf_vindex_knn(v, l, x, nq, k, f[run] + (size_t)l * nq * k, sc[run] + (size_t)l * nq * k) == MF_OK,
                  "knn: %s", mf_last_error());
    }
    for (int run = 1; run < 3; run++)
        CHECK(!memcmp(f[0], f[run], (size_t)L * nq * k * sizeof *f[0]) && !memcmp(sc[0], sc[run], (size_t)L * nq * k * sizeof *sc[0]),
              "HNSW answers differ: 1 thread lazily vs %s", run == 1 ? "3 threads lazily" : "3 threads, layers in parallel");
    mf_vindex_hnsw_stats st;
    CHECK(mf_vindex_hnsw_get_stats(v, 1, &st) == MF_OK && st.n_levels >= 2 && st.n_links > 2 * F && st.bytes > 0,
          "stats: %d levels, %lld links", st.n_levels, (long long)st.n_links);
    /* a deleted feature is walked through, never returned */
    const int32_t top = f[0][(size_t)nq * k]; /* layer 1, query 0, best */
    CHECK(mf_vindex_delete_feature(v, 1, top) == MF_OK, "delete: %s", mf_last_error());
    int32_t g[10];
    float gs[10];
    CHECK(mf_vindex_knn(v, 1, x, 1, k, g, gs) == MF_OK, "knn after delete");
    for (int i = 0; i < k; i++) CHECK(g[i] != top, "deleted feature %d returned", top);
    CHECK(g[0] == f[0][(size_t)nq * k + 1], "after deleting the best, the second (%d) should lead, got %d",
          f[0][(size_t)nq * k + 1], g[0]);
    for (int run = 0; run < 3; run++) free(f[run]), free(sc[run]);
    free(x);
    mf_vindex_free(v);
}

static void test_bad_params(const char *tmp) {
    mf_vindex *v = open_rand(tmp, "bad", 1, 100, 32, "f32");
    if (!v) return;
    const int bad[][3] = {{1, 64, 128}, {129, 64, 128}, {16, 0, 128}, {16, 64, 8}, {16, 64, 5000}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mf_vindex_hnsw_params p = {bad[i][0], bad[i][1], bad[i][2], false};
        CHECK(mf_vindex_set_hnsw(v, &p) == MF_ERR_INVALID_ARG && strstr(mf_last_error(), "HNSW"),
              "M %d ef %d efc %d accepted (%s)", p.m, p.ef, p.ef_construction, mf_last_error());
    }
    /* a refused setting leaves brute force on */
    int32_t f;
    float s;
    float x[32] = {1};
    CHECK(mf_vindex_knn(v, 0, x, 1, 1, &f, &s) == MF_OK, "knn after refused params");
    CHECK(mf_vindex_hnsw_build(v, 0, 0) == MF_ERR_INVALID_ARG, "hnsw build without hnsw on accepted");
    mf_vindex_hnsw_params p = mf_vindex_default_hnsw_params();
    CHECK(mf_vindex_set_hnsw(v, &p) == MF_OK && mf_vindex_hnsw_build(v, 0, 1) == MF_ERR_INVALID_ARG, "layer out of range accepted");
    mf_vindex_free(v);
}

int main(void) {
    char tmp[256], cmd[512];
    snprintf(tmp, sizeof tmp, "/tmp/test_vindex_hnsw.%d", (int)getpid());
    snprintf(cmd, sizeof cmd, "mkdir -p %s", tmp);
    if (system(cmd) != 0) return 1;
    test_bad_params(tmp);
    test_exact(tmp);
    test_determinism(tmp);
    test_recall(tmp);
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    if (system(cmd) != 0) CHECK(0, "cannot remove %s", tmp);
    return test_summary("test_vindex_hnsw");
}
