/* bench_gemm.c - prefill GEMM micro-benchmark (not a ctest): GFLOP/s of the
 * vec_dot path and of the GEMM for each type at each SIMD level, on weights
 * of a real shape against a batch of tokens, plus the machine's measured
 * int8 (vpdpbusd) and f32 FMA peaks so the kernels read as a fraction of a
 * ceiling (../shared/BENCHMARKING.md).
 *
 *   bench_gemm [-k K] [-n N_OUT] [-t TOKENS] [-r REPS] [-T TYPE] [-p]
 *     default: the 896 x 4864 and 2048 x 8192 weights (k x n_out) against 512
 *     tokens, all types; -p: only the peaks; -K: also the VNNI and AMX kernels
 *     (and the AMX tile-mins variant) alone in two loop orders, and the
 *     AMX kernels in the matmul's order of many-tile calls (kernel_only);
 *     -E: those AMX kernels over the C model of the tiles (checks the
 *     benchmark runs on a CPU without AMX; the figures mean nothing).
 *
 * Columns: the scalar reference vec_dot (quant/ref_*.c, on 4 tokens) and
 * the live level's vec_dot, each one vec_dot per output after converting the
 * activations; the GEMM of each level (tiles + packs + kernels, one thread)
 * and the share of its time spent packing weight panels; "op 2t" is the
 * matmul op on a 2-thread backend in wall time, as the engine runs it (GEMM
 * when the batch reaches the kind's threshold).
 * Single-thread figures use the thread's CPU time (other processes sharing
 * the cores do not count against a kernel). A FLOP is one multiply or one
 * add (2 * k * n_out * tokens per product). */
#include "../quant/qrand.h"

#include "cpu/kern/features.h"
#include "cpu/kern/gemm/gemm.h"
#include "engine/backend.h"
#include "cpu/cpu.h"
#include "quant/blocks.h"
#include "quant/types.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* the kernels a CPU backend made now would use */
static inline const mf_type_traits *level_traits(int t) { return mf_cpu_traits_for_level(t, mf_cpu_init()); }

static double now_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}
static double now_wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---------------- peaks ---------------- */

/* 12 independent accumulators: throughput, not latency */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static double peak_vpdpbusd(void) {
    /* distinct starts, or the compiler merges identical chains */
    __m512i a0 = _mm512_set1_epi32(0), a1 = _mm512_set1_epi32(1), a2 = _mm512_set1_epi32(2), a3 = _mm512_set1_epi32(3),
            a4 = _mm512_set1_epi32(4), a5 = _mm512_set1_epi32(5), a6 = _mm512_set1_epi32(6), a7 = _mm512_set1_epi32(7),
            a8 = _mm512_set1_epi32(8), a9 = _mm512_set1_epi32(9), a10 = _mm512_set1_epi32(10), a11 = _mm512_set1_epi32(11);
    __m512i x = _mm512_set1_epi8(3), y = _mm512_set1_epi8(-5);
    const long n = 20000000;
    const double t0 = now_cpu();
    for (long i = 0; i < n; i++) {
        a0 = _mm512_dpbusd_epi32(a0, x, y), a1 = _mm512_dpbusd_epi32(a1, x, y), a2 = _mm512_dpbusd_epi32(a2, x, y);
        a3 = _mm512_dpbusd_epi32(a3, x, y), a4 = _mm512_dpbusd_epi32(a4, x, y), a5 = _mm512_dpbusd_epi32(a5, x, y);
        a6 = _mm512_dpbusd_epi32(a6, x, y), a7 = _mm512_dpbusd_epi32(a7, x, y), a8 = _mm512_dpbusd_epi32(a8, x, y);
        a9 = _mm512_dpbusd_epi32(a9, x, y), a10 = _mm512_dpbusd_epi32(a10, x, y), a11 = _mm512_dpbusd_epi32(a11, x, y);
        __asm__ volatile("" : "+v"(x));
    }
    const double dt = now_cpu() - t0;
    volatile int sink = _mm512_reduce_add_epi32(_mm512_add_epi32(
        _mm512_add_epi32(_mm512_add_epi32(a0, a1), _mm512_add_epi32(a2, a3)),
        _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a4, a5), _mm512_add_epi32(a6, a7)),
                         _mm512_add_epi32(_mm512_add_epi32(a8, a9), _mm512_add_epi32(a10, a11)))));
    (void)sink;
    return (double)n * 12 * 64 * 2 / dt * 1e-9; /* 64 multiply-adds per instruction */
}

