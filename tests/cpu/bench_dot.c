/* bench_dot.c - micro-benchmark of the vec_dot kernels: GB/s of weight bytes
 * read by one thread, scalar vs AVX2 vs AVX-512 vs AVX-512 VNNI, for every
 * weight type, on two row sets: one that stays in L2 and one far bigger than
 * the last-level cache (so the number is the kernel's share of DRAM
 * bandwidth). Built, never run by ctest.
 *
 * Run from the project root (or anywhere; it reads no files):
 *   build/tests/bench_dot [--big MiB] [--l2 KiB] [--n ELEMENTS] [--ms MIN_MS] [TYPE ...]
 * defaults: --big 256 (8x the 32 MiB L3 one Zen core can fill; OSes on
 * multi-CCD parts report the sum of all L3s), --l2 512, --n 4096, --ms 100;
 * TYPE names as in GGUF (q4_K, f16, ...), all dot types when none is given.
 * Each row is dotted with one activation row of the type's vec_dot_type, as
 * in a matrix-vector product. The last columns are the x16 kernels (rows
 * interleaved 16 at a time, quant/interleave.h) of the AVX2 level and of the
 * highest level the CPU has, on the same rows, for the types that have one. L2 set: best pass; big set: median rate of
 * ~1 MiB chunks over two passes (robust to a busy machine; see run()). */
#include "cpu/kern/features.h"
#include "quant/interleave.h"
#include "quant/types.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const mf_type k_types[] = {MF_TYPE_F32,  MF_TYPE_F16,  MF_TYPE_BF16, MF_TYPE_Q4_0, MF_TYPE_Q4_1,   MF_TYPE_Q5_0,
                                  MF_TYPE_Q5_1, MF_TYPE_Q8_0, MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_Q4_K,   MF_TYPE_Q5_K,
                                  MF_TYPE_Q6_K, MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t g_rng = 0x2545f4914f6cdd1dull;
static float frand(void) { /* roughly N(0, 1): sum of uniforms */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        g_rng ^= g_rng << 13;
        g_rng ^= g_rng >> 7;
        g_rng ^= g_rng << 17;
        s += (float)(g_rng >> 40) / (float)(1 << 24) - 0.5f;
    }
    return s * 1.7f;
}

/* `bytes` of weight rows of length n: 64 distinct quantized rows, repeated */
static uint8_t *make_rows(int t, int64_t n, size_t bytes, int64_t *rows_out) {
    const size_t rb = mf_row_size(t, n);
    int64_t rows = (int64_t)(bytes / rb);
    if (rows < 1) rows = 1;
    uint8_t *w = malloc((size_t)rows * rb);
    float *x = malloc((size_t)n * sizeof(float));
    const int distinct = rows < 64 ? (int)rows : 64;
    for (int r = 0; r < distinct; r++) {
        for (int64_t i = 0; i < n; i++) x[i] = frand();
        mf_type_traits_ref(t)->from_float_ref(x, w + (size_t)r * rb, n);
    }
    for (int64_t r = distinct; r < rows; r++) memcpy(w + (size_t)r * rb, w + (size_t)(r % distinct) * rb, rb);
    free(x);
    *rows_out = rows;
    return w;
}

/* GB/s of weights. The L2 set: the best of passes over all rows, timed for at
 * least min_s (a pass is short enough that some run undisturbed). The big
 * set: every ~1 MiB chunk of rows is timed on its own over two passes and the
 * median chunk rate is reported, so that a time slice lost to another
 * process on a shared machine does not count against the kernel. */
static int cmp_dbl(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static float g_sink;

/* What one timed unit is: a row through vec_dot, or a 16-row x16 group
 * through vec_dot_x16. */
typedef struct unit_set {
    const mf_type_traits *tr;
    int64_t n;
    const uint8_t *w;
    size_t bytes; /* of one unit */
    const void *act;
    int x16;
} unit_set;

static float dot_units(const unit_set *u, int64_t u0, int64_t u1) {
    float acc = 0, s[MF_X16];
    for (int64_t i = u0; i < u1; i++) {
        if (u->x16) u->tr->vec_dot_x16((int)u->n, s, u->w + (size_t)i * u->bytes, u->act);
        else u->tr->vec_dot((int)u->n, s, u->w + (size_t)i * u->bytes, u->act);
        acc += s[0];
    }
    return acc;
}

static double run_units(const unit_set *u, int64_t units, int big, double min_s) {
    if (!big) {
        double best = 1e30, t_all = 0;
        for (int pass = 0; pass < 3 || (t_all < min_s && pass < 100000); pass++) {
            const double t0 = now();
            g_sink += dot_units(u, 0, units);
            const double dt = now() - t0;
            t_all += dt;
            if (dt < best) best = dt;
        }
        return (double)units * (double)u->bytes / best / 1e9;
    }
    int64_t chunk = (int64_t)((1u << 20) / u->bytes);
    if (chunk < 1) chunk = 1;
    const int64_t n_chunks = (units + chunk - 1) / chunk;
    double *rate = malloc(sizeof(double) * (size_t)(2 * n_chunks));
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t c = 0; c < n_chunks; c++) {
            const int64_t u0 = c * chunk, u1 = u0 + chunk < units ? u0 + chunk : units;
            const double t0 = now();
            g_sink += dot_units(u, u0, u1);
            rate[k++] = (double)(u1 - u0) * (double)u->bytes / (now() - t0) / 1e9;
        }
    qsort(rate, (size_t)k, sizeof *rate, cmp_dbl);
    const double med = rate[k / 2];
    free(rate);
    return med;
}

