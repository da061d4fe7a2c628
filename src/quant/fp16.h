/* fp16.h - IEEE half and bfloat16 conversions, bit-exact with round-to-nearest-even
 * (what F16C's vcvtps2ph and ggml's converters produce), written as integer code so
 * the result never depends on compiler flags or the FPU rounding mode. */
#ifndef MF_QUANT_FP16_H
#define MF_QUANT_FP16_H

#include <stdint.h>
#include <string.h>

typedef uint16_t mf_fp16;
typedef uint16_t mf_bf16;

static inline uint32_t mf_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float mf_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static inline float mf_fp16_to_fp32(mf_fp16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
    if (e == 0) {
        /* zero or subnormal: m * 2^-24, exact in float */
        float v = (float)m * 5.9604644775390625e-08f;
        return mf_bits_f32(mf_f32_bits(v) | sign);
    }
    if (e == 31) return mf_bits_f32(sign | 0x7f800000u | (m << 13));
    return mf_bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

static inline mf_fp16 mf_fp32_to_fp16(float f) {
    uint32_t x = mf_f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* inf stays inf; NaN becomes a quiet NaN keeping the top payload bits */
        return (mf_fp16)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax < 0x38800000u) { /* below the smallest normal half (2^-14): subnormal or zero */
        if (ax < 0x33000000u) return (mf_fp16)sign; /* <= 2^-25 rounds to zero */
        uint32_t e = ax >> 23;
        uint32_t m = (ax & 0x7fffff) | 0x800000;
        uint32_t s = 126 - e; /* value in units of 2^-24 is m >> s */
        uint32_t q = m >> s, rem = m & ((1u << s) - 1), half = 1u << (s - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (mf_fp16)(sign | q);
    }
    uint32_t h = (ax - 0x38000000u) >> 13; /* rebias exponent 127 -> 15 */
    uint32_t rem = ax & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++; /* carry may reach inf: correct */
    if (h > 0x7c00) h = 0x7c00;
    return (mf_fp16)(sign | h);
}

static inline float mf_bf16_to_fp32(mf_bf16 h) { return mf_bits_f32((uint32_t)h << 16); }

static inline mf_bf16 mf_fp32_to_bf16(float f) {
    uint32_t u = mf_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (mf_bf16)((u >> 16) | 64); /* quiet NaN */
    return (mf_bf16)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

#endif
