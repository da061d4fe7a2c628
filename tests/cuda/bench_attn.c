/* bench_attn.c - one layer's decode attention (qwen3-4b's shape: 32 query
 * heads over 8 KV heads of 128, f16 cache in pages of 64) at several
 * depths and for 1, 16 or 64 sequences, with the tensor-core and tile
 * kernels (with and without their copies before the wait) and the grouped
 * one, as a decode
 * step runs it: 64 layers' launches captured in a
 * CUDA graph with programmatic dependent launch and replayed, so a figure
 * is one launch's share of the replay. Beside it, an empty kernel's, the
 * least a kernel boundary costs inside such a graph. Timing only:
 * test_cuda checks the values.
 *
 *   <build>/tests/bench_attn [-c 0..4] [-nz N]
 *     -c: one configuration of the list below alone (for a profiler)
 *     -nz: blocks along the shares (0: the backend's choice) */
#include "cuda/cuda.h"
#include "cuda/kernels.h"
#define BENCH_NAME "bench_attn"
#include "graph_time.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

enum { L = 64, NH = 32, NKV = 8, HD = 128, PAGE = 64 };

static cudaStream_t s;

/* what one replayed launch of f costs, best of 7 replays of L launches */
typedef void (*step_fn)(int l, void *arg);
static double per_launch(step_fn f, void *arg) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < L; l++) f(l, arg);
    CK(cudaStreamEndCapture(s, &g));
    const float ms = graph_best_ms(s, g, 7);
    cudaGraphDestroy(g);
    if (ms < 0) {
        fprintf(stderr, "bench_attn: graph replay failed: %s\n", cudaGetErrorString(cudaGetLastError()));
        exit(1);
    }
    return ms * 1e3 / L;
}

static void empty(int l, void *arg) { mfc_empty(s, *(int *)arg); }

typedef struct {
    mfc_step_dev sd;
    mfc_attn p;
    void *kc[L], *vc[L];
    float *q, *k, *v, *out, *part;
    mfc_q8 q8;
    int nsplit, nz, rows;
    mfc_rope r;
} att;

static void attention(int l, void *arg) {
    att *a = arg;
    mfc_attention(s, &a->sd, a->rows, a->q, a->kc[l], a->vc[l], &a->p, a->out, a->nsplit, a->nz, a->part, &a->q8);
}

static void rope_attention(int l, void *arg) {
    att *a = arg;
    const mfc_rope_grp qg = {a->q, NULL, NH, false, 0.0f}, kg = {a->k, NULL, NKV, false, 0.0f};
    if (!mfc_rope_store(s, &a->sd, a->rows, &qg, &kg, HD, &a->r, a->v, a->kc[l], a->vc[l], NKV * HD, NKV * HD, MFC_KV_F16)) {
        fprintf(stderr, "bench_attn: the fused RoPE + store refused this shape\n");
        exit(1);
    }
    attention(l, arg);
}

