/* bench_attn.c - one layer's decode attention (qwen3-4b's shape: 32 query
 * heads over 8 KV heads of 128, f16 cache in pages of 64) at several
 * depths, as a decode step runs it: 64 layers' launches captured in a
 * CUDA graph with programmatic dependent launch and replayed, so a figure
 * is one launch's share of the replay. Beside it, an empty kernel's, the
 * least a kernel boundary costs inside such a graph. Timing only:
 * test_cuda checks the values.
 *
 *   <build>/tests/bench_attn */
#include "cuda/cuda.h"
#include "cuda/kernels.h"
#define BENCH_NAME "bench_attn"
#include "graph_time.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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
    int nsplit, nz;
    mfc_rope r;
} att;

static void attention(int l, void *arg) {
    att *a = arg;
    mfc_attention(s, &a->sd, 1, a->q, a->kc[l], a->vc[l], &a->p, a->out, a->nsplit, a->nz, a->part, &a->q8);
}

static void rope_attention(int l, void *arg) {
    att *a = arg;
    const mfc_rope_grp qg = {a->q, NULL, NH, false, 0.0f}, kg = {a->k, NULL, NKV, false, 0.0f};
    if (!mfc_rope_store(s, &a->sd, 1, &qg, &kg, HD, &a->r, a->v, a->kc[l], a->vc[l], NKV * HD, NKV * HD, MFC_KV_F16)) {
        fprintf(stderr, "bench_attn: the fused RoPE + store refused this shape\n");
        exit(1);
    }
    attention(l, arg);
}

int main(void) {
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
    /* contexts as minfer bench makes them: tg128 (128 cells), 4096 deep */
    /* share 0: the backend's choice for the context */
    static const int ctxs[][2] = {{128, 0}, {128, 16}, {128, 64}, {128, 128}, {1024, 0}, {4224, 0}, {4224, 132}};
    for (int ci = 0; ci < 7; ci++) {
        const int ctx = ctxs[ci][0];
        att a = {0};
        const int share = ctxs[ci][1] ? ctxs[ci][1] : (ctx + 63) / 64 < 32 ? 32 : (ctx + 63) / 64;
        a.nsplit = (ctx + share - 1) / share;
        a.nz = a.nsplit; /* a captured step's: the context's capacity */
        a.p = (mfc_attn){NH, NKV, HD, HD, 1.0f / sqrtf((float)HD), 0.0f, 0, PAGE, NKV * HD, NKV * HD, MFC_KV_F16, share};
        a.r = (mfc_rope){1, HD, powf(1e6f, -2.0f / HD), 1.0f, 0.0f, 1.0f, 0.0f, 0.0f, NULL};
        const int np = ctx / PAGE + 1;
        const size_t cells = (size_t)np * PAGE, row = (size_t)NKV * HD * 2;
        for (int l = 0; l < L; l++) {
            CK(cudaMalloc(&a.kc[l], cells * row));
            CK(cudaMalloc(&a.vc[l], cells * row));
            CK(cudaMemset(a.kc[l], 0x22, cells * row));
            CK(cudaMemset(a.vc[l], 0x22, cells * row));
        }
        CK(cudaMalloc((void **)&a.q, sizeof(float) * NH * HD));
        CK(cudaMemset(a.q, 0, sizeof(float) * NH * HD));
        CK(cudaMalloc((void **)&a.out, sizeof(float) * NH * HD));
        CK(cudaMalloc((void **)&a.k, sizeof(float) * NKV * HD));
        CK(cudaMemset(a.k, 0, sizeof(float) * NKV * HD));
        CK(cudaMalloc((void **)&a.v, sizeof(float) * NKV * HD));
        CK(cudaMemset(a.v, 0, sizeof(float) * NKV * HD));
        CK(cudaMalloc((void **)&a.part, sizeof(float) * NH * a.nsplit * (HD + 2)));
        CK(cudaMalloc((void **)&a.q8.q, NH * HD));
        CK(cudaMalloc((void **)&a.q8.d, NH * HD / 8));
        CK(cudaMalloc((void **)&a.q8.s, NH * HD / 8));
        /* one row at the last position: tok, pos, cell, rowseq, out_rows, seq_pg, pages */
        int32_t h[6 + 80]; /* the deepest context here has 67 pages */
        h[0] = 0, h[1] = ctx - 1, h[2] = ctx - 1, h[3] = 0, h[4] = 0, h[5] = 0;
        for (int i = 0; i < np; i++) h[6 + i] = i;
        int32_t *d;
        CK(cudaMalloc((void **)&d, sizeof h));
        CK(cudaMemcpy(d, h, sizeof h, cudaMemcpyHostToDevice));
        a.sd = (mfc_step_dev){d, d + 1, d + 2, d + 3, d + 4, d + 5, d + 6};
        printf("depth %4d (share %d, %d blocks along it): attention %6.2f us, RoPE + store + attention %6.2f us\n", ctx,
               share, a.nz, per_launch(attention, &a), per_launch(rope_attention, &a));
        for (int l = 0; l < L; l++) cudaFree(a.kc[l]), cudaFree(a.vc[l]);
        cudaFree(a.q), cudaFree(a.k), cudaFree(a.out), cudaFree(a.v), cudaFree(a.part), cudaFree(d);
        cudaFree(a.q8.q), cudaFree(a.q8.d), cudaFree(a.q8.s);
    }
    return 0;
}
