/* rows.cuh - device helpers that more than one kernel computes the same
 * way, so that a fused kernel gives the bits of the separate ones: the
 * norm's reduction and scale (as a block of any size would sum it), the
 * gated activations, the rounding of 32 activations to one int8 block
 * (k_mmvq.cu's layout), and RoPE. */
#ifndef MF_CUDA_ROWS_CUH
#define MF_CUDA_ROWS_CUH

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "cuda/kernels.h"
#include "cuda/kvcache.cuh"

/* threads per block of a norm over rows of n (the reduction order depends
 * on it: every kernel that norms a row uses this count) */
__host__ __device__ static inline int norm_threads(int n) { return n >= 1024 ? 1024 : n >= 256 ? 256 : n >= 128 ? 128 : 64; }

/* Mean (LayerNorm; else 0) and 1/sqrt(var + eps) of the row xr[0..n), as
 * a block of nt threads sums it (the order depends on nt), computed by the
 * block, whose size divides nt (nt <= 1024): each thread holds the partial
 * sums of the nt / blockDim.x "virtual" threads tid + j * blockDim.x, whose
 * warps are reduced one by one, then the warps' sums together. Every
 * kernel that norms a row of n takes nt = norm_threads(n), so a smaller
 * block would get the same bits. */
__device__ __forceinline__ float vblock_sum(const float *v, int nv, float *sh) {
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nwr = blockDim.x >> 5;
    __syncthreads(); /* sh may still be read by a previous call */
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if (j >= nv) break;
        float s = v[j];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if (l == 0) sh[w + j * nwr] = s;
    }
    __syncthreads();
    float t = l < nv * nwr ? sh[l] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    return t;
}

__device__ __forceinline__ void norm_stats_v(bool layer, const float *xr, int n, int nt, float eps, float *sh,
                                             float &mean, float &scale) {
    const int nv = nt / blockDim.x;
    float v[8];
    mean = 0.0f;
    if (layer) {
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j >= nv) break;
            float s = 0.0f;
            for (int i = threadIdx.x + j * blockDim.x; i < n; i += nt) s += xr[i];
            v[j] = s;
        }
        mean = vblock_sum(v, nv, sh) / (float)n;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if (j >= nv) break;
        float s2 = 0.0f;
        for (int i = threadIdx.x + j * blockDim.x; i < n; i += nt) {
            const float d = xr[i] - mean;
            s2 = __fmaf_rn(d, d, s2);
        }
        v[j] = s2;
    }
    scale = 1.0f / sqrtf(vblock_sum(v, nv, sh) / (float)n + eps);
}

/* one normed element from its weight and bias values (1 and -0 where the
 * norm has none: x * 1 and x + -0 are x, signed zeros included), rounded
 * step by step as written: the kernels that load w and b early (before
 * pdl_wait) and those that read them in place give the same bits */
__device__ __forceinline__ float norm_elem_v(float x, float mean, float scale, float wv, float bv) {
    return __fadd_rn(__fmul_rn(__fmul_rn(__fsub_rn(x, mean), scale), wv), bv);
}

__device__ __forceinline__ float norm_elem(float x, float mean, float scale, const float *w, const float *b, int i) {
    return norm_elem_v(x, mean, scale, w ? w[i] : 1.0f, b ? b[i] : -0.0f);
}

/* GELU as the CPU takes it: tanh-GELU of the f16 rounding of x, rounded to
 * f16, for |x| < 10 (a table of f16 results there) */
__device__ __forceinline__ float gelu_f16(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = __half2float(__float2half_rn(x));
    const float c = 0.797884560802865355f;
    return __half2float(__float2half_rn(0.5f * h * (1.0f + tanhf(c * h * (1.0f + 0.044715f * h * h)))));
}

__device__ __forceinline__ float silu(float x) {
    const float t = expf(-fabsf(x));
    return x * ((x >= 0.0f ? 1.0f : t) / (1.0f + t));
}

/* act: 0 SwiGLU, 1 GEGLU, 2 GELU of the gate alone */
__device__ __forceinline__ float glu_act(int act, float g, float u) {
    return act == 0 ? silu(g) * u : act == 1 ? gelu_f16(g) * u : gelu_f16(g);
}

/* the largest |v| of the warp's 32 values */
__device__ __forceinline__ float warp_amax(float v) {
    float a = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    return a;
}

/* The warp's 32 values v (one per lane, block gb of the activations) to
 * int8: scale a/127 (a: warp_amax(v), or the largest of a group of blocks'
 * when they share a scale), round to nearest, and the scaled sum of the
 * levels. kbt: 0 for the row-major layout, else the blocks per row of the
 * tiled layout (kernels.h, mfc_q8_tiled_kb), where the pair (d, d * sum)
 * goes to xd and xs is not used. */