__attribute__((target("avx512f"))) static double peak_fma512(void) {
    __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2), a3 = _mm512_set1_ps(3),
           a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5), a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7),
           a8 = _mm512_set1_ps(8), a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
    __m512 x = _mm512_set1_ps(0.999f), y = _mm512_set1_ps(1e-3f);
    const long n = 20000000;
    const double t0 = now_cpu();
    for (long i = 0; i < n; i++) {
        a0 = _mm512_fmadd_ps(x, y, a0), a1 = _mm512_fmadd_ps(x, y, a1), a2 = _mm512_fmadd_ps(x, y, a2);
        a3 = _mm512_fmadd_ps(x, y, a3), a4 = _mm512_fmadd_ps(x, y, a4), a5 = _mm512_fmadd_ps(x, y, a5);
        a6 = _mm512_fmadd_ps(x, y, a6), a7 = _mm512_fmadd_ps(x, y, a7), a8 = _mm512_fmadd_ps(x, y, a8);
        a9 = _mm512_fmadd_ps(x, y, a9), a10 = _mm512_fmadd_ps(x, y, a10), a11 = _mm512_fmadd_ps(x, y, a11);
        __asm__ volatile("" : "+v"(x));
    }
    const double dt = now_cpu() - t0;
    volatile float sink = _mm512_reduce_add_ps(_mm512_add_ps(
        _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
        _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)),
                      _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)))));
    (void)sink;
    return (double)n * 12 * 16 * 2 / dt * 1e-9;
}

/* ---------------- data ---------------- */

/* Random block bytes with finite, modest scales: speed does not depend on the
 * values, and the reference quantizers are far too slow for 16M weights. */
static void fill_weights(qrand *r, mf_type t, uint8_t *w, int64_t k, int64_t n_out) {
    const mf_type_geom *g = mf_type_geom_get(t);
    const size_t bytes = mf_row_size(t, k) * (size_t)n_out;
    for (size_t i = 0; i < bytes; i++) w[i] = (uint8_t)(qrand_uniform(r) * 256);
    const int64_t nb = bytes / (size_t)g->size;
    const mf_fp16 small = mf_fp32_to_fp16(0.01f);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = w + (size_t)b * (size_t)g->size;
        switch (t) {
        case MF_TYPE_F16: *(mf_fp16 *)p = mf_fp32_to_fp16((float)(qrand_uniform(r) - 0.5)); break;
        case MF_TYPE_BF16: *(mf_bf16 *)p = mf_fp32_to_bf16((float)(qrand_uniform(r) - 0.5)); break;
        case MF_TYPE_Q4_0: ((block_q4_0 *)p)->d = small; break;
        case MF_TYPE_Q5_0: ((block_q5_0 *)p)->d = small; break;
        case MF_TYPE_Q8_0: ((block_q8_0 *)p)->d = small; break;
        case MF_TYPE_IQ4_NL: ((block_iq4_nl *)p)->d = small; break;
        case MF_TYPE_Q4_K: ((block_q4_K *)p)->d = small, ((block_q4_K *)p)->dmin = small; break;
        case MF_TYPE_Q5_K: ((block_q5_K *)p)->d = small, ((block_q5_K *)p)->dmin = small; break;
        case MF_TYPE_Q6_K: ((block_q6_K *)p)->d = small; break;
        case MF_TYPE_Q3_K: ((block_q3_K *)p)->d = small; break;
        case MF_TYPE_IQ4_XS: ((block_iq4_xs *)p)->d = small; break;
        case MF_TYPE_Q2_K: ((block_q2_K *)p)->d = small, ((block_q2_K *)p)->dmin = small; break;
        default: break;
        }
    }
}

