/* bench_persist.cu - would a persistent decode kernel stream a layer's
 * weights faster than one kernel per product? A question for the design of
 * issue 13's batch-1 decode, asked on the products alone (a benchmark, not
 * a test; nothing in the backend uses this kernel).
 *
 * A decode step's products run at 41-58% of the copy bandwidth each
 * (bench_mmvq), and a step spends about 0.5 ms more on them than their sum
 * alone: every kernel ramps up, drains, and leaves the memory idle while the
 * small kernels between products run. Here one kernel stays resident (a
 * block a multiprocessor) for L layers of qwen3-4b's four Q4_K products (QKV,
 * O, gate+up, down), one row of activations:
 * - warp 0 is a producer: one lane copies the block's share of each
 *   product's rows into a ring of shared-memory stages with bulk copies
 *   (cp.async.bulk, completion on an mbarrier), running ahead of the
 *   consumers across products (weights do not depend on the step);
 * - warps 1..15 consume a stage together: a row per team of warps (teams
 *   sized so that the stage's rows keep every warp busy), dp4a over int8
 *   activations in mmvq's lane layout; the stage's last warp adds the team
 *   partial sums in warp order, writes the outputs and frees the stage;
 * - between products, the consumers of all blocks meet at a grid barrier
 *   (a counter in global memory), as a real step must before it reads the
 *   previous product's output.
 * It prints us per layer and the share of the copy bandwidth, against the
 * same products as dp4a launches in a PDL graph (the decode step's kernels),
 * and the kernel without its grid barriers. Each product's outputs are
 * checked against mfc_mmvq's within 1e-4 of their largest magnitude (the
 * sums run in another order).
 *
 *   <build>/tests/bench_persist [layers [stages [stage KiB]]]
 * (14 layers, 8 stages of 16 KiB: the most the ring holds)
 *
 * Its first run (an H100, 2026-12-06) printed DIFFER: the outputs are wrong
 * by far more than rounding, a bug in the consumers not chased. The copies
 * (the weight bytes streamed) are the same either way, and even without
 * grid barriers it streamed slower than the launches (40.3 against 35.3 us
 * a layer), so the design was dropped (docs/PERFORMANCE.md). */
#include "cuda/kernels.h"
#include "cuda/mmq.cuh"
#define BENCH_NAME "bench_persist"
#include "graph_time.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define PB_WARPS 16              /* warp 0 produces, the rest consume */
#define PB_CW (PB_WARPS - 1)     /* consumer warps */
#define PB_STAGES 8               /* ring slots; a run may use fewer */
#define PB_STAGE (16 * 1024)     /* bytes a slot holds; a run may fill less */
#define PB_MAXP 64
#define MFT_Q4_K 12              /* mf_type Q4_K */

extern "C" double mf_cuda_copy_bandwidth(size_t bytes); /* cuda/cuda.h, a C header */

struct pb_prod {
    const uint8_t *w;
    float *y;
    int row_bytes, k, n;
};
struct pb_args {
    pb_prod p[PB_MAXP];
    int np;
    const int8_t *xq; /* one row of activations, int8 blocks of 32 (mfc_quant_x) */
    const float *xd, *xs;
    unsigned *bar; /* grid barrier counter, zero at launch; NULL: no barriers */
    int stages, stage_bytes; /* of the ring, this run: at most PB_STAGES, PB_STAGE */
};

struct pb_smem {
    uint8_t ring[PB_STAGES][PB_STAGE];
    uint64_t full[PB_STAGES], empty[PB_STAGES];
    float part[PB_STAGES][PB_CW];
    int done[PB_STAGES];
};