int main(int argc, char **argv) {
    int only = -1; /* -c N: that configuration alone (for a profiler); -nz N: blocks along the shares */
    for (int i = 1; i < argc; i += 2) {
        char *end = NULL;
        const long v = i + 1 < argc ? strtol(argv[i + 1], &end, 10) : -1;
        const bool num = end && end != argv[i + 1] && !*end;
        if (!strcmp(argv[i], "-c") && num && v >= 0 && v <= 4) only = (int)v;
        else if (!strcmp(argv[i], "-nz") && num && v >= 0 && v <= MFC_ATT_MAX_SHARES) mfc_att_tile_nz = (int)v;
        else {
            fprintf(stderr, "usage: bench_attn [-c 0..4] [-nz 0..%d]\n", MFC_ATT_MAX_SHARES);
            return 2;
        }
    }
    int nd = 0;
    if (cudaGetDeviceCount(&nd) != cudaSuccess || nd == 0) {
        fprintf(stderr, "bench_attn: no CUDA device\n");
        return 77;
    }
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    mfc_pdl_on = major >= 9;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    static const int blocks[] = {1, 32, 132, 1024};
    for (int i = 0; i < 4; i++) {
        int b = blocks[i];
        printf("empty kernel, %4d blocks: %6.2f us\n", b, per_launch(empty, &b));
    }
    /* rows (each its own sequence, at the same depth) and depths as minfer
     * bench makes them: tg128 (128 cells), 1024 and 4096 deep, and the
     * aggregate decode of 16 and 64 sequences (12288 cells of context);
     * each with every decode kernel (mfc_att_kernel) */
    static const int cfgs[][3] = {{1, 128, 256}, {1, 1024, 2048}, {1, 4224, 4352}, {16, 192, 12288}, {64, 192, 12288}};
    for (int ci = 0; ci < 5; ci++) {
        if (only >= 0 && ci != only) continue;
        const int rows = cfgs[ci][0], ctx = cfgs[ci][1], cap = cfgs[ci][2];
        att a = {0};
        a.nsplit = (cap + 31) / 32 < MFC_ATT_MAX_SHARES ? (cap + 31) / 32 : MFC_ATT_MAX_SHARES;
        a.nz = a.nsplit; /* a captured step's: the context's capacity */
        a.p = (mfc_attn){NH, NKV, HD, HD, 1.0f / sqrtf((float)HD), 0.0f, 0, PAGE, NKV * HD, NKV * HD, MFC_KV_F16, 1};
        a.r = (mfc_rope){1, HD, powf(1e6f, -2.0f / HD), 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, NULL};
        a.rows = rows;
        const int np = ctx / PAGE + 1; /* pages a row */
        const size_t cells = (size_t)rows * np * PAGE, row = (size_t)NKV * HD * 2;
        for (int l = 0; l < L; l++) {
            CK(cudaMalloc(&a.kc[l], cells * row));
            CK(cudaMalloc(&a.vc[l], cells * row));
            CK(cudaMemset(a.kc[l], 0x22, cells * row));
            CK(cudaMemset(a.vc[l], 0x22, cells * row));
        }
        const size_t nq = (size_t)rows * NH * HD, nk = (size_t)rows * NKV * HD;
        CK(cudaMalloc((void **)&a.q, sizeof(float) * nq));
        CK(cudaMemset(a.q, 0, sizeof(float) * nq));
        CK(cudaMalloc((void **)&a.out, sizeof(float) * nq));
        CK(cudaMalloc((void **)&a.k, sizeof(float) * nk));
        CK(cudaMemset(a.k, 0, sizeof(float) * nk));
        CK(cudaMalloc((void **)&a.v, sizeof(float) * nk));
        CK(cudaMemset(a.v, 0, sizeof(float) * nk));
        CK(cudaMalloc((void **)&a.part, sizeof(float) * nq / HD * a.nsplit * (HD + 2)));
        CK(cudaMalloc((void **)&a.q8.q, nq));
        CK(cudaMalloc((void **)&a.q8.d, nq / 8));
        CK(cudaMalloc((void **)&a.q8.s, nq / 8));
        /* each row the last position of its own sequence: tok, pos, cell,
         * rowseq, out_rows [rows each], seq_pg [rows], pages [rows x np] */
        const size_t nh = 6 * (size_t)rows + (size_t)rows * np;
        int32_t *h = malloc(nh * sizeof *h), *tok = h, *pos = h + rows, *cell = h + 2 * rows, *rs = h + 3 * rows,
                *orow = h + 4 * rows, *spg = h + 5 * rows, *pg = h + 6 * rows;
        for (int r = 0; r < rows; r++) {
            tok[r] = 0, pos[r] = ctx - 1, cell[r] = r * np * PAGE + ctx - 1, rs[r] = r, orow[r] = r, spg[r] = r * np;
            for (int i = 0; i < np; i++) pg[r * np + i] = r * np + i;
        }
        int32_t *d;
        CK(cudaMalloc((void **)&d, nh * sizeof *h));
        CK(cudaMemcpy(d, h, nh * sizeof *h, cudaMemcpyHostToDevice));
        free(h);
        a.sd = (mfc_step_dev){d, d + rows, d + 2 * rows, d + 3 * rows, d + 4 * rows, d + 5 * rows, d + 6 * rows};
        const double kv_mb = (double)rows * ctx * row * 2 / 1e6;
        /* the tensor-core and tile kernels with their early copies (as a
         * decode step runs them) and without, the grouped kernel */
        static const char *kn[] = {"mma", "mma, no early copies", "tile", "tile, no early copies", "grouped"};
        static const int kk[] = {2, 2, 0, 0, 1};
        for (int k = 0; k < 5; k++) {
            mfc_att_kernel = kk[k];
            a.p.early = k == 0 || k == 2;
            const double us = per_launch(attention, &a), us2 = per_launch(rope_attention, &a);
            printf("%2d rows, depth %4d (%5.1f MB of K and V), %-21s: attention %7.2f us (%6.0f GB/s), "
                   "RoPE + store + attention %7.2f us\n",
                   rows, ctx, kv_mb, kn[k], us, kv_mb / us * 1e3, us2);
        }
        mfc_att_kernel = 2; /* the default */
        for (int l = 0; l < L; l++) cudaFree(a.kc[l]), cudaFree(a.vc[l]);
        cudaFree(a.q), cudaFree(a.k), cudaFree(a.out), cudaFree(a.v), cudaFree(a.part), cudaFree(d);
        cudaFree(a.q8.q), cudaFree(a.q8.d), cudaFree(a.q8.s);
    }
    return 0;
}
