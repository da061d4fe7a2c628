/* rows.cuh - device helpers that more than one kernel file computes the same
 * way, so that a fused kernel gives the bits of the separate ones: the norm's
 * block reduction and scale, the gated activations, and the rounding of 32
 * activations to one int8 block (k_mmvq.cu's layout). */
#ifndef MF_CUDA_ROWS_CUH
#define MF_CUDA_ROWS_CUH

#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

__device__ __forceinline__ float block_sum(float v, float *sh) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads(); /* sh may still be read by a previous call */
    if (l == 0) sh[w] = v;
    __syncthreads();
    float t = l < nw ? sh[l] : 0.0f;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
    return t;
}

/* threads per block of a norm over rows of n (the reduction order depends
 * on it: every kernel that norms a row uses this count) */
static inline int norm_threads(int n) { return n >= 1024 ? 1024 : n >= 256 ? 256 : n >= 128 ? 128 : 64; }

/* mean (LayerNorm; else 0) and 1/sqrt(var + eps) of the row xr[0..n), by
 * the whole block */
__device__ __forceinline__ void norm_stats(bool layer, const float *xr, int n, float eps, float *sh, float &mean,
                                           float &scale) {
    mean = 0.0f;
    if (layer) {
        float s = 0.0f;
        for (int i = threadIdx.x; i < n; i += blockDim.x) s += xr[i];
        mean = block_sum(s, sh) / (float)n;
    }
    float s2 = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float d = xr[i] - mean;
        s2 += d * d;
    }
    scale = 1.0f / sqrtf(block_sum(s2, sh) / (float)n + eps);
}

__device__ __forceinline__ float norm_elem(float x, float mean, float scale, const float *w, const float *b, int i) {
    float y = (x - mean) * scale;
    if (w) y *= w[i];
    if (b) y += b[i];
    return y;
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

/* The warp's 32 values v (one per lane, block gb of the activations) to
 * int8: scale amax/127, round to nearest, and the scaled sum of the levels.
 * kbt: 0 for the row-major layout, else the blocks per row of the tiled
 * layout (kernels.h, mfc_q8_tiled_kb), where the pair (d, d * sum) goes to
 * xd and xs is not used. */
__device__ __forceinline__ void quant_block32(float v, size_t gb, int8_t *xq, float *xd, float *xs, int kbt) {
    const int lane = threadIdx.x & 31;
    float a = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    const float d = a / 127.0f;
    const int q = d > 0.0f ? __float2int_rn(v / d) : 0;
    int s = q;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (kbt) {
        const size_t r = gb / (size_t)kbt, unit = (r >> 4) * (size_t)kbt + gb % (size_t)kbt;
        const int rr = (int)(r & 15);
        /* lane 4 g + t of the fragment holds rows g and g + 8, levels 8t..8t+7 */
        xq[unit * 512 + (size_t)(4 * (rr & 7) + (lane >> 3)) * 16 + (rr >> 3) * 8 + (lane & 7)] = (int8_t)q;
        if (lane == 0) xd[(unit * 16 + rr) * 2] = d, xd[(unit * 16 + rr) * 2 + 1] = d * (float)s;
        return;
    }
    xq[gb * 32 + lane] = (int8_t)q;
    if (lane == 0) xd[gb] = d, xs[gb] = d * (float)s;
}

#endif