static double run(const mf_type_traits *tr, int64_t n, const uint8_t *w, int64_t rows, size_t rb, const void *act,
                  int big, double min_s) {
    const unit_set u = {tr, n, w, rb, act, 0};
    return run_units(&u, rows, big, min_s);
}

/* The x16 kernel over the same rows packed 16 at a time (whole groups only). */
static double run_x16(const mf_type_traits *tr, int t, int64_t n, const uint8_t *w, int64_t rows, size_t rb,
                      const void *act, int big, double min_s) {
    const int64_t groups = rows / MF_X16;
    if (!tr->vec_dot_x16 || !groups) return 0;
    const size_t gb = rb * MF_X16;
    uint8_t *x = malloc(gb * (size_t)groups);
    for (int64_t g = 0; g < groups; g++) mf_x16_pack(t, w + (size_t)g * gb, rb, n, x + (size_t)g * gb);
    const unit_set u = {tr, n, x, gb, act, 1};
    const double rate = run_units(&u, groups, big, min_s);
    free(x);
    return rate;
}

int main(int argc, char **argv) {
    size_t big = 256u << 20, l2 = 512u << 10;
    int64_t n = 4096;
    double min_ms = 100;
    int want[MF_TYPE_COUNT] = {0}, any = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--big") && i + 1 < argc) big = (size_t)atol(argv[++i]) << 20;
        else if (!strcmp(argv[i], "--l2") && i + 1 < argc) l2 = (size_t)atol(argv[++i]) << 10;
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atol(argv[++i]);
        else if (!strcmp(argv[i], "--ms") && i + 1 < argc) min_ms = atof(argv[++i]);
        else {
            int found = 0;
            for (size_t k = 0; k < sizeof k_types / sizeof k_types[0]; k++)
                if (!strcmp(argv[i], mf_type_name(k_types[k]))) want[k_types[k]] = found = any = 1;
            if (!found) {
                fprintf(stderr, "bench_dot: unknown argument or type '%s'\n", argv[i]);
                return 2;
            }
        }
    }
    if (n % 256) {
        fprintf(stderr, "bench_dot: --n must be a multiple of 256\n");
        return 2;
    }
    const mf_cpu_level sup = mf_cpu_level_supported();
    printf("vec_dot throughput, GB/s of weights, 1 thread, rows of %lld; L2 set %zu KiB, big set %zu MiB\n",
           (long long)n, l2 >> 10, big >> 20);
    printf("CPU supports %s%s\n", mf_cpu_level_name(sup), sup < MF_CPU_AVX512_VNNI ? " (higher levels not measured)" : "");
    printf("| type    | set | scalar | AVX2   | AVX-512 | AVX-512 VNNI | x16 AVX2 | x16 %-4s |\n", sup >= MF_CPU_AVX512_VNNI ? "VNNI" : sup >= MF_CPU_AVX2 ? "AVX2" : "-");
    printf("|---------|-----|--------|--------|---------|--------------|----------|----------|\n");
    for (size_t k = 0; k < sizeof k_types / sizeof k_types[0]; k++) {
        const int t = k_types[k];
        if (any && !want[t]) continue;
        const mf_type_traits *ref = mf_type_traits_ref(t);
        const int vt = ref->vec_dot_type;
        float *xa = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) xa[i] = frand();
        void *act = malloc(mf_row_size(vt, n));
        mf_type_traits_ref(vt)->from_float(xa, act, n);
        const size_t rb = mf_row_size(t, n);
        for (int set = 0; set < 2; set++) {
            int64_t rows;
            uint8_t *w = make_rows(t, n, set ? big : l2, &rows);
            printf("| %-7s | %s |", mf_type_name(t), set ? "big" : "L2 ");
            for (int lv = 0; lv < MF_CPU_LEVELS; lv++) {
                const mf_type_traits *tr = mf_cpu_traits_for_level(t, (mf_cpu_level)lv);
                const int width = lv == 0 ? 6 : lv == 1 ? 6 : lv == 2 ? 7 : 12;
                if (!tr) {
                    printf(" %*s |", width, "-");
                    continue;
                }
                const double gbs = run(tr, n, w, rows, rb, act, set, min_ms / 1e3);
                printf(" %*.2f |", width, gbs);
                fflush(stdout);
            }
            /* the interleaved layout's kernels of AVX2 and the CPU's top level, on the same rows */
            const mf_type_traits *a2 = sup >= MF_CPU_AVX2 ? mf_cpu_traits_for_level(t, MF_CPU_AVX2) : NULL;
            if (a2 && a2->vec_dot_x16) printf(" %8.2f |", run_x16(a2, t, n, w, rows, rb, act, set, min_ms / 1e3));
            else printf(" %8s |", "-");
            const mf_type_traits *top = mf_cpu_traits_for_level(t, sup);
            if (top && top->vec_dot_x16) printf(" %8.2f |", run_x16(top, t, n, w, rows, rb, act, set, min_ms / 1e3));
            else printf(" %8s |", "-");
            printf("\n");
            free(w);
        }
        free(xa);
        free(act);
    }
    return g_sink == 12345.f; /* keeps the dots from being optimized away */
}