__device__ __forceinline__ uint32_t sa(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mb_init(uint64_t *b, unsigned n) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sa(b)), "r"(n) : "memory");
#endif
}
__device__ __forceinline__ void mb_expect(uint64_t *b, unsigned bytes) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sa(b)), "r"(bytes) : "memory");
#endif
}
__device__ __forceinline__ void mb_arrive(uint64_t *b) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sa(b)) : "memory");
#endif
}
__device__ __forceinline__ void mb_wait(uint64_t *b, unsigned parity) {
#if __CUDA_ARCH__ >= 900
    asm volatile("{\n .reg .pred p;\n W%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra W%=;\n}"
                 ::"r"(sa(b)), "r"(parity) : "memory");
#endif
}
__device__ __forceinline__ void bulk_in(void *dst, const void *src, unsigned bytes, uint64_t *b) {
#if __CUDA_ARCH__ >= 900
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(sa(dst)), "l"(src), "r"(bytes), "r"(sa(b)) : "memory");
#endif
}

/* the block's rows of product p, and its rows per stage */
__device__ __forceinline__ void rows_of(const pb_prod &p, int stage_bytes, int &r0, int &r1, int &rps) {
    r0 = (int)((long)p.n * blockIdx.x / gridDim.x);
    r1 = (int)((long)p.n * (blockIdx.x + 1) / gridDim.x);
    rps = stage_bytes / p.row_bytes;
    if (rps < 1) rps = 1; /* a row larger than a stage: one row, up to PB_STAGE */
}

/* a team member's share of one row's dot (row bytes in shared memory):
 * super-blocks m*4 + lane/8, + 4*team, ...; 8 lanes a super-block as mmvq */
__device__ float row_dot(const uint8_t *row, int nsb, int member, int team, const int8_t *__restrict__ xq,
                         const float *__restrict__ xd, const float *__restrict__ xs, int lane) {
    const int t = lane & 7, kk = t >> 1, h = t & 1;
    float acc = 0.0f;
    for (int sb = member * 4 + (lane >> 3); sb < nsb; sb += 4 * team) {
        const uint8_t *blk = row + (size_t)sb * 144;
        const uint4 hd = *(const uint4 *)blk; /* d, dmin, the 12 scale bytes */
        float dw0, mw0, dw1, mw1;             /* d * scale, dmin * min of the lane's two sub-blocks */
        k4_sm(hd, 2 * kk, dw0, mw0);
        k4_sm(hd, 2 * kk + 1, dw1, mw1);
        const uint4 qv = *(const uint4 *)(blk + 16 + 32 * kk + 16 * h);
        const int8_t *xr = xq + sb * 256 + 64 * kk + 16 * h;
        const int4 a4 = __ldg((const int4 *)xr), b4 = __ldg((const int4 *)(xr + 32));
        const int xa[4] = {a4.x, a4.y, a4.z, a4.w}, xb[4] = {b4.x, b4.y, b4.z, b4.w};
        const uint32_t q[4] = {qv.x, qv.y, qv.z, qv.w};
        int s0 = 0, s1 = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s0 = __dp4a((int)(q[i] & 0x0F0F0F0Fu), xa[i], s0);
            s1 = __dp4a((int)((q[i] >> 4) & 0x0F0F0F0Fu), xb[i], s1);
        }
        const int xb0 = sb * 8 + 2 * kk;
        float v = dw0 * __ldg(xd + xb0) * (float)s0 + dw1 * __ldg(xd + xb0 + 1) * (float)s1;
        if (h == 0) v -= mw0 * __ldg(xs + xb0) + mw1 * __ldg(xs + xb0 + 1);
        acc += v;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    return acc;
}

