/* bench_amx_vec.c - the vector half of the AMX kernels alone (not a ctest):
 * gemm_amx.h compiled with tile operations that do nothing, timed on packed
 * panels and tiles, so the cost of the AVX-512 steps around the multiplies
 * (scales, mins, float terms, stores) is seen on any AVX-512 VNNI CPU. The
 * outputs are meaningless. Run: build/tests/bench_amx_vec [K N TOKENS] */
#pragma GCC target("avx2,fma,f16c,bmi2,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
/* the no-op tile stores leave the kernels' sum buffers unwritten */
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#ifdef TILES_ONLY
#pragma GCC target("amx-tile,amx-int8,amx-bf16")
#endif
#include "../quant/qrand.h"
#include "cpu/kern/features.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifdef TILES_ONLY
/* bench_amx_tiles: the real tile instructions, the vector steps skipped */
#include "cpu/kern/gemm/gemm_amx_tl.h"
#define AMX_SKIP_VECTOR 1
#define AMX_LVL_NAME "tiles only"
#else
#define TL_CONFIG(c) ((void)(c))
#define TL_LOAD(n, p, s) ((void)(p), (void)(s))
#define TL_STORE(n, p, s) ((void)(p), (void)(s))
#define TL_ZERO(n) ((void)0)
#define TL_DPBSSD(c, a, b) ((void)0)
#define TL_DPBSUD(c, a, b) ((void)0)
#define TL_DPBF16PS(c, a, b) ((void)0)
#define AMX_LVL_NAME "no tiles"
#endif
#include "cpu/kern/gemm/gemm_amx.h"

static double now_cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
#ifdef TILES_ONLY
    if (!mf_amx_init()) {
        printf("bench_amx_tiles: %s\n", mf_amx_note());
        return 0;
    }
#endif
    if (mf_cpu_level_supported() < MF_CPU_AVX512_VNNI) {
        printf("bench_amx_vec: needs AVX-512 VNNI\n");
        return 0;
    }
    const char *pf = getenv("MINFER_AMX_PF"); /* register_amx's reading of it (not called here) */
    if (pf && *pf >= '0' && *pf <= '2') amx_pf = *pf - '0';
    const int64_t k = argc > 3 ? atoll(argv[1]) : 2048, n_out = argc > 3 ? atoll(argv[2]) : 2048;
    const int tok = argc > 3 ? atoi(argv[3]) : 64;
    const mf_gemm_kind *kinds[] = {&amx_kind_q4k, &amx_kind_mt_q4k, &amx_kind_q6k, &amx_kind_q8_0};
    const mf_type types[] = {MF_TYPE_Q4_K, MF_TYPE_Q4_K, MF_TYPE_Q6_K, MF_TYPE_Q8_0};
    qrand r = {7};
    for (int ki = 0; ki < 4; ki++) {
        const mf_gemm_kind *g = kinds[ki];
        const size_t rb = mf_row_size(types[ki], k);
        uint8_t *w = calloc(rb, (size_t)n_out);
        float *x = malloc(sizeof(float) * (size_t)k * tok), *out = malloc(sizeof(float) * (size_t)n_out * tok);
        qrand_fill(&r, x, k * tok, QDATA_GAUSS, 1.0);
        const int ntiles = (tok + 15) / 16, npan = g->rows_per_call / 16;
        const size_t tb = mf_gemm_tile_bytes(g->act, 16, k), pb = g->panel_bytes(k);
        uint8_t *tiles = aligned_alloc(64, tb * ntiles), *tmp = malloc(mf_gemm_tile_tmp_bytes(g->act, 16, k));
        uint8_t *panels = aligned_alloc(64, pb * npan);
        for (int i = 0; i < ntiles; i++)
            mf_gemm_tile_build(g->act, 16, x + (size_t)i * 16 * k, (size_t)k, 16, k,
                               mf_cpu_traits_for_level(mf_gemm_act_type(g->act), MF_CPU_AVX512_VNNI)->from_float, tmp,
                               tiles + (size_t)i * tb);
        for (int p = 0; p < npan; p++) g->pack(w, rb, 16, k, panels + (size_t)p * pb);
        const double t0 = now_cpu();
        /* the matmul's order: blocks of tiles_per_call tiles, every group per block */
        const int step = g->kernel_tiles ? g->tiles_per_call : 1;
        for (int i = 0; i < ntiles; i += step)
            for (int64_t r0 = 0; r0 < n_out; r0 += g->rows_per_call) {
                const int nb = ntiles - i < step ? ntiles - i : step;
                float *o = out + (size_t)i * 16 * n_out + r0;
                if (g->kernel_tiles) g->kernel_tiles(panels, pb, tiles + (size_t)i * tb, tb, nb, k, o, (size_t)n_out, g->rows_per_call, 16 * nb);
                else g->kernel(panels, pb, tiles + (size_t)i * tb, k, o, (size_t)n_out, g->rows_per_call, 16);
            }
        const double dt = now_cpu() - t0;
        printf("%-26s alone: %.1f GFLOP/s equivalent (k %lld, %lld rows, %d tokens)\n", g->name,
               2.0 * k * n_out * tok / dt * 1e-9, (long long)k, (long long)n_out, tok);
        free(w), free(x), free(out), free(tiles), free(tmp), free(panels);
    }
    return 0;
}
