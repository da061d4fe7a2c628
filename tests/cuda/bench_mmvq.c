/* bench_mmvq.c - the batch-1 decode products alone, at the shapes of real
 * models, as a share of the device's copy bandwidth: what the matvec
 * kernels leave on the table, without the rest of a decode step around them.
 *
 *   <build>/tests/bench_mmvq [-w 0|1|2|4] [-W 0|1|2|4] [-r rows] [-tc 1] [-tr rows]
 *     -w  warps per weight row (0: the backend's choice by k)
 *     -r  activation rows: 1..8 dp4a, 9..2048 int8 mma (chunks of 32)
 *     -tc 1: the f16 tensor-core prefill tiles instead (9 rows and more)
 *     -tc 2: the f16 prompt tiles of k_gemm_h.cu (65 rows and more by
 *        default; -hr sets their fewest rows), the activations' conversion
 *        to f16 included in each launch's time; -hs N: at most N parts of
 *        k (1: none)
 *     -g8 0|1: over 8 rows, K-quant activations with a scale per 32 (0) or
 *        one per super-block of 256 (1, the default, as the backend asks)
 *     -s NAME: that shape alone (for a profiler)
 *     -c 16|32|64: the int8 mma kernel's rows per chunk (default 32)
 *     -t 0|1: over 8 rows, k_mmq.cu's kernel (0) or the shared-memory tiles
 *        of k_mmq_tile.cu (1, the default; from 65 rows)
 *     -W 1|2|4: warps per 8 weight rows in k_mmq.cu's kernel (0: by k)
 *     -st 0|1: k_mmq.cu's activations read per mma (0) or staged in shared
 *        memory half a super-block ahead (1, the default)
 *     -tr N: the fewest rows the shared-memory tiles take (default 65)
 *     -o 0|1: one row, the 64-register variant for large K-quant grids
 *        off (0) or on (1, the default)
 *
 * Each shape's weights are constant bytes in several copies (over 256 MB in
 * all, beyond the L2), cycled through so every launch reads from HBM; 64
 * launches are captured in one graph (with programmatic dependent launch,
 * as a decode step runs them) and the graph replayed, so a figure is a
 * launch as it costs inside a step: the bytes of one product over its
 * share of the replay. Timing only: the kernels' values are checked by
 * test_cuda_kernels. */
#include "cuda/cuda.h"
#include "cuda/kernels.h"
#define BENCH_NAME "bench_mmvq"
#include "graph_time.h"
#include "quant/types.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

typedef struct {
    const char *what;
    int type, k, n, nseg; /* nseg products of n rows each, one launch */
} shape;

static const shape shapes[] = {
    {"qwen3-4b qkv", MF_TYPE_Q4_K, 2560, 2048, 3},
    {"qwen3-4b o", MF_TYPE_Q4_K, 4096, 2560, 1},
    {"qwen3-4b gate+up", MF_TYPE_Q4_K, 2560, 9728, 2},
    {"qwen3-4b down q4_k", MF_TYPE_Q4_K, 9728, 2560, 1},
    {"qwen3-4b down q6_k", MF_TYPE_Q6_K, 9728, 2560, 1},
    {"qwen3-4b head q6_k", MF_TYPE_Q6_K, 2560, 151936, 1},
    {"qwen3-4b qkv q8_0", MF_TYPE_Q8_0, 2560, 2048, 3},
    {"qwen3-4b gate+up q8_0", MF_TYPE_Q8_0, 2560, 9728, 2},
    {"qwen3-4b down q8_0", MF_TYPE_Q8_0, 9728, 2560, 1},
    {"llama-3-8b qkv", MF_TYPE_Q4_K, 4096, 2048, 3},
    {"llama-3-8b gate+up", MF_TYPE_Q4_K, 4096, 14336, 2},
    {"llama-3-8b down q4_k", MF_TYPE_Q4_K, 14336, 4096, 1},
    {"llama-3-8b down q6_k", MF_TYPE_Q6_K, 14336, 4096, 1},
    {"qwen3-4b gate+up q2_k", MF_TYPE_Q2_K, 2560, 9728, 2},
    {"qwen3-4b gate+up q3_k", MF_TYPE_Q3_K, 2560, 9728, 2},
    {"qwen3-4b gate+up iq4_nl", MF_TYPE_IQ4_NL, 2560, 9728, 2},
    {"qwen3-4b gate+up iq4_xs", MF_TYPE_IQ4_XS, 2560, 9728, 2},
    {"qwen3-4b down iq4_xs", MF_TYPE_IQ4_XS, 9728, 2560, 1},
};