__device__ __forceinline__ void quant_block32_a(float v, float a, size_t gb, int8_t *xq, float *xd, float *xs,
                                                int kbt) {
    const int lane = threadIdx.x & 31;
    const float d = a / 127.0f;
    const int q = d > 0.0f ? __float2int_rn(v / d) : 0;
    int s = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (kbt) {
        const size_t r = gb / (size_t)kbt, unit = (r >> 4) * (size_t)kbt + gb % (size_t)kbt;
        const int rr = (int)(r & 15);
        /* lane 4 g + t of the fragment holds rows g and g + 8, levels 8t..8t+7,
         * as the mma's four A registers in order: (g, 8t..8t+3), (g + 8,
         * 8t..8t+3), (g, 8t+4..8t+7), (g + 8, 8t+4..8t+7) */
        xq[unit * 512 + (size_t)(4 * (rr & 7) + (lane >> 3)) * 16 + ((lane >> 2) & 1) * 8 + (rr >> 3) * 4 + (lane & 3)] =
            (int8_t)q;
        if (lane == 0) xd[(unit * 16 + rr) * 2] = d, xd[(unit * 16 + rr) * 2 + 1] = d * (float)s;
        return;
    }
    xq[gb * 32 + lane] = (int8_t)q;
    if (lane == 0) xd[gb] = d, xs[gb] = d * (float)s;
}

__device__ __forceinline__ void quant_block32(float v, size_t gb, int8_t *xq, float *xd, float *xs, int kbt) {
    quant_block32_a(v, warp_amax(v), gb, xq, xd, xs, kbt);
}

/* The largest of eight warps' a (warps 8 i .. 8 i + 7 of the block, a
 * super-block of 256 activations: kernels.h, mfc_q8.g8), through sh[2][8]
 * of the group, alternate halves on alternate calls (par): a warp can reach
 * the call after next only once all eight have passed the next one's
 * barrier, so no half is written while it is still read. Every thread of
 * the eight warps calls it; bar: a named barrier of theirs (1..15). */
__device__ __forceinline__ float group8_max(float a, float (*sh)[8], int par, int bar) {
    const int wi = (threadIdx.x >> 5) & 7;
    if ((threadIdx.x & 31) == 0) sh[par][wi] = a;
    asm volatile("bar.sync %0, 256;" ::"r"(bar) : "memory");
    float m = sh[par][0];
#pragma unroll
    for (int i = 1; i < 8; i++) m = fmaxf(m, sh[par][i]);
    return m;
}

/* ---- RoPE: a thread per pair ---- */

/* cos and sin (times the magnitude scale) of pair ip at position pos */
__device__ __forceinline__ void rope_cs(int ip, int pos, const mfc_rope &p, float &c, float &sn) {
    /* theta = pos * theta_scale^ip by repeated multiplication, as the CPU */
    float theta = (float)pos;
    for (int q = 0; q < ip; q++) theta *= p.theta_scale;
    const float th_ext = p.freq_factors ? theta / p.freq_factors[ip] : theta;
    const float th_int = p.freq_scale * th_ext;
    float th = th_int, ms = p.attn_factor;
    if (p.ext_factor != 0.0f) {
        const float y = ((float)ip - p.corr0) / fmaxf(0.001f, p.corr1 - p.corr0);
        const float ramp = (1 - fminf(1, fmaxf(0, y))) * p.ext_factor;
        /* rounded as written (no contraction left to the compiler), so the
         * kernels that inline this agree bitwise */
        th = __fadd_rn(__fmul_rn(th_int, __fsub_rn(1.0f, ramp)), __fmul_rn(th_ext, ramp));
        ms = __fmul_rn(ms, __fadd_rn(1.0f, __fmul_rn(0.1f, logf(1.0f / p.freq_scale))));
    }
    c = cosf(th) * ms, sn = sinf(th) * ms;
}

/* rotate pair ip of a head (half pairs) by (c, sn), each product rounded
 * before the sum, so every kernel that rotates gives the same bits */
__device__ __forceinline__ void rope_rot(float *v, int ip, int half, bool neox, float c, float sn) {
    const int a = neox ? ip : 2 * ip, bb = neox ? ip + half : 2 * ip + 1;
    const float x0 = v[a], x1 = v[bb];
    v[a] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn));
    v[bb] = __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
}

/* rotate the pairs of one head in place (v: global or shared memory) */
__device__ __forceinline__ void rope_head(float *v, int pos, const mfc_rope &p) {
    const int half = p.n_rot / 2;
    for (int ip = threadIdx.x; ip < half; ip += blockDim.x) {
        float c, sn;
        rope_cs(ip, pos, p, c, sn);
        rope_rot(v, ip, half, p.neox, c, sn);
    }
}

