/* dequant.cuh - weights in the file's encoding, decoded on the fly: dq8<T>
 * gives 8 consecutive elements e0..e0+7 (e0 a multiple of 8) of one row as
 * floats. Every matrix kernel and the embedding lookup read weights through
 * it, so each type's layout is written down once. The layouts are GGUF's
 * (src/quant/blocks.h); the arithmetic is the reference's (src/quant/ref_*.c),
 * the same products in the same order, except that nvcc may fuse a multiply
 * and an add into one FMA (a last-bit difference; test_cuda_kernels). */
#ifndef MF_CUDA_DEQUANT_CUH
#define MF_CUDA_DEQUANT_CUH

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

/* type ids as in src/quant/types.h (the .cu files do not include C headers) */
enum {
    T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8,
    T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14, T_BF16 = 30
};

__device__ __forceinline__ float ld_h(const uint8_t *p) { return __half2float(*(const __half *)p); }

/* 4-bit min/scale pair j of a Q4_K/Q5_K super-block (12 packed bytes) */
__device__ __forceinline__ void k4_scale_min(int j, const uint8_t *q, int &sc, int &mn) {
    if (j < 4) {
        sc = q[j] & 63;
        mn = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

template <int T> __device__ __forceinline__ void dq8(const uint8_t *__restrict__ row, int e0, float *v) {
    if constexpr (T == T_F32) {
        const float4 *p = (const float4 *)(row + (size_t)e0 * 4);
        const float4 a = p[0], b = p[1];
        v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    } else if constexpr (T == T_F16) {
        const uint4 u = *(const uint4 *)(row + (size_t)e0 * 2);
        const __half2 *h = (const __half2 *)&u;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float2 f = __half22float2(h[i]);
            v[2 * i] = f.x, v[2 * i + 1] = f.y;
        }
    } else if constexpr (T == T_BF16) {
        const uint4 u = *(const uint4 *)(row + (size_t)e0 * 2);
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
            v[2 * i] = __uint_as_float(w[i] << 16);
            v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    } else if constexpr (T == T_Q4_0 || T == T_Q4_1) {
        constexpr int BS = T == T_Q4_0 ? 18 : 20;
        const uint8_t *b = row + (size_t)(e0 / 32) * BS;
        const int s = e0 % 32;
        const float d = ld_h(b);
        const uint8_t *qs = b + (T == T_Q4_0 ? 2 : 4) + (s & 15);
        const int sh = s >= 16 ? 4 : 0;
        if constexpr (T == T_Q4_0) {
#pragma unroll
            for (int i = 0; i < 8; i++) v[i] = (float)(((qs[i] >> sh) & 15) - 8) * d;
        } else {
            const float m = ld_h(b + 2);
#pragma unroll
            for (int i = 0; i < 8; i++) v[i] = (float)((qs[i] >> sh) & 15) * d + m;
        }
    } else if constexpr (T == T_Q5_0 || T == T_Q5_1) {
        constexpr int BS = T == T_Q5_0 ? 22 : 24, QH = T == T_Q5_0 ? 2 : 4;
        const uint8_t *b = row + (size_t)(e0 / 32) * BS;
        const int s = e0 % 32;
        const float d = ld_h(b);
        const uint32_t qh = (uint32_t)b[QH] | (uint32_t)b[QH + 1] << 8 | (uint32_t)b[QH + 2] << 16 | (uint32_t)b[QH + 3] << 24;
        const uint8_t *qs = b + QH + 4 + (s & 15);
        const int sh = s >= 16 ? 4 : 0;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int q = ((qs[i] >> sh) & 15) | (int)((qh >> (s + i)) & 1) << 4;
            if constexpr (T == T_Q5_0) v[i] = (float)(q - 16) * d;
            else v[i] = (float)q * d + ld_h(b + 2);
        }
    } else if constexpr (T == T_Q8_0) {
        const uint8_t *b = row + (size_t)(e0 / 32) * 34;
        const float d = ld_h(b);
        const int8_t *qs = (const int8_t *)(b + 2 + e0 % 32);
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = (float)qs[i] * d;
    } else if constexpr (T == T_Q4_K || T == T_Q5_K) {
        constexpr int BS = T == T_Q4_K ? 144 : 176, QS = T == T_Q4_K ? 16 : 48;
        const uint8_t *b = row + (size_t)(e0 / 256) * BS;
        const int e = e0 % 256, j = e / 32;
        int sc, mn;
        k4_scale_min(j, b + 4, sc, mn);
        const float dl = ld_h(b) * (float)sc, ml = ld_h(b + 2) * (float)mn;
        const uint8_t *qs = b + QS + (e / 64) * 32 + e % 32;
        const int sh = 4 * (j & 1);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int q = (qs[i] >> sh) & 15;
            if constexpr (T == T_Q5_K) q |= ((b[16 + e % 32 + i] >> j) & 1) << 4;
            v[i] = dl * (float)q - ml;
        }
    } else if constexpr (T == T_Q6_K) {
        const uint8_t *b = row + (size_t)(e0 / 256) * 210;
        const int e = e0 % 256, h = e / 128, r = e % 128, l = r % 32, quarter = r / 32;
        const float d = ld_h(b + 208);
        const float ds = d * (float)(int8_t)b[192 + e / 16];
        const uint8_t *ql = b + 64 * h + l + 32 * (quarter & 1), *qh = b + 128 + 32 * h + l;
        const int sl = 4 * (quarter >> 1), shh = 2 * quarter;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int q = (((ql[i] >> sl) & 15) | ((qh[i] >> shh) & 3) << 4) - 32;
            v[i] = ds * (float)q;
        }
    }
}

/* One element: float types only (their rows may have any length; quantized
 * rows are whole blocks, multiples of 32, and always take dq8). */
template <int T> __device__ __forceinline__ float dq1(const uint8_t *__restrict__ row, int e) {
    if constexpr (T == T_F32) return ((const float *)row)[e];
    else if constexpr (T == T_F16) return __half2float(((const __half *)row)[e]);
    else if constexpr (T == T_BF16) return __uint_as_float((uint32_t)((const uint16_t *)row)[e] << 16);
    else return 0.0f;
}

/* The reference computes d * sc * q for Q6_K as (d * sc) * q: ds above. */

#endif
