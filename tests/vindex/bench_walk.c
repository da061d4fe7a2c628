/* bench_walk.c - the walk FFN alone, per token: mf_walk_ffn on one random
 * row at every layer of a model and its vindex (level inference), against
 * the gate KNN alone (what the walk's scan costs), for each K and thread
 * count given. The fastest of -r rounds of 8 tokens, ms per token (all
 * layers), wall and CPU time (all threads, spinning included). Built, never run by ctest:
 *   build/tests/bench_walk -m MODEL.gguf -v DIR [-k K,K,...] [-t T,T,...] [-r ROUNDS] */
#include "minfer.h"
#include "core/timer.h"
#include "vindex/vindex.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* CPU seconds of the whole process (all threads): on a shared machine, the
 * work done, where wall time also counts waiting for a core */
static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int parse_list(const char *s, int *out, int cap) {
    int n = 0;
    while (s && *s && n < cap) {
        out[n++] = atoi(s);
        s = strchr(s, ',');
        if (s) s++;
    }
    return n;
}

int main(int argc, char **argv) {
    const char *mpath = NULL, *vdir = NULL;
    int ks[16] = {102, 512, 1024}, nk = 3, ts[8] = {1, 2}, nt = 2, rounds = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m")) mpath = argv[i + 1];
        else if (!strcmp(argv[i], "-v")) vdir = argv[i + 1];
        else if (!strcmp(argv[i], "-k")) nk = parse_list(argv[i + 1], ks, 16);
        else if (!strcmp(argv[i], "-t")) nt = parse_list(argv[i + 1], ts, 8);
        else if (!strcmp(argv[i], "-r")) rounds = atoi(argv[i + 1]);
    }
    if (!mpath || !vdir || rounds < 1) {
        fprintf(stderr, "usage: bench_walk -m MODEL.gguf -v DIR [-k K,...] [-t T,...] [-r ROUNDS]\n");
        return 2;
    }
    mf_model_params mp = mf_model_default_params();
    mf_model *m;
    mf_vindex *v;
    if (mf_model_load(mpath, &mp, &m) || mf_vindex_open(vdir, &v)) {
        fprintf(stderr, "bench_walk: %s\n", mf_last_error());
        return 1;
    }
    mf_vindex_info vi;
    mf_vindex_get_info(v, &vi);
    const int E = vi.n_embd, NL = vi.n_layer, NTOK = 8;
    float *x = malloc((size_t)NTOK * NL * E * sizeof(float)), *o = malloc((size_t)E * sizeof(float));
    int32_t *feat = malloc((size_t)vi.n_features * sizeof *feat);
    float *sc = malloc((size_t)vi.n_features * sizeof *sc);
    uint64_t s = 1;
    for (size_t i = 0; i < (size_t)NTOK * NL * E; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 2.0f;
    }
    printf("%d layers x %d features x %d (%s); ms per token (all layers), best of %d rounds of %d tokens\n", NL,
           vi.n_features, E, vi.feature_type, rounds, NTOK);
    printf("%8s %8s %10s %10s %10s %10s\n", "K", "threads", "knn", "walk", "knn cpu", "walk cpu");
    for (int it = 0; it < nt; it++) {
        mf_vindex_set_threads(v, ts[it]);
        for (int ik = 0; ik < nk; ik++) {
            mf_walk *w;
            if (mf_walk_new(v, m, ks[ik], &w)) {
                fprintf(stderr, "bench_walk: %s\n", mf_last_error());
                return 1;
            }
            double best_knn = 1e9, best_walk = 1e9, cpu_knn = 1e9, cpu_walk = 1e9;
            for (int r = 0; r < rounds; r++) {
                double t0 = mf_now(), c0 = cpu_now();
                for (int t = 0; t < NTOK; t++)
                    for (int l = 0; l < NL; l++)
                        vx_knn(v, l, x + ((size_t)t * NL + l) * E, 1, ks[ik], VX_RANK_SILU_ABS, NULL, feat, sc);
                best_knn = fmin(best_knn, (mf_now() - t0) / NTOK), cpu_knn = fmin(cpu_knn, (cpu_now() - c0) / NTOK);
                t0 = mf_now(), c0 = cpu_now();
                for (int t = 0; t < NTOK; t++)
                    for (int l = 0; l < NL; l++) mf_walk_ffn(l, x + ((size_t)t * NL + l) * E, o, 1, E, NULL, NULL, w);
                best_walk = fmin(best_walk, (mf_now() - t0) / NTOK), cpu_walk = fmin(cpu_walk, (cpu_now() - c0) / NTOK);
            }
            printf("%8d %8d %10.2f %10.2f %10.2f %10.2f\n", ks[ik], ts[it], best_knn * 1e3, best_walk * 1e3, cpu_knn * 1e3,
                   cpu_walk * 1e3);
            mf_walk_free(w);
        }
    }
    free(x), free(o), free(feat), free(sc);
    mf_vindex_free(v);
    mf_model_free(m);
    return 0;
}
