/* bench_knn.c - gate KNN speed at a real model's shape: writes a one-layer
 * vindex of random gate rows (default Gemma-3-4B: 10,240 features x 2,560)
 * for each gate type, opens it, and times top-10 queries of one position and
 * of 8 positions at once against the machine's read bandwidth. With -l L the
 * vindex has L layers and the queries go round the layers (so a layer's rows
 * come from memory, not from a cache that one layer of q8_0 fits in), and
 * the walk (one top-10 query per layer for one position, what LQL WALK does
 * per token) is timed too. -K times the kernels alone instead: 64 rows of
 * N_EMBD (in L2) against 1 and 8 queries, one thread, every level this CPU
 * has, and the q8_0 integer pre-scan. Built, never run by ctest:
 *   build/tests/bench_knn [-f FEATURES] [-e N_EMBD] [-l LAYERS] [-t THREADS] [-r REPEATS] [-K] [f32] [f16] [q8_0] */
#include "minfer.h"
#include "rand_vindex.h"
#include "core/timer.h"
#include "cpu/kern/features.h"
#include "vindex/knn_kern.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the fastest of 9 runs of 200 calls, seconds per call */
#define TIME_BEST(call)                                                                                                \
    do {                                                                                                               \
        best = 1e9;                                                                                                    \
        for (int rep = 0; rep < 9; rep++) {                                                                            \
            const double t0_ = mf_now();                                                                               \
            for (int it = 0; it < 200; it++) call;                                                                     \
            const double dt_ = (mf_now() - t0_) / 200;                                                                 \
            if (dt_ < best) best = dt_;                                                                                \
        }                                                                                                              \
    } while (0)

static int kernels(int E) {
    const int nr = 64, np = (E / 32 + 1) / 2;
    const mf_type ts[3] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_Q8_0};
    float *w = malloc((size_t)nr * E * sizeof *w), *x = malloc((size_t)8 * E * sizeof *x), s[8 * 64], e[64];
    for (int i = 0; i < nr * E; i++) w[i] = (float)sin(0.1 * i);
    for (int i = 0; i < 8 * E; i++) x[i] = (float)cos(0.3 * i);
    printf("KNN kernels alone: %d rows x %d (in L2), one thread; GMAC/s and GB/s of rows\n", nr, E);
    double best;
    for (int ti = 0; ti < 3; ti++) {
        const size_t rb = mf_row_size(ts[ti], E);
        /* 32 rows of slack after the 64: the kernels prefetch a tile ahead, into rows a scan would read next */
        uint8_t *rows = calloc(nr + 32, rb);
        for (int r = 0; r < nr; r++) mf_type_traits_ref(ts[ti])->from_float_ref(w + (size_t)r * E, rows + r * rb, E);
        const vx_dot_fn f[3] = {vx_dot_scalar(ts[ti]), vx_dot_avx2(ts[ti]),
                                mf_cpu_level_supported() >= MF_CPU_AVX512 ? vx_dot_avx512(ts[ti]) : NULL};
        const char *nm[3] = {"scalar", "AVX2", "AVX-512"};
        for (int k = 1; k < 3; k++)
            for (int nx = 1; f[k] && nx <= 8; nx *= 8) {
                TIME_BEST(f[k](rows, rb, nr, x, (size_t)E, nx, E, s, 64));
                printf("%-5s %-14s %d quer%s %8.1f GMAC/s %8.1f GB/s\n", mf_type_name(ts[ti]), nm[k], nx, nx > 1 ? "ies" : "y ",
                       (double)nr * E * nx / best / 1e9, (double)rb * nr / best / 1e9);
            }
        if (ts[ti] == MF_TYPE_Q8_0 && E % 32 == 0 && mf_cpu_level_supported() >= MF_CPU_AVX512_VNNI) {
            uint8_t *u = malloc((size_t)np * 64);
            float *dx = malloc((size_t)np * 16 * sizeof *dx), *c = malloc((size_t)np * 16 * sizeof *c);
            vx_q8_prep(x, E, u, dx, c);
            const vx_q8q q = {u, dx, c};
            const vx_q8pre_fn pf = vx_q8pre_vnni();
            TIME_BEST(pf(rows, rb, nr, &q, E, s, e));
            printf("%-5s %-14s 1 query %8.1f GMAC/s %8.1f GB/s\n", "q8_0", "VNNI pre-scan", (double)nr * E / best / 1e9,
                   (double)rb * nr / best / 1e9);
            free(u), free(dx), free(c);
        }
        free(rows);
    }
    free(w), free(x);
    return 0;
}

