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
    T_Q2_K = 10, T_Q3_K = 11, T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14, T_IQ4_NL = 20, T_IQ4_XS = 23, T_BF16 = 30,
    T_Q8_0R = 200, /* MFC_T_Q8_0R (kernels.h): Q8_0 regrouped, runs of 8 scales then 8 x 32 levels */
    T_Q6_KP = 201  /* MFC_T_Q6_KP (kernels.h): Q6_K, every odd super-block's parts reversed */
};

/* the parts of Q6_K super-block sb, which starts at b (= row + 210 sb in
 * both layouts): low bits (128 bytes), high bits (64), scales (16), d */
struct q6_at {
    const uint8_t *ql, *qh, *sc, *d;
};
template <int T> __device__ __forceinline__ q6_at q6_parts(const uint8_t *b, int sb) {
    if (T == T_Q6_KP && (sb & 1)) return q6_at{b + 82, b + 18, b + 2, b};
    return q6_at{b, b + 128, b + 192, b + 208};
}

__device__ __forceinline__ float ld_h(const uint8_t *p) { return __half2float(*(const __half *)p); }

/* (float)x for |x| < 2^22, exactly, in two full-rate instructions: x added
 * to the bits of 1.5 * 2^23 (whose unit in the last place is 1) gives the
 * float 1.5 * 2^23 + x, and the subtraction is exact. A conversion
 * instruction runs at an eighth of the float rate on sm_80/90, and the dp4a
 * products convert several sums and scales per 32 weights. */
__device__ __forceinline__ float i2f_exact(int x) { return __int_as_float(0x4B400000 + x) - 12582912.0f; }

/* each byte b of x (0 <= b < 2C, C <= 64) as the int8 b - C: b + 128 - C
 * stays below 256 (no carry into the next byte), and flipping bit 7 takes
 * 128 off (mod 256). The same bytes as __vsubss4(x, C * 0x01010101) (no
 * result saturates), which sm_80/90 build from about ten instructions. */
template <int C> __device__ __forceinline__ uint32_t bsub4(uint32_t x) {
    static_assert(C > 0 && C <= 64, "bytes below 2C <= 128");
    return (x + (uint32_t)(128 - C) * 0x01010101u) ^ 0x80808080u;
}

__device__ __forceinline__ uint32_t ld_u32_2(const uint8_t *p) { /* 2-byte aligned */
    const uint16_t *h = (const uint16_t *)p;
    return (uint32_t)h[0] | (uint32_t)h[1] << 16;
}

/* The 16 levels of IQ4_NL / IQ4_XS (quant/qsearch.c's mf_iq4nl_values) as
 * int8 bytes, four to a word: a byte permute looks them up in registers,
 * where a table in memory would serialize lanes reading different entries. */
#define IQ4_T0 0xBFAD9881u /* -127 -104  -83  -65 */
#define IQ4_T1 0xF6EADDCFu /*  -49  -35  -22  -10 */
#define IQ4_T2 0x26190D01u /*    1   13   25   38 */
#define IQ4_T3 0x71594535u /*   53   69   89  113 */

/* level of one 4-bit index n (0..15) */
__device__ __forceinline__ int iq4_level(int n) {
    const uint32_t b = __byte_perm(n < 8 ? IQ4_T0 : IQ4_T2, n < 8 ? IQ4_T1 : IQ4_T3, (uint32_t)n & 7);
    return (int)(int8_t)(b & 0xFF);
}

/* four indices, one per byte of q (each 0..15), to their four int8 levels
 * (for dp4a): selectors of 3 bits into each half of the table, then each
 * byte taken from the half its index's bit 3 names */
__device__ __forceinline__ uint32_t iq4_levels4(uint32_t q) {
    const uint32_t t = q | (q >> 4); /* index i at bits 4i..4i+3 of the low 16 bits, after the mask below */
    const uint32_t sel = ((t & 0xFFu) | ((t >> 8) & 0xFF00u)) & 0x7777u;
    const uint32_t lo = __byte_perm(IQ4_T0, IQ4_T1, sel), hi = __byte_perm(IQ4_T2, IQ4_T3, sel);
    const uint32_t hm = ((q >> 3) & 0x01010101u) * 0xFFu;
    return (lo & ~hm) | (hi & hm);
}

/* Q3_K's 6-bit scale j (0..15) from its 12 packed bytes, as stored (+32) */
__device__ __forceinline__ int q3k_scale(const uint8_t *sc, int j) {
    const int low = j < 8 ? sc[j] & 15 : sc[j - 8] >> 4;
    return low | ((sc[8 + (j & 3)] >> (2 * (j >> 2))) & 3) << 4;
}

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