/* ---------------- timed paths (one thread) ---------------- */

/* convert + one vec_dot per output, as the matmul's vec_dot path */
static double time_vec_dot(mf_type t, const mf_type_traits *tr, const uint8_t *w, int64_t k, int64_t n_out,
                           const float *x, int tok, float *out) {
    const mf_type_traits *at = level_traits(tr->vec_dot_type);
    const size_t arb = mf_row_size(tr->vec_dot_type, k), rb = mf_row_size(t, k);
    uint8_t *xq = malloc(arb * (size_t)tok);
    const double t0 = now_cpu();
    for (int j = 0; j < tok; j++) at->from_float(x + (size_t)j * k, xq + (size_t)j * arb, k);
    for (int64_t ob = 0; ob < n_out; ob += 16)
        for (int j = 0; j < tok; j++)
            for (int64_t o = ob; o < ob + 16 && o < n_out; o++)
                tr->vec_dot((int)k, &out[(size_t)j * n_out + o], w + (size_t)o * rb, xq + (size_t)j * arb);
    const double dt = now_cpu() - t0;
    free(xq);
    return dt;
}

static double time_gemm(const mf_gemm_kind *g, mf_type t, const uint8_t *w, int64_t k, int64_t n_out, const float *x,
                        int tok, float *out, double *pack_share) {
    const mf_type at = mf_gemm_act_type(g->act);
    const int ntiles = (tok + g->nt - 1) / g->nt;
    const size_t tb = mf_gemm_tile_bytes(g->act, g->nt, k), pb = g->panel_bytes(k), rb = mf_row_size(t, k);
    /* 64-byte aligned, as the matmul's buffers (tile loads split across lines run at half speed) */
    uint8_t *tiles = aligned_alloc(64, (tb * (size_t)ntiles + 63) & ~(size_t)63), *tmp = malloc(mf_gemm_tile_tmp_bytes(g->act, g->nt, k));
    uint8_t *panels = aligned_alloc(64, (pb * (size_t)(g->rows_per_call / g->panel_rows) + 63) & ~(size_t)63);
    double t_pack = 0;
    const double t0 = now_cpu();
    for (int i = 0; i < ntiles; i++) {
        const int n = tok - i * g->nt < g->nt ? tok - i * g->nt : g->nt;
        mf_gemm_tile_build(g->act, g->nt, x + (size_t)i * g->nt * k, (size_t)k, n, k,
                           level_traits(at)->from_float, tmp, tiles + (size_t)i * tb);
    }
    for (int64_t r0 = 0; r0 < n_out; r0 += g->rows_per_call) {
        const int nrows = (int)(n_out - r0 < g->rows_per_call ? n_out - r0 : g->rows_per_call);
        const double tp = now_cpu();
        for (int p = 0; p * g->panel_rows < g->rows_per_call; p++) {
            int n = nrows - p * g->panel_rows;
            n = n < 0 ? 0 : n > g->panel_rows ? g->panel_rows : n;
            g->pack(n ? w + (size_t)(r0 + p * g->panel_rows) * rb : w, rb, n, k, panels + (size_t)p * pb);
        }
        t_pack += now_cpu() - tp;
        /* many-tile kinds: as the matmul calls them, tiles_per_call at a time */
        const int step = g->kernel_tiles ? g->tiles_per_call : 1;
        for (int i = 0; i < ntiles; i += step) {
            const int nb = ntiles - i < step ? ntiles - i : step;
            const int n = tok - i * g->nt < nb * g->nt ? tok - i * g->nt : nb * g->nt;
            float *o = out + (size_t)i * g->nt * n_out + r0;
            if (g->kernel_tiles) g->kernel_tiles(panels, pb, tiles + (size_t)i * tb, tb, nb, k, o, (size_t)n_out, nrows, n);
            else g->kernel(panels, pb, tiles + (size_t)i * tb, k, o, (size_t)n_out, nrows, n);
        }
    }
    const double dt = now_cpu() - t0;
    *pack_share = t_pack / dt;
    free(tiles), free(tmp), free(panels);
    return dt;
}