/* What one head's QK-norm and RoPE take that no kernel of a step writes:
 * the norm's weights of elements t and t + nt of thread t, and the cos and
 * sin of its pairs t and t + nt at the row's position. The kernels compute
 * it before pdl_wait, while the product before them still runs (a weight
 * load that misses the L2 and the rotation's serial theta chain leave the
 * critical path). A head of up to MFC_MAX_HEAD_DIM has at most two
 * elements a thread at norm_threads(head_dim) threads. */
static_assert(MFC_MAX_HEAD_DIM <= 512, "head_pre: two elements a thread at norm_threads' 256 threads for heads of 256..1023");
struct head_pre {
    float w[2], c[2], s[2];
};

__device__ __forceinline__ void head_pre_load(head_pre &pr, const mfc_rope_grp &g, int hd, int pos, const mfc_rope &p) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int i = threadIdx.x + j * blockDim.x;
        pr.w[j] = g.norm && g.w && i < hd ? g.w[i] : 1.0f;
        pr.c[j] = 1.0f, pr.s[j] = 0.0f;
        if (i < p.n_rot / 2) rope_cs(i, pos, p, pr.c[j], pr.s[j]);
    }
}

/* Row `row` of x normed (sums as nt threads take them) into yr and its
 * int8 blocks, whole blocks of 32 per warp (norm_quant_k). g8: one scale a
 * super-block (q8_g8_on; the block has 8 or 32 warps, so a super-block's
 * eight blocks are eight warps' of one round); gsh: 4 groups' group8_max
 * halves. */
__device__ __forceinline__ void norm_quant_row(bool layer, const float *xr, int n, int nt, float eps, const float *w,
                                               const float *b, float *yr, int8_t *xq, float *xd, float *xs, int row,
                                               int kbt, bool g8, float (*gsh)[2][8], float *sh) {
    float mean, scale;
    norm_stats_v(layer, xr, n, nt, eps, sh, mean, scale);
    const int lane = threadIdx.x & 31, nw = blockDim.x >> 5, nb = n / 32;
    int par = 0;
    for (int blk = threadIdx.x >> 5; blk < nb; blk += nw, par ^= 1) {
        const int i = blk * 32 + lane;
        const float y = norm_elem(xr[i], mean, scale, w, b, i);
        yr[i] = y;
        float a = warp_amax(y);
        if (g8) a = group8_max(a, gsh[(threadIdx.x >> 5) / 8], par, 1 + (int)(threadIdx.x >> 5) / 8);
        quant_block32_a(y, a, (size_t)row * nb + blk, xq, xd, xs, kbt);
    }
}

/* the gated activation of element i (block gb of 32, one per lane) and its
 * int8 block (glu_quant_k); g8: the block's 8 warps share one scale (sh) */
__device__ __forceinline__ void glu_quant_one(int act, const float *g, const float *u, size_t i, size_t gb, float *out,
                                              const mfc_q8 &qo, int kbt, bool g8, float (*sh)[8]) {
    const float v = glu_act(act, g[i], u[i]);
    out[i] = v;
    float a = warp_amax(v);
    if (g8) a = group8_max(a, sh, 0, 1);
    quant_block32_a(v, a, gb, qo.q, qo.d, qo.s, kbt);
}

/* One head of hd values at v (hd <= 2 x the block's threads): its
 * QK-norm where g has one (sums as nt threads take them), RoPE, written
 * back, and stored as K at element k0 of the cache kc when kc is given;
 * pr: head_pre_load's values for the head's group and row. hv: shared
 * memory of the head's width. rope_store_k and norm_rope_k, per head. */
__device__ __forceinline__ void rope_head_store(const mfc_rope_grp &g, const head_pre &pr, float *v, int hd, int nt,
                                                const mfc_rope &p, void *kc, size_t k0, int kvt, float *sh,
                                                float *hv) {
    __syncthreads(); /* hv may still be read by a previous head */
    float mean = 0.0f, scale = 1.0f;
    if (g.norm) norm_stats_v(false, v, hd, nt, g.eps, sh, mean, scale);
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i < hd) hv[i] = g.norm ? norm_elem_v(v[i], mean, scale, pr.w[j], -0.0f) : v[i];
    }
    __syncthreads();
    const int half = p.n_rot / 2;
#pragma unroll
    for (int j = 0; j < 2; j++) {
        const int ip = threadIdx.x + j * blockDim.x;
        if (ip < half) rope_rot(hv, ip, half, p.neox, pr.c[j], pr.s[j]);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < hd; i += blockDim.x) {
        const float x = hv[i];
        v[i] = x;
        if (kc) st_cache(kc, k0 + i, x, kvt);
    }
}

#endif