__global__ void __launch_bounds__(PB_WARPS * 32, 1) persist_k(pb_args a) {
    extern __shared__ __align__(128) uint8_t dyn[];
    pb_smem &sm = *(pb_smem *)dyn;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (threadIdx.x == 0) {
        for (int i = 0; i < PB_STAGES; i++) {
            mb_init(&sm.full[i], 1);
            mb_init(&sm.empty[i], 1);
            sm.done[i] = 0;
        }
#if __CUDA_ARCH__ >= 900
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
    }
    __syncthreads();
    if (warp == 0) { /* the producer */
        if (lane) return;
        int i = 0;
        for (int pi = 0; pi < a.np; pi++) {
            const pb_prod &p = a.p[pi];
            int r0, r1, rps;
            rows_of(p, a.stage_bytes, r0, r1, rps);
            for (int r = r0; r < r1; r += rps, i++) {
                const int slot = i % a.stages;
                if (i >= a.stages) mb_wait(&sm.empty[slot], ((i / a.stages) - 1) & 1);
                const unsigned bytes = (unsigned)(min(rps, r1 - r) * p.row_bytes);
                mb_expect(&sm.full[slot], bytes);
                bulk_in(sm.ring[slot], p.w + (size_t)r * p.row_bytes, bytes, &sm.full[slot]);
            }
        }
        return;
    }
    const int cw = warp - 1;
    int i = 0;
    for (int pi = 0; pi < a.np; pi++) {
        const pb_prod &p = a.p[pi];
        if (pi > 0 && a.bar) { /* every block's consumers done with product pi - 1 */
            asm volatile("bar.sync 1, %0;" ::"r"(PB_CW * 32) : "memory");
            if (cw == 0 && lane == 0) {
                __threadfence();
                const unsigned target = gridDim.x * (unsigned)pi;
                atomicAdd(a.bar, 1u);
                while (*(volatile unsigned *)a.bar < target) {
                }
                __threadfence();
            }
            asm volatile("bar.sync 1, %0;" ::"r"(PB_CW * 32) : "memory");
        }
        int r0, r1, rps;
        rows_of(p, a.stage_bytes, r0, r1, rps);
        const int nsb = p.k / 256;
        for (int r = r0; r < r1; r += rps, i++) {
            const int slot = i % a.stages, rows = min(rps, r1 - r);
            const int team = rows >= PB_CW ? 1 : PB_CW / rows;
            mb_wait(&sm.full[slot], (i / a.stages) & 1);
            /* warp cw: row cw / team of the stage, member cw % team; one
             * pass per PB_CW / team rows */
            const int per = PB_CW / team;
            float mine = 0.0f;
            for (int rr = cw / team; rr < rows; rr += per) {
                const float v = row_dot(sm.ring[slot] + (size_t)rr * p.row_bytes, nsb, cw % team, team, a.xq, a.xd,
                                        a.xs, lane);
                if (team == 1) {
                    if (lane == 0) p.y[r + rr] = v;
                } else {
                    mine = v;
                }
            }
            if (lane == 0) {
                sm.part[slot][cw] = mine;
                __threadfence_block();
                if (atomicAdd(&sm.done[slot], 1) == PB_CW - 1) { /* the stage's last warp */
                    __threadfence_block();
                    if (team > 1)
                        for (int rr = 0; rr < rows && rr < per; rr++) {
                            float s = 0.0f;
                            for (int m = 0; m < team; m++) s += sm.part[slot][rr * team + m];
                            p.y[r + rr] = s;
                        }
                    sm.done[slot] = 0;
                    mb_arrive(&sm.empty[slot]);
                }
            }
        }
    }
}

static float run_persist(cudaStream_t s, const pb_args &a0, bool barriers, int grid, unsigned *bar, int reps) {
    pb_args a = a0;
    a.bar = barriers ? bar : NULL;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    float best = 1e30f;
    for (int it = 0; it <= reps; it++) {
        CK(cudaMemsetAsync(bar, 0, sizeof(unsigned), s));
        cudaEventRecord(e0, s);
        void *args[] = {&a}; /* cooperative: every block resident, or no launch */
        CK(cudaLaunchCooperativeKernel((const void *)persist_k, grid, PB_WARPS * 32, args, sizeof(pb_smem), s));
        cudaEventRecord(e1, s);
        CK(cudaEventSynchronize(e1));
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, e0, e1);
        if (it && ms < best) best = ms; /* the first run warms up */
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return best;
}

