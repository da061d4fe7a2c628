/* mmq.cuh - pieces shared by the int8 tensor-core products (k_mmq.cu for
 * up to 64 rows, k_mmq_tile.cu for prompts): the mma, unaligned loads of
 * weight bytes, Q4_K's packed scales, and a launch's product segments. */
#ifndef MF_CUDA_MMQ_CUH
#define MF_CUDA_MMQ_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "cuda/cpasync.cuh"
#include "cuda/dequant.cuh"
#include "cuda/kernels.h"

__device__ __forceinline__ void mma_k32(int *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t ld32_2(const uint8_t *p) { /* 2-byte aligned */
    const uint16_t *h = (const uint16_t *)p;
    return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}

/* 8 bytes at p, 2-byte aligned, as two words: aligned word loads and a
 * funnel shift (never past p + 10, which stays inside the row: see wload) */
__device__ __forceinline__ uint2 ld64_2(const uint8_t *p) {
    const uint32_t *w = (const uint32_t *)((uintptr_t)p & ~(uintptr_t)3);
    if (((uintptr_t)p & 3) == 0) return make_uint2(w[0], w[1]);
    const uint32_t a = w[0], b = w[1], c = w[2];
    return make_uint2(__funnelshift_r(a, b, 16), __funnelshift_r(b, c, 16));
}

/* Q6_K's parts: 8 and 4 bytes, 2-byte aligned in the file's layout, on
 * 4 bytes in the device's (MFC_T_Q6_KP) */
template <int T> __device__ __forceinline__ uint2 ld64_q6(const uint8_t *p) {
    if (T == T_Q6_KP) return make_uint2(((const uint32_t *)p)[0], ((const uint32_t *)p)[1]);
    return ld64_2(p);
}
template <int T> __device__ __forceinline__ uint32_t ld32_q6(const uint8_t *p) {
    if (T == T_Q6_KP) return *(const uint32_t *)p;
    return ld32_2(p);
}

/* Q4_K's scale and min of sub-block j (6 bits each, 12 packed bytes) times
 * d and dmin: the byte of k4_pack's word (the same integers as picking the
 * bytes one by one, in a few word operations where a runtime j took a
 * select chain per byte) */
__device__ __forceinline__ void k4_sm(const uint4 &hd, int j, float &dw, float &mw) {
    const __half2 dm = *(const __half2 *)&hd.x;
    const int sh = 8 * (j & 3);
    const int sc = (int)((k4_pack(hd, j >> 2, false) >> sh) & 0xFF), mn = (int)((k4_pack(hd, j >> 2, true) >> sh) & 0xFF);
    dw = __low2float(dm) * (float)sc;
    mw = __high2float(dm) * (float)mn;
}

/* f * (float)(byte i of w) in two instructions: the byte under 2^23's
 * exponent is the float 2^23 + byte, and the multiply-add takes f2 = -f *
 * 2^23 (exact) off before its one rounding, so the value is the product's
 * (a zero product of a negative f comes out +0 rather than -0) */
__device__ __forceinline__ float k4_mul(uint32_t w, int i, float f, float f2) {
    return fmaf(f, __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7650u | (unsigned)i)), f2);
}

struct mq_segs {
    mfc_mm_seg seg[MFC_MAX_SEGS];
    int blk0[MFC_MAX_SEGS + 1]; /* first weight block of each segment */
    int nseg;
};

#endif