int main(int argc, char **argv) {
    int rows = 1, tc = 0;
    const char *only = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-w")) mfc_mmvq_w = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-r")) rows = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-tc")) tc = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-c")) mfc_mmq_chunk = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-t")) mfc_mmq_tile_on = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "-W")) mfc_mmq_w = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-tr")) mfc_mmq_tile_rows = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-o")) mfc_mmvq_occ = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-hr")) mfc_gemm_h_rows = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-hs")) mfc_gemm_h_split = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-st")) mfc_mmq_stage = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-g8")) mfc_q8_g8 = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "-s")) only = argv[i + 1];
        else {
            fprintf(stderr, "usage: bench_mmvq [-w 0|1|2|4] [-W 0|1|2|4] [-r rows] [-tc 1|2] [-c 16|32|64] [-t 0|1] [-tr rows] [-o 0|1] [-hr rows] [-hs parts] [-st 0|1] [-g8 0|1] [-s name]\n");
            return 2;
        }
    }
    if (rows < 1 || rows > 2048 || (tc && rows <= 8)) {
        fprintf(stderr, "bench_mmvq: -r takes 1..2048 rows (with -tc: 9..2048)\n");
        return 2;
    }
    int nd = 0;
    if (cudaGetDeviceCount(&nd) != cudaSuccess || nd == 0) {
        fprintf(stderr, "bench_mmvq: no CUDA device\n");
        return 77;
    }
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    mfc_pdl_on = major >= 9;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));

    /* the ceiling `minfer bench` sets decode against */
    const double copy_gbs = mf_cuda_copy_bandwidth((size_t)1 << 30);
    printf("copy: %.0f GB/s (read + write); rows %d, %s, warps per row %d (0: by k)\n", copy_gbs, rows,
           tc == 2 ? "f16 prompt tiles" : tc ? "f16 tensor cores" : rows > 8 ? "int8 mma" : "dp4a", mfc_mmvq_w);
    printf("%-22s %6s %7s %9s %8s %8s %7s %8s\n", "product", "k", "n", "MB", "us", "GB/s", "%copy", "TFLOP/s");

    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const shape *sh = &shapes[si];
        /* types the int8 mma kernel has no path for (rows over 8) */
        /* the type the backend gives the kernels (Q8_0: regrouped rows) */
        const int dt = mfc_dev_type(sh->type, sh->k);
        if (!tc && !mfc_mmvq_takes(dt, sh->k, rows)) continue;
        if (tc == 2 && !mfc_gemm_h_takes(dt, sh->k, rows)) continue;
        if (only && strcmp(sh->what, only)) continue;
        const size_t rb = mf_row_size(sh->type, sh->k), seg_bytes = rb * (size_t)sh->n;
        const size_t bytes = seg_bytes * sh->nseg;
        int copies = (int)(((size_t)256 << 20) / bytes) + 2;
        if (copies > 64) copies = 64;
        uint8_t *w;
        CK(cudaMalloc((void **)&w, bytes * copies));
        /* constant bytes (finite f16 scales): the kernels' instruction
         * stream does not depend on the values */
        CK(cudaMemset(w, 0x11, bytes * copies));
        float *x, *out;
        mfc_q8 q = {0};
        q.g8 = mfc_q8_g8 && sh->type != MF_TYPE_Q8_0; /* as the backend asks */
        CK(cudaMalloc((void **)&x, sizeof(float) * sh->k * rows));
        CK(cudaMemset(x, 0, sizeof(float) * sh->k * rows));
        CK(cudaMalloc((void **)&out, sizeof(float) * (size_t)sh->n * sh->nseg * rows));
        const size_t rt = (size_t)(rows + 15) / 16 * 16; /* the tiled layout's whole tiles, (d, s) pairs */
        CK(cudaMalloc((void **)&q.q, (size_t)sh->k * rt));
        CK(cudaMalloc((void **)&q.d, (size_t)sh->k * rt / 4));
        CK(cudaMalloc((void **)&q.s, (size_t)sh->k * rt / 8));
        mfc_quant_x(s, x, sh->k, rows, &q);
        mfc_xh xh = {0};
        CK(cudaMalloc(&xh.h, (size_t)sh->k * rows * 2));
        CK(cudaMalloc((void **)&xh.s, sizeof(float) * rows));
        CK(cudaMalloc((void **)&xh.part, sizeof(float) * rows * MFC_H_PART_PER_ROW));
        enum { L = 64 };
        cudaGraph_t g;
        CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int l = 0; l < L; l++) {
            const uint8_t *wl = w + (size_t)(l % copies) * bytes;
            mfc_mm_seg seg[MFC_MAX_SEGS];
            for (int i = 0; i < sh->nseg; i++)
                seg[i] = (mfc_mm_seg){wl + i * seg_bytes, rb, dt, sh->n, out + (size_t)i * sh->n * rows, NULL,
                                      NULL};
            if (tc == 2) {
                if (!mfc_gemm_h(s, seg, sh->nseg, sh->k, x, rows, &xh)) { /* as the backend: one by one */
                    mfc_x_to_h(s, x, sh->k, rows, &xh);
                    for (int i = 0; i < sh->nseg; i++) mfc_gemm_h(s, &seg[i], 1, sh->k, NULL, rows, &xh);
                }
            }
            else if (tc)
                for (int i = 0; i < sh->nseg; i++)
                    mfc_gemm_tc(s, dt, seg[i].w, rb, sh->k, sh->n, x, rows, seg[i].out, NULL, NULL);
            else mfc_mmvq_n(s, seg, sh->nseg, sh->k, &q, rows);
        }
        CK(cudaStreamEndCapture(s, &g));
        const float ms_best = graph_best_ms(s, g, 7);
        if (ms_best < 0) {
            fprintf(stderr, "bench_mmvq: %s: graph replay failed: %s\n", sh->what, cudaGetErrorString(cudaGetLastError()));
            exit(1);
        }
        const double us = ms_best * 1e3 / L, gbs = bytes / (us * 1e-6) / 1e9;
        const double tflops = 2.0 * rows * (double)sh->k * sh->n * sh->nseg / (us * 1e-6) / 1e12;
        printf("%-22s %6d %7d %9.2f %8.2f %8.0f %6.1f%% %8.1f\n", sh->what, sh->k, sh->n * sh->nseg, bytes / 1e6, us, gbs,
               100.0 * gbs / copy_gbs, tflops);
        cudaGraphDestroy(g);
        cudaFree(w), cudaFree(x), cudaFree(out), cudaFree(q.q), cudaFree(q.d), cudaFree(q.s);
        cudaFree(xh.h), cudaFree(xh.s), cudaFree(xh.part);
    }
    return 0;
}