int main(int argc, char **argv) {
    int F = 10240, E = 2560, L = 1, nth = 2, reps = 50;
    const char *types[3];
    int nt = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-f") && i + 1 < argc) F = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-e") && i + 1 < argc) E = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) nth = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-l") && i + 1 < argc) L = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-K")) return kernels(E);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (nt < 3) types[nt++] = argv[i];
    }
    if (!nt) types[nt++] = "f16", types[nt++] = "q8_0";
    const double bw = mf_read_bandwidth(nth, (size_t)1 << 30);
    if (L < 1) L = 1;
    printf("gate KNN, %d layer(s) of %d features x %d, top-10, %d threads; read bandwidth %.1f GB/s\n", L, F, E, nth, bw);
    printf("%-5s %10s %10s %12s %10s %14s %10s %12s %10s %10s\n", "type", "MiB/layer", "open ms", "ms/layer", "GB/s",
           "% of ceiling", "8 pos ms", "walk ms", "min ms", "min walk");
    float *x = malloc((size_t)8 * E * sizeof *x);
    for (int ti = 0; ti < nt; ti++) {
        char dir[128];
        snprintf(dir, sizeof dir, "/tmp/bench_knn.%d.%s", (int)getpid(), types[ti]);
        /* rows uniform in [-0.5, 0.5), all of one norm scale (spread 0) */
        if (rand_vindex_write(dir, L, F, E, types[ti], 1, 0.0)) {
            fprintf(stderr, "bench_knn: cannot write %s\n", dir);
            return 1;
        }
        const mf_type ft = !strcmp(types[ti], "f32") ? MF_TYPE_F32 : !strcmp(types[ti], "f16") ? MF_TYPE_F16 : MF_TYPE_Q8_0;
        const size_t bytes = mf_row_size(ft, E) * (size_t)F;
        mf_vindex *v;
        double t0 = mf_now();
        if (mf_vindex_open(dir, &v)) {
            fprintf(stderr, "%s\n", mf_last_error());
            return 1;
        }
        const double t_open = (mf_now() - t0) * 1e3;
        mf_vindex_set_threads(v, nth);
        int32_t feat[80];
        float sc[80];
        double *t = malloc((size_t)reps * sizeof *t), t8[9], tw[9];
        for (int i = 0; i < 8 * E; i++) x[i] = (float)sin(0.37 * i);
        for (int i = 0; i < 3; i++) /* warm the page cache and the pool */
            for (int l = 0; l < L; l++) mf_vindex_knn(v, l, x, 1, 10, feat, sc);
        for (int r = 0; r < reps; r++) {
            t0 = mf_now();
            mf_vindex_knn(v, r % L, x + (size_t)(r % 8) * E, 1, 10, feat, sc);
            t[r] = (mf_now() - t0) * 1e3;
        }
        for (int r = 0; r < 9; r++) {
            t0 = mf_now();
            mf_vindex_knn(v, r % L, x, 8, 10, feat, sc);
            t8[r] = (mf_now() - t0) * 1e3;
        }
        for (int r = 0; r < 9; r++) {
            t0 = mf_now();
            for (int l = 0; l < L; l++) mf_vindex_knn(v, l, x + (size_t)(r % 8) * E, 1, 10, feat, sc);
            tw[r] = (mf_now() - t0) * 1e3;
        }
        qsort(t, (size_t)reps, sizeof *t, cmp);
        qsort(t8, 9, sizeof *t8, cmp);
        qsort(tw, 9, sizeof *tw, cmp);
        const double med = t[reps / 2], gbs = (double)bytes / (med * 1e-3) / 1e9;
        /* medians, and the fastest query and walk (the least disturbed on a shared machine) */
        printf("%-5s %10.1f %10.2f %12.3f %10.1f %13.0f%% %10.3f %12.3f %10.3f %10.3f\n", types[ti], (double)bytes / (1 << 20),
               t_open, med, gbs, 100 * gbs / bw, t8[4], tw[4], t[0], tw[0]);
        free(t);
        mf_vindex_free(v);
        char cmd[256];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0) return 1;
    }
    free(x);
    return 0;
}