/* -K: the kernel alone, panels and tiles packed beforehand, in two loop
 * orders: per group of rows every tile (the panels stay in cache, the tiles
 * stream) and per tile every group (the tile stays, the panels stream);
 * GFLOP/s by thread CPU time */
static void kernel_only(const mf_gemm_kind *g, mf_type t, const uint8_t *w, int64_t k, int64_t n_out, const float *x,
                        int tok, float *out) {
    const mf_type at = mf_gemm_act_type(g->act);
    const int ntiles = (tok + g->nt - 1) / g->nt;
    const size_t tb = mf_gemm_tile_bytes(g->act, g->nt, k), pb = g->panel_bytes(k), rb = mf_row_size(t, k);
    const int npan = g->rows_per_call / g->panel_rows;
    const int64_t ngroups = (n_out + g->rows_per_call - 1) / g->rows_per_call;
    const size_t gb = pb * (size_t)npan;
    uint8_t *tiles = aligned_alloc(64, (tb * (size_t)ntiles + 63) & ~(size_t)63), *tmp = malloc(mf_gemm_tile_tmp_bytes(g->act, g->nt, k));
    uint8_t *panels = aligned_alloc(64, (gb * (size_t)ngroups + 63) & ~(size_t)63);
    for (int i = 0; i < ntiles; i++) {
        const int n = tok - i * g->nt < g->nt ? tok - i * g->nt : g->nt;
        mf_gemm_tile_build(g->act, g->nt, x + (size_t)i * g->nt * k, (size_t)k, n, k, level_traits(at)->from_float, tmp,
                           tiles + (size_t)i * tb);
    }
    for (int64_t u = 0; u < ngroups; u++)
        for (int p = 0; p < npan; p++) {
            const int64_t r0 = u * g->rows_per_call + (int64_t)p * g->panel_rows;
            int n = (int)(n_out - r0 < g->panel_rows ? n_out - r0 : g->panel_rows);
            n = n < 0 ? 0 : n;
            g->pack(n ? w + (size_t)r0 * rb : w, rb, n, k, panels + (size_t)u * gb + (size_t)p * pb);
        }
    double dt[2];
    for (int order = 0; order < 2; order++) {
        const double t0 = now_cpu();
        for (int64_t a = 0; a < (order ? ntiles : ngroups); a++)
            for (int64_t b = 0; b < (order ? ngroups : ntiles); b++) {
                const int64_t u = order ? b : a, i = order ? a : b;
                const int64_t r0 = u * g->rows_per_call;
                const int nrows = (int)(n_out - r0 < g->rows_per_call ? n_out - r0 : g->rows_per_call);
                const int n = tok - (int)i * g->nt < g->nt ? tok - (int)i * g->nt : g->nt;
                g->kernel(panels + (size_t)u * gb, pb, tiles + (size_t)i * tb, k, out + (size_t)i * g->nt * n_out + r0,
                          (size_t)n_out, nrows, n);
            }
        dt[order] = now_cpu() - t0;
    }
    const double flop = 2.0 * (double)k * (double)n_out * tok;
    /* kinds with a many-tile kernel: as the matmul drives them, blocks of
     * tiles_per_call tiles outside, groups inside, one call per (block, group) */
    double dtb = 0;
    if (g->kernel_tiles) {
        const double t0 = now_cpu();
        for (int i0 = 0; i0 < ntiles; i0 += g->tiles_per_call) {
            const int nb = ntiles - i0 < g->tiles_per_call ? ntiles - i0 : g->tiles_per_call;
            const int ntok = tok - i0 * g->nt < nb * g->nt ? tok - i0 * g->nt : nb * g->nt;
            for (int64_t u = 0; u < ngroups; u++) {
                const int64_t r0 = u * g->rows_per_call;
                const int nrows = (int)(n_out - r0 < g->rows_per_call ? n_out - r0 : g->rows_per_call);
                g->kernel_tiles(panels + (size_t)u * gb, pb, tiles + (size_t)i0 * tb, tb, nb, k,
                                out + (size_t)i0 * g->nt * n_out + r0, (size_t)n_out, nrows, ntok);
            }
        }
        dtb = now_cpu() - t0;
    }
    char blk[96] = "";
    if (dtb > 0) snprintf(blk, sizeof blk, ", %.1f %d-tile calls (the matmul's order)", flop / dtb * 1e-9, g->tiles_per_call);
    printf("  kernel only, %s: %.1f GFLOP/s rows-outer (panels %.0f KiB per group), %.1f tiles-outer%s\n", g->name,
           flop / dt[0] * 1e-9, gb / 1024.0, flop / dt[1] * 1e-9, blk);
    free(tiles), free(tmp), free(panels);
}
static int g_kernel_only, g_emulated;

