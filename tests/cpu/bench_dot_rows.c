/* bench_dot_rows.c - micro-benchmark of the multi-row dots: GB/s of weights
 * read by one thread for a matrix-vector product done as vec_dot per row and
 * as vec_dot_rows (in calls of --chunk rows, and in one call for all rows),
 * per SIMD level, for rows of 896 and 4864 elements (Qwen2.5-0.5B's short and
 * long rows) or the lengths given. Built, never run by ctest.
 *
 *   build/tests/bench_dot_rows [--mb MiB] [--ms MIN_MS] [--chunk ROWS] [--n N ...] [TYPE ...]
 * defaults: --mb 3 (the weights of the measurement in the issue: past L2, in
 * L3), --ms 600, --chunk 8, --n 896 --n 4864; types: the ones with a
 * vec_dot_rows. Each cell: best pass over all rows; the three ways' passes
 * interleave for at least MIN_MS (see run()). Lengths a type cannot take (896 for K-quants) are skipped. */
#include "cpu/kern/features.h"
#include "quant/types.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const mf_type k_types[] = {MF_TYPE_F32,  MF_TYPE_F16,  MF_TYPE_Q4_0, MF_TYPE_Q5_0, MF_TYPE_Q8_0,
                                  MF_TYPE_IQ4_NL, MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K};
#define N_TYPES (sizeof k_types / sizeof k_types[0])

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float frand(void) { /* roughly N(0, 1) */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        g_rng ^= g_rng << 13;
        g_rng ^= g_rng >> 7;
        g_rng ^= g_rng << 17;
        s += (float)(g_rng >> 40) / (float)(1 << 24) - 0.5f;
    }
    return s * 1.7f;
}

static float g_sink;

/* One matrix-vector product; mode 0: vec_dot per row, 1: vec_dot_rows in
 * calls of `chunk` rows, 2: vec_dot_rows in one call. */
static void pass(const mf_type_traits *tr, int n, const uint8_t *w, int rows, size_t rb, const void *act, float *out,
                 int mode, int chunk) {
    if (mode == 0)
        for (int r = 0; r < rows; r++) tr->vec_dot(n, &out[r], w + (size_t)r * rb, act);
    else if (mode == 1)
        for (int r = 0; r < rows; r += chunk)
            tr->vec_dot_rows(n, &out[r], w + (size_t)r * rb, rb, act, rows - r < chunk ? rows - r : chunk);
    else tr->vec_dot_rows(n, out, w, rb, act, rows);
}

/* GB/s of each mode (gbs[0..nm-1]): the modes' passes interleave, and each
 * keeps its best pass, so a busy spell on a shared machine hits all alike;
 * passes repeat until at least min_s has gone by. */
static void run(const mf_type_traits *tr, int n, const uint8_t *w, int rows, size_t rb, const void *act, float *out,
                int nm, int chunk, double min_s, double *gbs) {
    double best[3] = {1e30, 1e30, 1e30};
    const double t_start = now();
    for (int p = 0; p < 5 || (now() - t_start < min_s && p < 1000000); p++)
        for (int mode = 0; mode < nm; mode++) {
            const double t0 = now();
            pass(tr, n, w, rows, rb, act, out, mode, chunk);
            const double dt = now() - t0;
            if (dt < best[mode]) best[mode] = dt;
            g_sink += out[p % rows];
        }
    for (int mode = 0; mode < nm; mode++) gbs[mode] = (double)rows * (double)rb / best[mode] / 1e9;
}

int main(int argc, char **argv) {
    double mb = 3, min_ms = 600;
    int chunk = 8, ns[16], n_ns = 0;
    int want[MF_TYPE_COUNT] = {0}, any = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atof(argv[++i]);
        else if (!strcmp(argv[i], "--ms") && i + 1 < argc) min_ms = atof(argv[++i]);
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc) chunk = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc && n_ns < 16) ns[n_ns++] = atoi(argv[++i]);
        else {
            int found = 0;
            for (size_t k = 0; k < N_TYPES; k++)
                if (!strcmp(argv[i], mf_type_name(k_types[k]))) want[k_types[k]] = found = any = 1;
            if (!found) {
                fprintf(stderr, "bench_dot_rows: unknown argument or type '%s'\n", argv[i]);
                return 2;
            }
        }
    }
    if (!n_ns) ns[n_ns++] = 896, ns[n_ns++] = 4864;
    if (chunk < 1) chunk = 1;
    const mf_cpu_level sup = mf_cpu_level_supported();
    printf("matrix-vector GB/s of weights, 1 thread, %.1f MiB of weights per matrix; rows: vec_dot per row, "
           "vec_dot_rows in calls of %d rows, vec_dot_rows in one call\n",
           mb, chunk);
    printf("| type   | n    | level        | vec_dot | rows x%-2d | rows all | gain  |\n", chunk);
    printf("|--------|------|--------------|---------|----------|----------|-------|\n");
    for (size_t k = 0; k < N_TYPES; k++) {
        const int t = k_types[k];
        if (any && !want[t]) continue;
        const mf_type_traits *ref = mf_type_traits_ref(t);
        const int vt = ref->vec_dot_type, blck = mf_type_geom_get(t)->blck;
        for (int ni = 0; ni < n_ns; ni++) {
            const int n = ns[ni];
            if (n % blck || n % mf_type_geom_get(vt)->blck) continue;
            const size_t rb = mf_row_size(t, n);
            int rows = (int)(mb * 1048576.0 / (double)rb);
            if (rows < 1) rows = 1;
            uint8_t *w = malloc((size_t)rows * rb);
            float *x = malloc((size_t)n * sizeof(float)), *out = malloc((size_t)rows * sizeof(float));
            const int distinct = rows < 64 ? rows : 64;
            for (int r = 0; r < distinct; r++) {
                for (int i = 0; i < n; i++) x[i] = frand();
                ref->from_float_ref(x, w + (size_t)r * rb, n);
            }
            for (int r = distinct; r < rows; r++) memcpy(w + (size_t)r * rb, w + (size_t)(r % distinct) * rb, rb);
            for (int i = 0; i < n; i++) x[i] = frand();
            void *act = malloc(mf_row_size(vt, n));
            mf_type_traits_ref(vt)->from_float(x, act, n);
            for (int lv = MF_CPU_AVX2; lv <= (int)sup; lv++) {
                const mf_type_traits *tr = mf_cpu_traits_for_level(t, (mf_cpu_level)lv);
                if (!tr) continue;
                double g[3];
                run(tr, n, w, rows, rb, act, out, tr->vec_dot_rows ? 3 : 1, chunk, min_ms / 1e3, g);
                printf("| %-6s | %4d | %-12s | %7.2f |", mf_type_name(t), n, mf_cpu_level_name((mf_cpu_level)lv), g[0]);
                if (tr->vec_dot_rows) printf(" %8.2f | %8.2f | %4.2fx |\n", g[1], g[2], g[1] / g[0]);
                else printf(" %8s | %8s | %5s |\n", "-", "-", "-");
                fflush(stdout);
            }
            free(w);
            free(x);
            free(out);
            free(act);
        }
    }
    return g_sink == 12345.f; /* keeps the dots from being optimized away */
}