int main(int argc, char **argv) {
    const int L = argc > 1 ? atoi(argv[1]) : 14; /* 14 layers: 800 MB, far past the L2 */
    const int stages = argc > 2 ? atoi(argv[2]) : PB_STAGES, skib = argc > 3 ? atoi(argv[3]) : PB_STAGE / 1024;
    /* the down product's rows (5472 bytes) must fit a stage */
    if (L < 1 || 4 * L > PB_MAXP || stages < 2 || stages > PB_STAGES || skib < 6 || skib * 1024 > PB_STAGE) {
        fprintf(stderr, "usage: bench_persist [layers 1..%d [stages 2..%d [stage KiB 6..%d]]]\n", PB_MAXP / 4,
                PB_STAGES, PB_STAGE / 1024);
        return 2;
    }
    int nd = 0;
    if (cudaGetDeviceCount(&nd) != cudaSuccess || nd == 0) {
        fprintf(stderr, "bench_persist: no CUDA device\n");
        return 77;
    }
    int major = 0, sms = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    if (major < 9) {
        fprintf(stderr, "bench_persist: needs sm_90 (bulk copies, mbarriers)\n");
        return 77;
    }
    mfc_pdl_on = true;
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaFuncSetAttribute(persist_k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sizeof(pb_smem)));
    int per_sm = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persist_k, PB_WARPS * 32, sizeof(pb_smem)));
    if (per_sm < 1) {
        fprintf(stderr, "bench_persist: the kernel does not fit a multiprocessor\n");
        return 1;
    }
    /* qwen3-4b's products of a layer, Q4_K (144 bytes per 256) */
    static const struct {
        const char *what;
        int k, n;
    } shp[4] = {{"qkv", 2560, 6144}, {"o", 4096, 2560}, {"gate+up", 2560, 19456}, {"down", 9728, 2560}};
    size_t layer = 0;
    for (int j = 0; j < 4; j++) layer += (size_t)shp[j].k / 256 * 144 * shp[j].n;
    /* random levels and scales, finite f16 d and dmin */
    uint8_t *h = (uint8_t *)malloc(layer);
    uint32_t rs = 12345;
    for (size_t b = 0; b < layer; b++) {
        rs = rs * 1664525u + 1013904223u;
        h[b] = (uint8_t)(rs >> 24);
    }
    for (size_t b = 0; b < layer; b += 144) {
        const __half d = __float2half(0.001f + (float)(h[b] & 15) * 1e-4f), dm = __float2half(0.0005f);
        memcpy(h + b, &d, 2), memcpy(h + b + 2, &dm, 2);
    }
    uint8_t *w;
    CK(cudaMalloc((void **)&w, layer * L));
    for (int l = 0; l < L; l++) CK(cudaMemcpy(w + layer * l, h, layer, cudaMemcpyHostToDevice));
    free(h);
    /* one row of activations, quantized as the decode products read them */
    const int KMAX = 9728;
    float *hx = (float *)malloc(sizeof(float) * KMAX), *x;
    for (int i = 0; i < KMAX; i++) hx[i] = sinf(0.37f * (float)i) * (1.0f + (float)(i % 7));
    CK(cudaMalloc((void **)&x, sizeof(float) * KMAX));
    CK(cudaMemcpy(x, hx, sizeof(float) * KMAX, cudaMemcpyHostToDevice));
    free(hx);
    mfc_q8 q = {0};
    CK(cudaMalloc((void **)&q.q, 16 * KMAX));
    CK(cudaMalloc((void **)&q.d, 16 * KMAX / 4));
    CK(cudaMalloc((void **)&q.s, 16 * KMAX / 8));
    size_t ny = 0;
    for (int j = 0; j < 4; j++) ny += shp[j].n;
    float *y, *yref;
    CK(cudaMalloc((void **)&y, sizeof(float) * ny * L));
    CK(cudaMalloc((void **)&yref, sizeof(float) * ny * L));
    unsigned *bar;
    CK(cudaMalloc((void **)&bar, sizeof(unsigned)));

    pb_args a = {};
    a.np = 4 * L;
    a.xq = q.q, a.xd = q.d, a.xs = q.s;
    a.stages = stages, a.stage_bytes = skib * 1024;
    size_t wo = 0, yo = 0;
    for (int l = 0; l < L; l++)
        for (int j = 0; j < 4; j++) {
            const int rb = shp[j].k / 256 * 144;
            a.p[4 * l + j] = (pb_prod){w + wo, y + yo, rb, shp[j].k, shp[j].n};
            wo += (size_t)rb * shp[j].n;
            yo += shp[j].n;
        }
    /* the same products as the decode step launches them: a PDL graph */
    mfc_quant_x(s, x, KMAX, 1, &q);
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < a.np; i++) {
        const pb_prod &p = a.p[i];
        mfc_mmvq(s, MFT_Q4_K, p.w, (size_t)p.row_bytes, p.k, p.n, &q, 1, yref + (p.y - y), NULL, NULL);
    }
    CK(cudaStreamEndCapture(s, &g));
    const float ms_graph = graph_best_ms(s, g, 5);
    cudaGraphDestroy(g);
    CK(cudaStreamSynchronize(s));

    const int grid = sms; /* a block a multiprocessor, launched cooperatively: the grid barrier cannot hang */
    const float ms_bar = run_persist(s, a, true, grid, bar, 5);
    /* outputs against mfc_mmvq's */
    float *hy = (float *)malloc(sizeof(float) * ny * L), *hr = (float *)malloc(sizeof(float) * ny * L);
    CK(cudaMemcpy(hy, y, sizeof(float) * ny * L, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hr, yref, sizeof(float) * ny * L, cudaMemcpyDeviceToHost));
    int bad = 0;
    for (int i = 0; i < a.np; i++) {
        const size_t o = a.p[i].y - y;
        float big = 0.0f, worst = 0.0f;
        for (int r = 0; r < a.p[i].n; r++) big = fmaxf(big, fabsf(hr[o + r]));
        for (int r = 0; r < a.p[i].n; r++) worst = fmaxf(worst, fabsf(hy[o + r] - hr[o + r]));
        if (!(worst <= 1e-4f * big) || big == 0.0f) {
            if (bad++ < 4)
                fprintf(stderr, "bench_persist: product %d (%s): worst difference %.3g of largest %.3g\n", i,
                        shp[i % 4].what, worst, big);
        }
    }
    free(hy), free(hr);
    const float ms_free = run_persist(s, a, false, grid, bar, 5);
    const double copy = mf_cuda_copy_bandwidth((size_t)1 << 30), bytes = (double)layer * L;
    printf("bench_persist: %d layers of qwen3-4b's Q4_K products (%.1f MB a layer), %d blocks of %d warps, %d stages "
           "of %d KiB, copy %.0f GB/s; outputs %s\n",
           L, layer / 1e6, grid, PB_WARPS, stages, skib, copy, bad ? "DIFFER from mfc_mmvq's" : "match mfc_mmvq's");
    printf("%-44s %10s %8s %7s\n", "", "us/layer", "GB/s", "%copy");
    const struct {
        const char *what;
        float ms;
    } row[3] = {{"dp4a launches in a PDL graph (the step's)", ms_graph},
                {"persistent, grid barrier between products", ms_bar},
                {"persistent, no barriers", ms_free}};
    for (int i = 0; i < 3; i++) {
        const double gbs = bytes / (row[i].ms * 1e-3) / 1e9;
        printf("%-44s %10.2f %8.0f %6.1f%%\n", row[i].what, row[i].ms * 1e3 / L, gbs, 100.0 * gbs / copy);
    }
    cudaFree(w), cudaFree(x), cudaFree(q.q), cudaFree(q.d), cudaFree(q.s), cudaFree(y), cudaFree(yref), cudaFree(bar);
    return bad ? 1 : 0;
}