static void bench_shape(mf_type t, int64_t k, int64_t n_out, int tok, int reps, qrand *r) {
    const mf_type_traits *tr = level_traits(t);
    if (!tr || k % mf_type_geom_get(t)->blck) return;
    const size_t wbytes = mf_row_size(t, k) * (size_t)n_out;
    uint8_t *w = malloc(wbytes);
    float *x = malloc(sizeof(float) * (size_t)k * tok), *out = malloc(sizeof(float) * (size_t)n_out * tok);
    fill_weights(r, t, w, k, n_out);
    qrand_fill(r, x, k * tok, QDATA_GAUSS, 1.0);
    const double flop = 2.0 * (double)k * (double)n_out * tok;
    char line[512];
    int len = snprintf(line, sizeof line, "| %-6s | %5lld x %-5lld | %3d |", mf_type_name(t), (long long)k, (long long)n_out, tok);
    /* the scalar reference vec_dot, on a few tokens (its rate does not
     * depend on the count, and all 512 would take minutes) */
    const int ref_tok = tok < 4 ? tok : 4;
    double best = time_vec_dot(t, mf_type_traits_ref(t), w, k, n_out, x, ref_tok, out);
    len += snprintf(line + len, sizeof line - (size_t)len, " %7.2f |", 2.0 * (double)k * (double)n_out * ref_tok / best * 1e-9);
    /* vec_dot at the live level, best of reps */
    best = 1e30;
    for (int i = 0; i < reps; i++) {
        const double d = time_vec_dot(t, tr, w, k, n_out, x, tok, out);
        if (d < best) best = d;
    }
    len += snprintf(line + len, sizeof line - (size_t)len, " %7.1f |", flop / best * 1e-9);
    static const mf_cpu_level lv[] = {MF_CPU_AVX2, MF_CPU_AVX512, MF_CPU_AVX512_VNNI};
    for (int l = 0; l < 4; l++) {
        /* l == 3: the AMX tile kernels, where the CPU grants them */
        const mf_gemm_kind *g = l < 3 ? mf_gemm_get_level(t, lv[l]) : mf_gemm_get_amx(t, 0);
        if (!g || k % g->k_multiple) {
            len += snprintf(line + len, sizeof line - (size_t)len, l == 3 ? " %7s | %5s |" : " %7s |", "-", "-");
            continue;
        }
        best = 1e30;
        double share = 0, s;
        for (int i = 0; i < reps; i++) {
            const double d = time_gemm(g, t, w, k, n_out, x, tok, out, &s);
            if (d < best) best = d, share = s;
        }
        len += snprintf(line + len, sizeof line - (size_t)len, " %7.1f |", flop / best * 1e-9);
        if (l >= 2 || (l == 1 && mf_cpu_level_supported() == MF_CPU_AVX512))
            len += snprintf(line + len, sizeof line - (size_t)len, " %4.1f%% |", 100 * share);
    }
    /* the op on a 2-thread backend, wall time, best of reps */
    mf_backend *be = mf_cpu_backend_new(2, tok, (int)(k > n_out ? k : n_out), 64, false);
    mf_tensor wt = {.name = "w", .n_dims = 2, .ne = {k, n_out, 1, 1}, .type = t,
                      .nbytes = wbytes, .data = w};
    best = 1e30;
    for (int i = 0; i < reps; i++) {
        const double t0 = now_wall();
        be->ops->matmul(be, &wt, x, tok, out);
        const double d = now_wall() - t0;
        if (d < best) best = d;
    }
    be->ops->destroy(be);
    snprintf(line + len, sizeof line - (size_t)len, " %7.1f |", flop / best * 1e-9);
    puts(line);
    /* -K: the VNNI kernel, the AMX kernel and its tile-mins variant; with
     * -E the AMX ones over the C model of the tiles (slow: a check of the
     * benchmark itself on CPUs without AMX, not a figure) */
    if (g_kernel_only)
        for (int l = 2; l < 5; l++) {
            const mf_gemm_kind *g = l == 2   ? mf_gemm_get_level(t, MF_CPU_AVX512_VNNI)
                                    : l == 3 ? mf_gemm_get_amx(t, g_emulated)
                                             : mf_gemm_get_amx_mt(t, g_emulated);
            if (g && k % g->k_multiple == 0) kernel_only(g, t, w, k, n_out, x, tok, out);
        }
    fflush(stdout);
    free(w), free(x), free(out);
}