/* Q4_K's scales (mn false) or minimums (mn true) of sub-blocks 4h..4h+3,
 * one 6-bit value a byte, from a super-block's first 16 bytes in hd (d and
 * dmin, then k4_scale_min's 12 packed bytes): the same integers as
 * k4_scale_min, in word operations where a runtime sub-block index picks
 * bytes by a select chain per value */
__device__ __forceinline__ uint32_t k4_pack(const uint4 &hd, int h, bool mn) {
    const uint32_t lo = mn ? hd.z : hd.y;
    if (h == 0) return lo & 0x3f3f3f3fu;
    return ((mn ? hd.w >> 4 : hd.w) & 0x0f0f0f0fu) | ((lo >> 2) & 0x30303030u);
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
    } else if constexpr (T == T_Q8_0 || T == T_Q8_0R) {
        /* the file's 34-byte blocks, or runs of 8 scales then 8 x 32 levels */
        const int b = e0 / 32;
        const uint8_t *run = row + (size_t)(b / 8) * 272;
        const uint8_t *sc = T == T_Q8_0 ? row + (size_t)b * 34 : run + 2 * (b % 8);
        const uint8_t *lv = T == T_Q8_0 ? sc + 2 : run + 16 + 32 * (b % 8);
        const float d = ld_h(sc);
        const int8_t *qs = (const int8_t *)(lv + e0 % 32);
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
    } else if constexpr (T == T_Q6_K || T == T_Q6_KP) {
        const q6_at b = q6_parts<T>(row + (size_t)(e0 / 256) * 210, e0 / 256);
        const int e = e0 % 256, h = e / 128, r = e % 128, l = r % 32, quarter = r / 32;
        const float d = ld_h(b.d);
        const float ds = d * (float)(int8_t)b.sc[e / 16];
        const uint8_t *ql = b.ql + 64 * h + l + 32 * (quarter & 1), *qh = b.qh + 32 * h + l;
        const int sl = 4 * (quarter >> 1), shh = 2 * quarter;
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int q = (((ql[i] >> sl) & 15) | ((qh[i] >> shh) & 3) << 4) - 32;
            v[i] = ds * (float)q;
        }
    } else if constexpr (T == T_Q2_K) {
        /* 84-byte blocks: scales (low nibble scale, high min) of 16
         * sub-blocks of 16, 2-bit levels (byte l of half h's 32 holds
         * elements 128h + l + 32s at bits 2s), d, dmin */
        const uint8_t *b = row + (size_t)(e0 / 256) * 84;
        const int e = e0 % 256, sc = b[e / 16];
        const float dl = ld_h(b + 80) * (float)(sc & 15), ml = ld_h(b + 82) * (float)(sc >> 4);
        const uint8_t *qs = b + 16 + (e / 128) * 32 + e % 32;
        const int sh = 2 * ((e % 128) / 32);
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = dl * (float)((qs[i] >> sh) & 3) - ml;
    } else if constexpr (T == T_Q3_K) {
        /* 110-byte blocks: the third bit of element e in bit e / 32 of
         * hmask[e % 32] (clear: level - 4), the low two as Q2_K's, 16
         * six-bit scales + 32, d */
        const uint8_t *b = row + (size_t)(e0 / 256) * 110;
        const int e = e0 % 256;
        const float dl = ld_h(b + 108) * (float)(q3k_scale(b + 96, e / 16) - 32);
        const uint8_t *qs = b + 32 + (e / 128) * 32 + e % 32, *hm = b + e % 32;
        const int sh = 2 * ((e % 128) / 32), hb = e / 32;
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = dl * (float)(((qs[i] >> sh) & 3) - ((hm[i] >> hb) & 1 ? 0 : 4));
    } else if constexpr (T == T_IQ4_NL) {
        const uint8_t *b = row + (size_t)(e0 / 32) * 18;
        const int s = e0 % 32;
        const float d = ld_h(b);
        const uint8_t *qs = b + 2 + (s & 15);
        const int sh = s >= 16 ? 4 : 0;
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = d * (float)iq4_level((qs[i] >> sh) & 15);
    } else if constexpr (T == T_IQ4_XS) {
        /* 136-byte blocks: d, the scales' top 2 bits (16 bits), their low 4
         * (4 bytes), then per sub-block of 32 16 bytes of indices as IQ4_NL */
        const uint8_t *b = row + (size_t)(e0 / 256) * 136;
        const int e = e0 % 256, ib = e / 32, s = e % 32;
        const int ls = ((b[4 + ib / 2] >> (4 * (ib & 1))) & 15) | ((*(const uint16_t *)(b + 2) >> (2 * ib)) & 3) << 4;
        const float dl = ld_h(b) * (float)(ls - 32);
        const uint8_t *qs = b + 8 + 16 * ib + (s & 15);
        const int sh = s >= 16 ? 4 : 0;
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = dl * (float)iq4_level((qs[i] >> sh) & 15);
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
