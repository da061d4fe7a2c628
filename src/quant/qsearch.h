/* qsearch.h - shared pieces of the reference quantizers: llama.cpp-compatible
 * rounding, the per-group scale searches of the K-quants, the packed 6-bit
 * scale layouts, and the IQ4 value table.
 *
 * Every function here reproduces the float arithmetic of ggml's reference
 * quantizers operation by operation (the project builds with
 * -ffp-contract=off), because the bytes of a quantized file depend on each
 * rounding. Do not "simplify" an expression without re-running the
 * byte-identity test against llama-quantize's outputs. */
#ifndef MF_QUANT_QSEARCH_H
#define MF_QUANT_QSEARCH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* Round to nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 moves the
 * integer part into the low mantissa bits, where the FPU's own rounding does
 * the work. This (not roundf, whose ties go away from zero) is what the
 * K-quants and IQ4 use; outside the range the result is garbage but the same
 * garbage llama.cpp computes. */
static inline int mf_nearest_int(float v) {
    float t = v + 12582912.0f;
    int32_t bits;
    memcpy(&bits, &t, sizeof bits);
    return (bits & 0x007fffff) - 0x00400000;
}

/* Float to int by truncation with x86's answer (INT32_MIN, "integer
 * indefinite") for NaN and out-of-range values, where a C cast is undefined.
 * The legacy quantizers cast floats to small ints; for finite, in-range inputs
 * this is the plain cast, and for hostile rows (NaN, inf, extreme subnormal
 * scales) it gives the bytes llama.cpp's x86 build writes, without UB. */
static inline int32_t mf_trunc_i32(float v) {
    if (v >= -2147483648.0f && v < 2147483648.0f) return (int32_t)v;
    return INT32_MIN;
}

/* The same as the low byte a cast to int8_t / uint8_t keeps. */
static inline int mf_trunc_i8(float v) { return (int8_t)(uint8_t)((uint32_t)mf_trunc_i32(v) & 0xff); }
static inline int mf_trunc_u8(float v) { return (uint8_t)((uint32_t)mf_trunc_i32(v) & 0xff); }

/* Groups whose largest |x| is below this are treated as all zero. */
#define MF_GROUP_MAX_EPS 1e-15f

/* Symmetric n-level fit of x[0..n) with levels -nmax..nmax-1, weighting each
 * element by weights[i] (x[i]^2 when weights is NULL). Tries the scale that
 * maps the largest-magnitude element to -nmax and 18 nearby ones, keeps the
 * least-squares best. Writes L[i] = level + nmax, returns the scale. (Q6_K) */
float mf_make_qx_quants(int n, int nmax, const float *x, int8_t *L, const float *weights);

/* Symmetric fit for Q3_K: start from the max-magnitude scale, then up to five
 * passes that move single elements to a better level while the weighted
 * (x^2) least-squares error drops. L[i] = level + nmax; returns the scale. */
float mf_make_q3_quants(int n, int nmax, const float *x, int8_t *L);

/* Asymmetric fit x ~ scale * L + min with L in 0..nmax, min <= 0: grid search
 * of nstep+1 candidate scales (rmin + rdelta*is extra levels), each refined by
 * weighted least squares, scored by weighted squared (or absolute, use_mad)
 * error. Returns the scale; *neg_min receives -min (>= 0). Laux is scratch of n. */
float mf_make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *neg_min,
                          uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad);

/* Q4_K / Q5_K pack 8 six-bit scales and 8 six-bit mins into 12 bytes:
 * sub-blocks 0..3 keep their 6 bits in bytes j (scale) and j+4 (min); sub-blocks
 * 4..7 keep the low 4 bits in byte j+4 (scale low nibble, min high nibble) and
 * their top 2 bits in the spare top bits of bytes j-4 (scale) and j (min). */
static inline void mf_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *mn) {
    if (j < 4) {
        *sc = q[j] & 63;
        *mn = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4));
        *mn = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q3_K: the 16 six-bit scales, unpacked to 0..63 (the stored value is scale + 32). */
static inline void mf_q3k_scales(const uint8_t *packed, int out[16]) {
    for (int j = 0; j < 16; j++) {
        int low = j < 8 ? (packed[j] & 0x0f) : (packed[j - 8] >> 4);
        int high = (packed[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
        out[j] = low | (high << 4);
    }
}

/* The 16 levels of IQ4_NL / IQ4_XS, ascending (a non-uniform grid fitted to
 * the bell shape of trained weights). */
extern const int8_t mf_iq4nl_values[16];

/* Index of the table entry nearest to v (ties to the lower entry), by
 * bisection over the ascending values. */
static inline int mf_iq4_nearest(const int8_t *vals, float v) {
    if (v <= vals[0]) return 0;
    if (v >= vals[15]) return 15;
    int lo = 0, hi = 15; /* invariant: vals[lo] <= v < vals[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (v < vals[mid]) hi = mid;
        else lo = mid;
    }
    return v - vals[hi - 1] < vals[hi] - v ? hi - 1 : hi;
}

#endif
