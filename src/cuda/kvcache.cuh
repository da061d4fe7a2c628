/* kvcache.cuh - reading and writing one element of a KV cache row in its
 * type: f32, f16, or q8_0 (rows of MFC_Q8_BLOCK-byte blocks of 32: an f16
 * scale and 32 int8 levels). Shared by the attention kernels and the fused
 * RoPE + store. */
#ifndef MF_CUDA_KVCACHE_CUH
#define MF_CUDA_KVCACHE_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda/cpasync.cuh"
#include "cuda/kernels.h"

/* q8_0: element i of a cache whose rows are whole blocks */
__device__ __forceinline__ const uint8_t *q8_block(const void *c, size_t i) {
    return (const uint8_t *)c + (i >> 5) * MFC_Q8_BLOCK;
}
__device__ __forceinline__ float q8_scale(const uint8_t *b) { return __half2float(*(const __half *)b); }

__device__ __forceinline__ float ld_cache(const void *c, size_t i, int kvt) {
    if (kvt == MFC_KV_Q8) {
        const uint8_t *b = q8_block(c, i);
        return q8_scale(b) * (float)(int8_t)b[2 + (i & 31)];
    }
    return kvt == MFC_KV_F16 ? __half2float(((const __half *)c)[i]) : ((const float *)c)[i];
}

/* n (1, 2, 4 or 8) consecutive q8_0 elements from element i (aligned to
 * n): pairs of levels in 2-byte loads (a block's levels start 2 bytes in,
 * so even elements are 2-byte aligned) */
__device__ __forceinline__ void ld_q8(const void *c, size_t i, int n, float *o) {
    const uint8_t *b = q8_block(c, i);
    const float d = q8_scale(b);
    const uint8_t *q = b + 2 + (i & 31);
    if (n == 1) {
        o[0] = d * (float)(int8_t)q[0];
        return;
    }
    const uint16_t *h = (const uint16_t *)q;
    for (int j = 0; j < n / 2; j++) {
        const uint16_t u = h[j];
        o[2 * j] = d * (float)(int8_t)(u & 0xff);
        o[2 * j + 1] = d * (float)(int8_t)(u >> 8);
    }
}

/* Store x, element i of a q8_0 cache, where the 32 lanes of the warp hold
 * the 32 elements of its block: the block's |max| over the lanes, then the
 * CPU quantizer's steps (amax / 127, its reciprocal, roundf of x times it) */
__device__ __forceinline__ void st_q8(void *c, size_t i, float x) {
    float a = fabsf(x);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, o));
    const float d = a / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t *b = (uint8_t *)c + (i >> 5) * MFC_Q8_BLOCK;
    if ((i & 31) == 0) *(__half *)b = __float2half_rn(d);
    b[2 + (i & 31)] = (uint8_t)(int8_t)roundf(x * id);
}

__device__ __forceinline__ void st_cache(void *c, size_t i, float x, int kvt) {
    if (kvt == MFC_KV_Q8) st_q8(c, i, x);
    else if (kvt == MFC_KV_F16) ((__half *)c)[i] = __float2half_rn(x);
    else ((float *)c)[i] = x;
}

/* The decode attention kernels' tile copies (attn_tile_k, attn_mma_k): the
 * K and V rows of keys t0 .. t0 + nt - 1 of one KV head (kh, vh: the
 * caches offset to the head) into kd, vd by cp.async, 16 bytes a copy,
 * keys key0, key0 + KPP, ... of NK with this thread's piece of each row.
 * Lane j of the warp looks up key j's cell (NK <= 32), one division a lane
 * where each copy took one, and the copies take it by shuffle: every lane
 * of the warp must call this. sel 0: every key; 1: the keys below pos only
 * (copies before the wait, the tile left open); 2: the key at pos only.
 * With ZERO, rows past nt are zero-filled (unless sel is 1): for kernels
 * that multiply them by zero probabilities, where a stale NaN would show. */
template <int NK, int KPP, int RS, bool ZERO>
__device__ __forceinline__ void copy_key_rows(__half (*kd)[RS], __half (*vd)[RS], const __half *kh, const __half *vh,
                                              const int32_t *pages, const mfc_attn &p, int t0, int nt, int pos,
                                              int sel, int lane, int key0, int piece) {
    const int tl = t0 + lane, cl = lane < nt ? pages[tl / p.page_size] * p.page_size + tl % p.page_size : 0;
#pragma unroll
    for (int i = 0; i < NK / KPP; i++) {
        const int j = key0 + i * KPP, t = t0 + j;
        const size_t cell = (size_t)__shfl_sync(0xffffffffu, cl, j);
        if (j < nt) {
            if (sel == 0 || (sel == 1) == (t < pos)) {
                cp16(&kd[j][piece * 8], kh + cell * p.k_width + piece * 8, true);
                cp16(&vd[j][piece * 8], vh + cell * p.v_width + piece * 8, true);
            }
        } else if (ZERO && sel != 1) {
            cp16(&kd[j][piece * 8], kh, false);
            cp16(&vd[j][piece * 8], vh, false);
        }
    }
}

#endif
