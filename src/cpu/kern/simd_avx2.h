/* simd_avx2.h - small AVX2 helpers shared by the *_avx2.c and *_avx512.c
 * kernel files: lane folds in the order of quant/lanes.h, integer reductions,
 * and loads of the f16 scales that sit at a fixed stride in block arrays.
 * Include only from files compiled with -mavx2 -mfma -mf16c. */
#ifndef MF_CPU_SIMD_AVX2_H
#define MF_CPU_SIMD_AVX2_H

#include <immintrin.h>
#include <stdint.h>
#include <string.h>

/* Fold of 8 float lanes exactly as mf_lanes_fold(l, 8): high 128 onto low,
 * then lanes 2,3 onto 0,1, then lane 1 onto 0. */
static inline float mf_fold8_ps(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* Fold of 4 double lanes as mf_lanes_fold_d(l, 4). */
static inline double mf_fold4_pd(__m256d v) {
    __m128d x = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    x = _mm_add_sd(x, _mm_unpackhi_pd(x, x));
    return _mm_cvtsd_f64(x);
}

/* Sum of 8 int32 lanes (exact, order irrelevant). */
static inline int mf_hsum_i32_8(__m256i v) {
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(1, 0, 3, 2)));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(x);
}

/* Both sums at once: *sa = sum of a's lanes, *sb = sum of b's lanes. */
static inline void mf_hsum2_i32_8(__m256i a, __m256i b, int *sa, int *sb) {
    __m128i xa = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    __m128i xb = _mm_add_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
    __m128i x = _mm_hadd_epi32(xa, xb); /* a01 a23 b01 b23 */
    x = _mm_hadd_epi32(x, x);           /* a b a b */
    *sa = _mm_cvtsi128_si32(x);
    *sb = _mm_extract_epi32(x, 1);
}

/* v[k] holds 8 int32 partial sums of block k; returns the 8 block totals in
 * block order (exact). */
static inline __m256i mf_reduce8_i32(const __m256i v[8]) {
    const __m256i h0 = _mm256_hadd_epi32(v[0], v[1]), h1 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i h2 = _mm256_hadd_epi32(v[4], v[5]), h3 = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i g0 = _mm256_hadd_epi32(h0, h1); /* per 128-bit half: blocks 0..3 */
    const __m256i g1 = _mm256_hadd_epi32(h2, h3); /* blocks 4..7 */
    return _mm256_add_epi32(_mm256_permute2x128_si256(g0, g1, 0x20), _mm256_permute2x128_si256(g0, g1, 0x31));
}

static inline uint16_t mf_ld16(const void *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static inline uint32_t mf_ld32(const void *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The f16 at p, p + stride, ..., p + 7*stride as 8 floats (exact conversion).
 * Word inserts, not a dword gather: gathers measured slower on AMD Zen 5. */
static inline __m256 mf_load8_f16(const uint8_t *p, size_t stride) {
    const __m128i h = _mm_setr_epi16((short)mf_ld16(p), (short)mf_ld16(p + stride), (short)mf_ld16(p + 2 * stride),
                                     (short)mf_ld16(p + 3 * stride), (short)mf_ld16(p + 4 * stride),
                                     (short)mf_ld16(p + 5 * stride), (short)mf_ld16(p + 6 * stride),
                                     (short)mf_ld16(p + 7 * stride));
    return _mm256_cvtph_ps(h);
}

/* As mf_load8_f16 for the first m < 8 entries; the other lanes are +0. */
static inline __m256 mf_load8_f16_part(const uint8_t *p, size_t stride, int m) {
    uint16_t h[8] = {0};
    for (int k = 0; k < m; k++) h[k] = mf_ld16(p + (size_t)k * stride);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* Two adjacent f16 (d, then m or s) at p + k*stride for k < 8: *d and *m get
 * them as 8 floats each, in k order. */
static inline void mf_load8_f16x2(const uint8_t *p, size_t stride, __m256 *d, __m256 *m) {
    const __m256i w = _mm256_setr_epi32((int)mf_ld32(p), (int)mf_ld32(p + stride), (int)mf_ld32(p + 2 * stride),
                                        (int)mf_ld32(p + 3 * stride), (int)mf_ld32(p + 4 * stride),
                                        (int)mf_ld32(p + 5 * stride), (int)mf_ld32(p + 6 * stride),
                                        (int)mf_ld32(p + 7 * stride));
    const __m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(w));      /* d0 m0 d1 m1 | d2 m2 d3 m3 */
    const __m256 hi = _mm256_cvtph_ps(_mm256_extracti128_si256(w, 1)); /* d4 m4 d5 m5 | d6 m6 d7 m7 */
    /* per 128 bits: d0 d1 d4 d5 | d2 d3 d6 d7; the 64-bit permute restores k order */
    *d = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0))),
                                                _MM_SHUFFLE(3, 1, 2, 0)));
    *m = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1))),
                                                _MM_SHUFFLE(3, 1, 2, 0)));
}

static inline void mf_load8_f16x2_part(const uint8_t *p, size_t stride, int m, __m256 *d, __m256 *mm) {
    uint16_t h[16] = {0};
    for (int k = 0; k < m; k++) memcpy(&h[2 * k], p + (size_t)k * stride, 4);
    mf_load8_f16x2((const uint8_t *)h, 4, d, mm);
}

/* 32 nibbles of a 16-byte block: byte j of the result is the low nibble of
 * qs[j] for j < 16 and the high nibble of qs[j - 16] after (the layout of
 * Q4_0, Q4_1, IQ4_NL and IQ4_XS sub-blocks). */
static inline __m256i mf_nibbles32(const uint8_t *qs) {
    /* a broadcast load and a per-half shift: no shuffle-port operation */
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    const __m256i v = _mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
}

/* The 32 bits of a Q5 qh word as 32 bytes: 0x10 where bit j is set, else 0. */
static inline __m256i mf_bits32_to_0x10(uint32_t bits) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                          3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)bits), shuf); /* byte j = byte j/8 of bits */
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* Sum of products of 32 signed bytes x and y in 8 int32 lanes, exact when y
 * has no -128 (x may: |x| is taken as unsigned). */
static inline __m256i mf_dot_i8_avx2(__m256i x, __m256i y) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(x), _mm256_sign_epi8(y, x));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

#endif
