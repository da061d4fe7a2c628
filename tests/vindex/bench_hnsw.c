/* bench_hnsw.c - HNSW gate KNN against brute force: recall@k and query time
 * per feature count, to find where the graph starts to pay. Built, never run
 * by ctest (bench/hnsw.sh drives it):
 *   build/tests/bench_hnsw [-f FEATURES] [-e N_EMBD] [--type f32|f16|q8_0] [-m M] [--efc N]
 *                          [--ef 16,32,64,...] [-k 10] [-q QUERIES] [-t THREADS] [--transform] [--walk]
 *   build/tests/bench_hnsw --dir VINDEX [--layer L] ...
 * --walk ranks as the walk FFN does (|silu(score)|, with its fallback to a
 * scan when the k-th key is within reach of a negative score; counted per
 * query), so k can be the walk's K. With --dir, a saved graph cache of
 * these M and efc (`minfer vindex hnsw`) is mapped instead of building.
 * Random mode writes a one-layer vindex of random gate rows (row norms
 * spread +-50%) and queries with Gaussian vectors. --dir uses a built vindex:
 * at level inference the queries are the model's FFN inputs at the layer on
 * random token sequences (captured through the FFN callback), otherwise
 * token embeddings. Brute force runs on THREADS threads, a single-query HNSW
 * search on one (brute force is also timed on one). Prints one markdown row
 * per ef: median ms/query, speed-up,
 * mean recall@k against brute force and gate rows scored per query. */
#include "minfer.h"
#include "rand_vindex.h"
#include "core/timer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct capture {
    int layer, E, cap, n;
    float *x;
} capture;

static int capture_ffn(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq,
                       const int32_t *pos, void *ud) {
    (void)out, (void)seq, (void)pos;
    capture *c = ud;
    for (int r = 0; layer == c->layer && r < n_rows && c->n < c->cap; r++)
        memcpy(c->x + (size_t)c->n++ * n_embd, xn + (size_t)r * n_embd, (size_t)n_embd * sizeof(float));
    return 0;
}