int main(int argc, char **argv) {
    int64_t k = 0, n_out = 0;
    int tok = 512, reps = 3, peaks_only = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-k") && i + 1 < argc) k = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n_out = atoll(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) tok = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "-p")) peaks_only = 1;
        else if (!strcmp(argv[i], "-K")) g_kernel_only = 1;
        else if (!strcmp(argv[i], "-E")) g_emulated = 1;
        else {
            fprintf(stderr, "usage: bench_gemm [-k K] [-n N_OUT] [-t TOKENS] [-r REPS] [-T TYPE] [-p] [-K] [-E]\n");
            return 2;
        }
    }
    const mf_cpu_level lv = mf_cpu_init();
    printf("SIMD level %s; MINFER_NO_GEMM=%s\n", mf_cpu_level_name(lv), getenv("MINFER_NO_GEMM") ? getenv("MINFER_NO_GEMM") : "");
    if (mf_cpu_level_supported() >= MF_CPU_AVX512_VNNI)
        printf("peak, one core: vpdpbusd %.0f GOP/s (int8), fma512 %.0f GFLOP/s (f32)\n", peak_vpdpbusd(), peak_fma512());
    if (peaks_only) return 0;
    printf("\nGFLOP/s; single-thread columns by thread CPU time, op 2t by wall time (best of %d)\n\n", reps);
    printf("%s\n", mf_amx_note());
    printf("| type   | k x n_out     | tok | scalar vec_dot | vec_dot %s | GEMM AVX2 | GEMM AVX-512 | GEMM VNNI | pack %% | GEMM AMX | pack %% | op 2t |\n",
           mf_cpu_level_name(lv));
    printf("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    static const mf_type types[] = {MF_TYPE_Q4_K, MF_TYPE_Q6_K, MF_TYPE_Q8_0, MF_TYPE_Q5_K, MF_TYPE_F16,  MF_TYPE_Q5_0,
                                    MF_TYPE_Q4_0, MF_TYPE_IQ4_NL, MF_TYPE_Q3_K, MF_TYPE_Q2_K, MF_TYPE_IQ4_XS, MF_TYPE_BF16};
    /* (k, n_out): Qwen2.5-0.5B's ffn_up (896 x 4864; for K-quants, whose rows
     * must be whole super-blocks, its ffn_down 4864 x 896) and Llama-3.2-1B's
     * ffn_up (2048 x 8192) */
    const int64_t shapes[2][2] = {{896, 4864}, {2048, 8192}};
    qrand r = {42};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        if (only && strcmp(only, mf_type_name(types[ti]))) continue;
        if (k && n_out) bench_shape(types[ti], k, n_out, tok, reps, &r);
        else
            for (int s = 0; s < 2; s++) {
                const int swap = shapes[s][0] % mf_type_geom_get(types[ti])->blck != 0;
                bench_shape(types[ti], shapes[s][swap], shapes[s][!swap], tok, reps, &r);
            }
    }
    return 0;
}