static int model_queries(const char *dir, int layer, int nq, int E, int nth, float *x) {
    mf_model_params mp = mf_model_default_params();
    mf_model *m;
    if (mf_model_load(dir, &mp, &m)) return -1;
    capture c = {layer, E, nq, 0, x};
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 256, cp.n_threads = nth, cp.ffn_cb = capture_ffn, cp.ffn_ud = &c;
    mf_context *ctx;
    if (mf_context_new(m, &cp, &ctx)) return -1;
    uint64_t s = 7;
    const int V = mf_model_n_vocab(m);
    mf_token t[64];
    while (c.n < nq) {
        for (int i = 0; i < 64; i++) t[i] = (mf_token)(rv_uniform(&s) * V);
        mf_kv_truncate(ctx, 0);
        if (mf_decode(ctx, t, 64, false)) return -1;
    }
    mf_context_free(ctx);
    mf_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    int F = 4096, E = 1024, M = 16, efc = 128, k = 10, nq = 200, nth = 2, layer = 0;
    const char *type = "f16", *dir = NULL, *efs = "16,32,64,128,256";
    bool transform = false, walk = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v && strcmp(a, "--transform") && strcmp(a, "--walk")) {
            fprintf(stderr, "bench_hnsw: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "-f")) F = atoi(v), i++;
        else if (!strcmp(a, "-e")) E = atoi(v), i++;
        else if (!strcmp(a, "--type")) type = v, i++;
        else if (!strcmp(a, "-m")) M = atoi(v), i++;
        else if (!strcmp(a, "--efc")) efc = atoi(v), i++;
        else if (!strcmp(a, "--ef")) efs = v, i++;
        else if (!strcmp(a, "-k")) k = atoi(v), i++;
        else if (!strcmp(a, "-q")) nq = atoi(v), i++;
        else if (!strcmp(a, "-t")) nth = atoi(v), i++;
        else if (!strcmp(a, "--dir")) dir = v, i++;
        else if (!strcmp(a, "--layer")) layer = atoi(v), i++;
        else if (!strcmp(a, "--transform")) transform = true;
        else if (!strcmp(a, "--walk")) walk = true;
        else {
            fprintf(stderr, "bench_hnsw: unknown option %s\n", a);
            return 2;
        }
    }
    char tmp[128] = "";
    if (!dir) {
        snprintf(tmp, sizeof tmp, "/tmp/bench_hnsw.%d", (int)getpid());
        if (rand_vindex_write(tmp, 1, F, E, type, 1, 0.5)) {
            fprintf(stderr, "bench_hnsw: cannot write %s\n", tmp);
            return 1;
        }
        dir = tmp;
    }
    mf_vindex *v;
    if (mf_vindex_open(dir, &v) || mf_vindex_set_threads(v, nth)) {
        fprintf(stderr, "bench_hnsw: %s\n", mf_last_error());
        return 1;
    }
    mf_vindex_info vi;
    mf_vindex_get_info(v, &vi);
    F = vi.n_features, E = vi.n_embd;
    float *x = malloc((size_t)nq * E * sizeof *x);
    int32_t *truth = malloc((size_t)nq * k * sizeof *truth), *got = malloc((size_t)nq * k * sizeof *got);
    float *sc = malloc((size_t)k * sizeof *sc);
    uint8_t *mark = calloc((size_t)F, 1);
    const vx_rank rank = walk ? VX_RANK_SILU_ABS : VX_RANK_DOT;
    double *t = malloc((size_t)nq * sizeof *t);
    const char *qkind = "gaussian";
    uint64_t s = 99;
    if (tmp[0]) {
        for (int i = 0; i < nq * E; i++) x[i] = (float)(sqrt(-2 * log(rv_uniform(&s) + 1e-300)) * cos(6.283185307179586 * rv_uniform(&s)));
    } else if (vi.level != MF_VINDEX_BROWSE) {
        qkind = "FFN inputs";
        if (model_queries(dir, layer, nq, E, nth, x)) {
            fprintf(stderr, "bench_hnsw: %s\n", mf_last_error());
            return 1;
        }
    } else {
        qkind = "embeddings";
        for (int q = 0; q < nq; q++) mf_vindex_embedding(v, (mf_token)((uint64_t)q * 7919 % (uint64_t)vi.n_vocab), x + (size_t)q * E);
    }
    /* brute force: the truth, and its time */
    for (int q = 0; q < 3; q++) vx_knn(v, layer, x, 1, k, rank, NULL, got, sc);
    for (int q = 0; q < nq; q++) {
        const double t0 = mf_now();
        vx_knn(v, layer, x + (size_t)q * E, 1, k, rank, NULL, truth + (size_t)q * k, sc);
        t[q] = (mf_now() - t0) * 1e3;
    }
    qsort(t, (size_t)nq, sizeof *t, cmpd);
    const double brute = t[nq / 2];
    /* and on one thread, as the one-query search runs */
    mf_vindex_set_threads(v, 1);
    for (int q = 0; q < nq; q++) {
        const double t0 = mf_now();
        vx_knn(v, layer, x + (size_t)q * E, 1, k, rank, NULL, got, sc);
        t[q] = (mf_now() - t0) * 1e3;
    }
    qsort(t, (size_t)nq, sizeof *t, cmpd);
    const double brute1 = t[nq / 2];
    mf_vindex_set_threads(v, nth);
    mf_vindex_hnsw_params hp = mf_vindex_default_hnsw_params();
    hp.m = M, hp.ef_construction = efc, hp.mips_transform = transform;
    if (mf_vindex_set_hnsw(v, &hp)) {
        fprintf(stderr, "bench_hnsw: %s\n", mf_last_error());
        return 1;
    }
    bool loaded = false;
    if (!tmp[0] && mf_vindex_hnsw_load(v, NULL, &loaded)) {
        fprintf(stderr, "bench_hnsw: %s\n", mf_last_error());
        return 1;
    }
    mf_vindex_hnsw_stats st;
    if (mf_vindex_hnsw_get_stats(v, layer, &st)) {
        fprintf(stderr, "bench_hnsw: %s\n", mf_last_error());
        return 1;
    }
    char built[96];
    if (loaded) snprintf(built, sizeof built, "mapped from the cache");
    else snprintf(built, sizeof built, "build %.2f s on %d threads", st.build_ms / 1e3, nth);
    printf("# %d features x %d, %s gates, %s queries (%d), top-%d, brute force %d threads; M %d, efc %d%s: "
           "%s, %d levels, %.1f MiB, %d unreachable%s\n",
           F, E, vi.feature_type, qkind, nq, k, nth, M, efc, transform ? ", MIPS transform" : ", plain IP", built,
           st.n_levels, (double)st.bytes / (1 << 20), st.unreachable, walk ? "; ranked by the walk's |silu| key" : "");
    printf("| features | n_embd | gate | M | ef | brute ms, %d thr | brute ms, 1 thr | HNSW ms | speed-up (vs %d thr) | recall@%d | rows scored | scan fallbacks |\n",
           nth, nth, k);
    for (const char *p = efs; *p;) {
        hp.ef = (int)strtol(p, (char **)&p, 10);
        if (*p == ',') p++;
        mf_vindex_set_hnsw(v, &hp);
        uint64_t e0 = st.evals, f0 = st.fallbacks;
        double hit = 0;
        for (int q = 0; q < nq; q++) {
            const double t0 = mf_now();
            vx_knn(v, layer, x + (size_t)q * E, 1, k, rank, NULL, got + (size_t)q * k, sc);
            t[q] = (mf_now() - t0) * 1e3;
            /* the answers in the true top-k (a mark per feature: k may be thousands) */
            for (int j = 0; j < k; j++) mark[truth[(size_t)q * k + j]] = 1;
            for (int i = 0; i < k; i++) hit += got[(size_t)q * k + i] >= 0 && mark[got[(size_t)q * k + i]];
            for (int j = 0; j < k; j++) mark[truth[(size_t)q * k + j]] = 0;
        }
        mf_vindex_hnsw_get_stats(v, layer, &st);
        qsort(t, (size_t)nq, sizeof *t, cmpd);
        printf("| %d | %d | %s | %d | %d | %.3f | %.3f | %.3f | %.2fx | %.3f | %.0f | %.2f |\n", F, E, vi.feature_type, M, hp.ef,
               brute, brute1, t[nq / 2], brute / t[nq / 2], hit / ((double)nq * k), (double)(st.evals - e0) / nq,
               (double)(st.fallbacks - f0) / nq);
        fflush(stdout);
    }
    mf_vindex_free(v);
    free(x), free(truth), free(got), free(sc), free(t), free(mark);
    if (tmp[0]) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
        if (system(cmd) != 0) return 1;
    }
    return 0;
}
