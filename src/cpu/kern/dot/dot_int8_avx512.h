/* dot_int8_avx512.h - the AVX-512 quantized dots, written once and compiled
 * twice: by dot_int8_avx512.c with MF_VNNI 0 (maddubs + madd, for AVX-512
 * CPUs without VNNI) and by dot_int8_vnni_avx512.c with MF_VNNI 1 (vpdpbusd /
 * vpdpwssd). Everything here is static; each includer registers its own copy.
 *
 * Float order: as the AVX2 kernels and quant/lanes.h. 32-element block types
 * take 8 blocks per step (two per 512-bit register), reduce each block's
 * int32 partials to its exact sum, evaluate the reference's per-block float
 * expression on 8 lanes and add that to one 8-lane accumulator. Super-block
 * types reduce each super-block to its exact int32 sums and evaluate the
 * reference's scalar expression.
 *
 * Integer exactness:
 * - unsigned levels times signed activations: vpdpbusd has no intermediate
 *   saturation; maddubs pair sums stay below 63 * 128 * 2.
 * - a level offset o (Q4_0's 8, Q5_0's 16) is subtracted as sum(o * a),
 *   computed by the same instruction, never by reinterpreting bytes.
 * - signed weights (Q8_0, Q8_1, Q8_K, IQ4 table values): with VNNI as
 *   (w + 128) * a - 128 * a, exact for every byte; without VNNI as
 *   |w| * sign(a, w), exact unless an activation byte is -128, which the
 *   quantizers never write.
 * - K-quant sub-block scales are applied in int16 x int16 -> int32 (madd or
 *   vpdpwssd); level offsets and mins go through bsums as in the references. */
#ifndef MF_VNNI
#error "define MF_VNNI (0 or 1) before including dot_int8_avx512.h"
#endif

#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/qsearch.h"

/* ---------------- integer primitives ---------------- */

static inline __m512i ones16(void) { return _mm512_set1_epi16(1); }

/* sum over groups of 4 bytes of u * s (u unsigned, s signed), 16 int32 lanes */
static inline __m512i dot_us(__m512i u, __m512i s) {
#if MF_VNNI
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), ones16());
#endif
}

/* sum of (u - off) * s for an unsigned offset byte vector off <= u's range */
static inline __m512i dot_us_off(__m512i u, __m512i s, __m512i off) {
#if MF_VNNI
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, s));
#else
    const __m512i p = _mm512_sub_epi16(_mm512_maddubs_epi16(u, s), _mm512_maddubs_epi16(off, s));
    return _mm512_madd_epi16(p, ones16());
#endif
}

/* sum of w * a for signed bytes w and a (see the header comment) */
static inline __m512i dot_ss(__m512i w, __m512i a) {
#if MF_VNNI
    const __m512i c128 = _mm512_set1_epi8((char)0x80);
    return dot_us_off(_mm512_xor_si512(w, c128), a, c128);
#else
    const __mmask64 neg = _mm512_movepi8_mask(w);
    const __m512i sa = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
    return dot_us(_mm512_abs_epi8(w), sa);
#endif
}

/* acc + madd(p, sc): int16 products summed in pairs into int32 */
static inline __m512i dpwssd(__m512i acc, __m512i p, __m512i sc) {
#if MF_VNNI
    return _mm512_dpwssd_epi32(acc, p, sc);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
#endif
}

/* maddubs of u (unsigned) and s (signed): 32 int16 pair sums (no saturation
 * for the level ranges used here) */
static inline __m512i pairs_us(__m512i u, __m512i s) { return _mm512_maddubs_epi16(u, s); }

static inline __m512i ld512(const void *p) { return _mm512_loadu_si512(p); }

/* two 32-byte pieces as one register: [a | b] */
static inline __m512i ld2x256(const void *a, const void *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

/* four zmm of [block 2k: 8 partials | block 2k+1: 8 partials] -> the 8 block
 * sums in block order (exact) */
static inline __m256i reduce8_pairs(const __m512i z[4]) {
    const __m512i u01 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]), _mm512_unpackhi_epi32(z[0], z[1]));
    const __m512i u23 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2], z[3]), _mm512_unpackhi_epi32(z[2], z[3]));
    /* per 128-bit granule g: the sums of granule g of z0, z1, z2, z3 */
    const __m512i q = _mm512_add_epi32(_mm512_unpacklo_epi64(u01, u23), _mm512_unpackhi_epi64(u01, u23));
    /* granule 0 + 1 = blocks 0, 2, 4, 6; granule 2 + 3 = blocks 1, 3, 5, 7 */
    const __m512i r = _mm512_add_epi32(q, _mm512_shuffle_i32x4(q, q, _MM_SHUFFLE(2, 3, 0, 1)));
    const __m256i v = _mm512_castsi512_si256(_mm512_shuffle_i32x4(r, r, _MM_SHUFFLE(2, 0, 2, 0)));
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline int hsum512(__m512i v) {
    return mf_hsum_i32_8(_mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}

/* ---------------- 32-element blocks: one pair of blocks ---------------- */

/* the 16 nibble bytes of blocks at a and b as [a lo | a hi | b lo | b hi] (32 levels each) */
static inline __m512i nibbles_pair(const uint8_t *a, const uint8_t *b) {
    /* broadcast loads (a into all granules, then b into granules 2, 3) and a
     * per-granule shift: no shuffle-port operation */
    __m512i v = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)a));
    v = _mm512_mask_broadcast_i32x4(v, (__mmask16)0xff00, _mm_loadu_si128((const __m128i *)b));
    v = _mm512_srlv_epi64(v, _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4));
    return _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
}

static inline __mmask64 qh_pair(const uint8_t *qa, const uint8_t *qb) {
    return _cvtu64_mask64((uint64_t)mf_ld32(qa) | (uint64_t)mf_ld32(qb) << 32);
}

static inline __m512i iq4_table512(int biased) {
    __m128i t = _mm_loadu_si128((const __m128i *)mf_iq4nl_values);
    if (biased) t = _mm_xor_si128(t, _mm_set1_epi8((char)0x80)); /* value + 128 as unsigned */
    return _mm512_broadcast_i32x4(t);
}

/* Pair functions: x, y point at block k; the second block (k + 1) is used
 * only when two is set, else zeros stand in for it. */
#define PAIR_Y(y, two) ((two) ? ld2x256((y)[0].qs, (y)[1].qs) : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(y)[0].qs)))

static inline __m512i pair_q4_0(const block_q4_0 *x, const block_q8_0 *y, int two) {
    const __m512i q = nibbles_pair(x[0].qs, two ? x[1].qs : x[0].qs);
    return dot_us_off(q, PAIR_Y(y, two), _mm512_set1_epi8(8));
}

static inline __m512i pair_q4_1(const block_q4_1 *x, const block_q8_1 *y, int two) {
    return dot_us(nibbles_pair(x[0].qs, two ? x[1].qs : x[0].qs), PAIR_Y(y, two));
}

static inline __m512i pair_q5_0(const block_q5_0 *x, const block_q8_0 *y, int two) {
    __m512i q = nibbles_pair(x[0].qs, two ? x[1].qs : x[0].qs);
    q = _mm512_mask_add_epi8(q, qh_pair(x[0].qh, two ? x[1].qh : x[0].qh), q, _mm512_set1_epi8(16));
    return dot_us_off(q, PAIR_Y(y, two), _mm512_set1_epi8(16));
}

static inline __m512i pair_q5_1(const block_q5_1 *x, const block_q8_1 *y, int two) {
    __m512i q = nibbles_pair(x[0].qs, two ? x[1].qs : x[0].qs);
    q = _mm512_mask_add_epi8(q, qh_pair(x[0].qh, two ? x[1].qh : x[0].qh), q, _mm512_set1_epi8(16));
    return dot_us(q, PAIR_Y(y, two));
}

static inline __m512i pair_q8_0(const block_q8_0 *x, const block_q8_0 *y, int two) {
    return dot_ss(PAIR_Y(x, two), PAIR_Y(y, two));
}

static inline __m512i pair_q8_1(const block_q8_1 *x, const block_q8_1 *y, int two) {
    return dot_ss(PAIR_Y(x, two), PAIR_Y(y, two));
}

static inline __m512i pair_iq4_nl(const block_iq4_nl *x, const block_q8_0 *y, int two) {
    const __m512i idx = nibbles_pair(x[0].qs, two ? x[1].qs : x[0].qs);
#if MF_VNNI
    return dot_us_off(_mm512_shuffle_epi8(iq4_table512(1), idx), PAIR_Y(y, two), _mm512_set1_epi8((char)0x80));
#else
    return dot_ss(_mm512_shuffle_epi8(iq4_table512(0), idx), PAIR_Y(y, two));
#endif
}

/* 8 blocks (m of them, the rest contribute zero sums): exact sums as floats */
#define DEFINE_SUMS8(NAME, PAIR, TX, TY)                                                          \
    static inline __attribute__((always_inline)) __m256 NAME(const TX *x, const TY *y, int m) { \
        __m512i z[4];                                                                            \
        _Pragma("GCC unroll 4") for (int k = 0; k < 4; k++) z[k] =                               \
            2 * k < m ? PAIR(x + 2 * k, y + 2 * k, 2 * k + 1 < m) : _mm512_setzero_si512();       \
        return _mm256_cvtepi32_ps(reduce8_pairs(z));                                             \
    }

DEFINE_SUMS8(sums_q4_0, pair_q4_0, block_q4_0, block_q8_0)
DEFINE_SUMS8(sums_q4_1, pair_q4_1, block_q4_1, block_q8_1)
DEFINE_SUMS8(sums_q5_0, pair_q5_0, block_q5_0, block_q8_0)
DEFINE_SUMS8(sums_q5_1, pair_q5_1, block_q5_1, block_q8_1)
DEFINE_SUMS8(sums_q8_0, pair_q8_0, block_q8_0, block_q8_0)
DEFINE_SUMS8(sums_q8_1, pair_q8_1, block_q8_1, block_q8_1)
DEFINE_SUMS8(sums_iq4_nl, pair_iq4_nl, block_iq4_nl, block_q8_0)

#define GROUP 8
#define LOAD_D(x, m)                                                        \
    ((m) == GROUP ? mf_load8_f16((const uint8_t *)&(x)->d, sizeof *(x))    \
                  : mf_load8_f16_part((const uint8_t *)&(x)->d, sizeof *(x), (m)))

#define DEFINE_DOT_D(NAME, SUMS, TX, TY, BLCK, VALUE)                          \
    static void NAME(int n, float *s, const void *vx, const void *vy) {       \
        const TX *x = vx;                                                     \
        const TY *y = vy;                                                     \
        const int nb = n / (BLCK);                                            \
        __m256 acc = _mm256_setzero_ps();                                     \
        int b = 0;                                                            \
        for (; b + GROUP <= nb; b += GROUP) {                                 \
            const __m256 sf = SUMS(x + b, y + b, GROUP);                      \
            const __m256 dx = LOAD_D(x + b, GROUP), dy = LOAD_D(y + b, GROUP); \
            acc = _mm256_add_ps(acc, VALUE(sf, dx, dy));                      \
        }                                                                     \
        if (b < nb) {                                                         \
            const int m = nb - b;                                             \
            const __m256 sf = SUMS(x + b, y + b, m);                          \
            const __m256 dx = LOAD_D(x + b, m), dy = LOAD_D(y + b, m);        \
            acc = _mm256_add_ps(acc, VALUE(sf, dx, dy));                      \
        }                                                                     \
        *s = mf_fold8_ps(acc);                                                \
    }

/* the references' per-block expressions (see dot_legacy_avx2.c) */
#define VAL_SUMI_DX_DY(sf, dx, dy) _mm256_mul_ps(_mm256_mul_ps(sf, dx), dy)
#define VAL_DXDY_SUMI(sf, dx, dy) _mm256_mul_ps(_mm256_mul_ps(dx, dy), sf)

DEFINE_DOT_D(dot_q4_0, sums_q4_0, block_q4_0, block_q8_0, QK4_0, VAL_SUMI_DX_DY)
DEFINE_DOT_D(dot_q5_0, sums_q5_0, block_q5_0, block_q8_0, QK5_0, VAL_DXDY_SUMI)
DEFINE_DOT_D(dot_q8_0, sums_q8_0, block_q8_0, block_q8_0, QK8_0, VAL_DXDY_SUMI)
DEFINE_DOT_D(dot_q8_1, sums_q8_1, block_q8_1, block_q8_1, QK8_1, VAL_DXDY_SUMI)
DEFINE_DOT_D(dot_iq4_nl, sums_iq4_nl, block_iq4_nl, block_q8_0, QK4_NL, VAL_DXDY_SUMI)

#define DEFINE_DOT_DM(NAME, SUMS, TX, BLCK)                                                                       \
    static void NAME(int n, float *s, const void *vx, const void *vy) {                                          \
        const TX *x = vx;                                                                                        \
        const block_q8_1 *y = vy;                                                                                \
        const int nb = n / (BLCK);                                                                               \
        __m256 acc = _mm256_setzero_ps();                                                                        \
        for (int b = 0; b < nb; b += GROUP) {                                                                    \
            const int m = nb - b < GROUP ? nb - b : GROUP;                                                       \
            __m256 sf, dx, mx, dy, sy;                                                                           \
            if (m == GROUP) {                                                                                    \
                sf = SUMS(x + b, y + b, GROUP);                                                                  \
                mf_load8_f16x2((const uint8_t *)&x[b].d, sizeof *x, &dx, &mx);                                   \
                mf_load8_f16x2((const uint8_t *)&y[b].d, sizeof *y, &dy, &sy);                                   \
            } else {                                                                                             \
                sf = SUMS(x + b, y + b, m);                                                                      \
                mf_load8_f16x2_part((const uint8_t *)&x[b].d, sizeof *x, m, &dx, &mx);                           \
                mf_load8_f16x2_part((const uint8_t *)&y[b].d, sizeof *y, m, &dy, &sy);                           \
            }                                                                                                    \
            acc = _mm256_add_ps(acc, _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(dx, dy), sf), _mm256_mul_ps(mx, sy))); \
        }                                                                                                        \
        *s = mf_fold8_ps(acc);                                                                                   \
    }

DEFINE_DOT_DM(dot_q4_1, sums_q4_1, block_q4_1, QK4_1)
DEFINE_DOT_DM(dot_q5_1, sums_q5_1, block_q5_1, QK5_1)

/* ---------------- super-blocks ---------------- */

static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

/* Scale vectors for 16-element groups: `half` holds 8 int16 scales in every
 * 128-bit granule; granule i of the result is scale (first + i) x 8. */
static inline __m512i group_scales(__m512i half, int first) {
    const char a = (char)(2 * first);
    const __m512i m = _mm512_set_epi8(a + 7, a + 6, a + 7, a + 6, a + 7, a + 6, a + 7, a + 6, a + 7, a + 6, a + 7, a + 6,
                                      a + 7, a + 6, a + 7, a + 6, a + 5, a + 4, a + 5, a + 4, a + 5, a + 4, a + 5, a + 4,
                                      a + 5, a + 4, a + 5, a + 4, a + 5, a + 4, a + 5, a + 4, a + 3, a + 2, a + 3, a + 2,
                                      a + 3, a + 2, a + 3, a + 2, a + 3, a + 2, a + 3, a + 2, a + 3, a + 2, a + 3, a + 2,
                                      a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a);
    return _mm512_shuffle_epi8(half, m);
}

/* Scale vectors for 32-element sub-blocks: [scale j x 16 | scale j + 1 x 16]. */
static inline __m512i sub_scales(__m512i half, int j) {
    const char a = (char)(2 * j), b = (char)(2 * j + 2);
    const __m512i m = _mm512_set_epi8(b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b,
                                      b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b,
                                      a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a,
                                      a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a);
    return _mm512_shuffle_epi8(half, m);
}

static inline __m512i bcast128(__m128i v) { return _mm512_broadcast_i32x4(v); }

/* 2-bit fields of 32 bytes q at shifts 2k and 2k + 2: [chunk k | chunk k + 1] */
static inline __m512i two_bit_pair(__m512i qq, int k) {
    const __m512i sh = _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * k)), _mm256_set1_epi16((short)(2 * k + 2)), 1);
    return _mm512_and_si512(_mm512_srlv_epi16(qq, sh), _mm512_set1_epi8(3));
}

static inline __m512i dup256(const void *p) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_inserti64x4(_mm512_castsi256_si512(v), v, 1);
}

static void dot_q2_k(int n, float *s, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[b].scales);
        const __m128i lo = _mm_and_si128(sc8, _mm_set1_epi8(15)), hi = _mm_and_si128(_mm_srli_epi16(sc8, 4), _mm_set1_epi8(15));
        const __m256i vmin = _mm256_madd_epi16(_mm256_cvtepu8_epi16(hi), _mm256_loadu_si256((const __m256i *)y[b].bsums));
        const __m256i sc16 = _mm256_cvtepu8_epi16(lo);
        __m512i acc = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m512i qq = dup256(x[b].qs + 32 * h);
            const __m512i half = bcast128(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            #pragma GCC unroll 8
            for (int k = 0; k < 4; k += 2) {
                const __m512i p = pairs_us(two_bit_pair(qq, k), ld512(y[b].qs + 128 * h + 32 * k));
                acc = dpwssd(acc, p, group_scales(half, 2 * k));
            }
        }
        int isum, summs;
        mf_hsum2_i32_8(_mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1)), vmin, &isum, &summs);
        const float dall = y[b].d * f16(x[b].d);
        const float dmin = y[b].d * f16(x[b].dmin);
        sum += dall * (float)isum - dmin * (float)summs;
    }
    *s = sum;
}

/* Q3_K scales minus 32 as 16 int8 (as mf_q3k_scales) */
static inline __m128i q3k_scales(const uint8_t p[12]) {
    uint64_t lo8;
    uint32_t hi4;
    memcpy(&lo8, p, 8);
    memcpy(&hi4, p + 8, 4);
    const uint64_t m2 = 0x03030303u;
    const uint64_t h01 = ((uint64_t)hi4 & m2) | (((uint64_t)(hi4 >> 2) & m2) << 32);
    const uint64_t h23 = ((uint64_t)(hi4 >> 4) & m2) | (((uint64_t)(hi4 >> 6) & m2) << 32);
    const uint64_t s0 = (lo8 & 0x0f0f0f0f0f0f0f0full) | h01 << 4;
    const uint64_t s1 = ((lo8 >> 4) & 0x0f0f0f0f0f0f0f0full) | h23 << 4;
    return _mm_sub_epi8(_mm_set_epi64x((long long)s1, (long long)s0), _mm_set1_epi8(32));
}

static void dot_q3_k(int n, float *s, const void *vx, const void *vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(q3k_scales(x[b].scales));
        const __m256i voff = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[b].bsums)), 2);
        const __m512i hm = dup256(x[b].hmask);
        __m512i acc = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m512i qq = dup256(x[b].qs + 32 * h);
            const __m512i half = bcast128(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            #pragma GCC unroll 8
            for (int k = 0; k < 4; k += 2) {
                /* third bit of chunk k (k + 1): bit 4h + k (+1) of hmask */
                const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (4 * h + k))),
                                                        _mm256_set1_epi8((char)(1 << (4 * h + k + 1))), 1);
                __m512i w = two_bit_pair(qq, k);
                w = _mm512_mask_add_epi8(w, _mm512_test_epi8_mask(hm, bits), w, _mm512_set1_epi8(4));
                const __m512i p = pairs_us(w, ld512(y[b].qs + 128 * h + 32 * k));
                acc = dpwssd(acc, p, group_scales(half, 2 * k));
            }
        }
        const __m256i a = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
        const int isum = mf_hsum_i32_8(_mm256_sub_epi32(a, voff));
        const float d = f16(x[b].d) * y[b].d;
        sum += d * (float)isum;
    }
    *s = sum;
}

/* Q4_K/Q5_K scale field: scales as 8 int16 (in every granule), mins as 16
 * int16 with each min twice (one per 16-element bsum) */
static inline void k4_scales(const uint8_t p[12], __m512i *sc_half, __m256i *mn_pairs) {
    uint32_t w[3];
    memcpy(w, p, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t sc_lo = w[0] & m6, mn_lo = w[1] & m6;
    const uint32_t sc_hi = (w[2] & m4) | ((w[0] >> 6) & m2) << 4;
    const uint32_t mn_hi = ((w[2] >> 4) & m4) | ((w[1] >> 6) & m2) << 4;
    const __m128i sc8 = _mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0);
    const __m128i mn8 = _mm_setr_epi32((int)mn_lo, (int)mn_hi, 0, 0);
    *sc_half = bcast128(_mm_cvtepu8_epi16(sc8));
    *mn_pairs = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
}

/* 64 nibble bytes (two 64-element chunks) -> [sub-block 2c | 2c + 1] for c = 0, 1 */
static inline void k4_levels(__m512i q, __m512i *c0, __m512i *c1) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
    *c0 = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
    *c1 = _mm512_shuffle_i64x2(lo, hi, _MM_SHUFFLE(3, 2, 3, 2));
}

static void dot_q4_k(int n, float *s, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        __m512i sch;
        __m256i mnp;
        k4_scales(x[b].scales, &sch, &mnp);
        const __m256i vmin = _mm256_madd_epi16(mnp, _mm256_loadu_si256((const __m256i *)y[b].bsums));
        __m512i acc = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            __m512i c0, c1;
            k4_levels(ld512(x[b].qs + 64 * h), &c0, &c1);
            acc = dpwssd(acc, pairs_us(c0, ld512(y[b].qs + 128 * h)), sub_scales(sch, 4 * h));
            acc = dpwssd(acc, pairs_us(c1, ld512(y[b].qs + 128 * h + 64)), sub_scales(sch, 4 * h + 2));
        }
        int isum, summ;
        mf_hsum2_i32_8(_mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1)), vmin, &isum, &summ);
        const float d = f16(x[b].d) * y[b].d;
        const float dmin = f16(x[b].dmin) * y[b].d;
        sum += d * (float)isum - dmin * (float)summ;
    }
    *s = sum;
}

static void dot_q5_k(int n, float *s, const void *vx, const void *vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        __m512i sch;
        __m256i mnp;
        k4_scales(x[b].scales, &sch, &mnp);
        const __m256i vmin = _mm256_madd_epi16(mnp, _mm256_loadu_si256((const __m256i *)y[b].bsums));
        const __m512i qh = dup256(x[b].qh);
        __m512i acc = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            __m512i c[2];
            k4_levels(ld512(x[b].qs + 64 * h), &c[0], &c[1]);
            #pragma GCC unroll 8
            for (int t = 0; t < 2; t++) {
                /* sub-blocks j = 4h + 2t, j + 1: 5th bits are bits j, j + 1 of qh[l] */
                const int j = 4 * h + 2 * t;
                const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << j)), _mm256_set1_epi8((char)(1 << (j + 1))), 1);
                const __m512i w = _mm512_mask_add_epi8(c[t], _mm512_test_epi8_mask(qh, bits), c[t], _mm512_set1_epi8(16));
                acc = dpwssd(acc, pairs_us(w, ld512(y[b].qs + 32 * j)), sub_scales(sch, j));
            }
        }
        int isum, summ;
        mf_hsum2_i32_8(_mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1)), vmin, &isum, &summ);
        const float d = f16(x[b].d) * y[b].d;
        const float dmin = f16(x[b].dmin) * y[b].d;
        sum += d * (float)isum - dmin * (float)summ;
    }
    *s = sum;
}

static void dot_q6_k(int n, float *s, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    /* quarters 0, 1: bits 0-1 (<< 4) | bits 2-3 (<< 2); quarters 2, 3: bits 4-5 | bits 6-7 (>> 2) */
    const __m512i mask01 = _mm512_inserti64x4(_mm512_set1_epi8(0x03), _mm256_set1_epi8(0x0c), 1);
    const __m512i mask23 = _mm512_inserti64x4(_mm512_set1_epi8(0x30), _mm256_set1_epi8((char)0xc0), 1);
    const __m512i sh01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i sh23 = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
        const __m256i voff = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)y[b].bsums)), 5);
        __m512i acc = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m512i l = ld512(x[b].ql + 64 * h); /* [ql bytes 0..31 | 32..63] */
            const __m512i qh = dup256(x[b].qh + 32 * h);
            const __m512i half = bcast128(h ? _mm256_extracti128_si256(sc16, 1) : _mm256_castsi256_si128(sc16));
            const __m512i w01 = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_sllv_epi16(_mm512_and_si512(qh, mask01), sh01));
            const __m512i w23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                                _mm512_srlv_epi16(_mm512_and_si512(qh, mask23), sh23));
            acc = dpwssd(acc, pairs_us(w01, ld512(y[b].qs + 128 * h)), group_scales(half, 0));
            acc = dpwssd(acc, pairs_us(w23, ld512(y[b].qs + 128 * h + 64)), group_scales(half, 4));
        }
        const __m256i a = _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
        const int isum = mf_hsum_i32_8(_mm256_sub_epi32(a, voff));
        const float d = f16(x[b].d) * y[b].d;
        sum += d * (float)isum;
    }
    *s = sum;
}

/* IQ4_XS scales ls - 32 as 8 int16 in every granule */
static inline __m512i iq4xs_scales(const block_iq4_xs *x) {
    const __m256i lo = _mm256_srlv_epi32(_mm256_set1_epi32((int)mf_ld32(x->scales_l)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i hi = _mm256_srlv_epi32(_mm256_set1_epi32(x->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    const __m256i ls = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0x0f)),
                                       _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4));
    const __m256i v = _mm256_sub_epi32(ls, _mm256_set1_epi32(32));
    return bcast128(_mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
}

static void dot_iq4_xs(int n, float *s, const void *vx, const void *vy) {
    const block_iq4_xs *x = vx;
    const block_q8_K *y = vy;
    const __m512i table = iq4_table512(0), abs_table = _mm512_abs_epi8(table);
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    float sum = 0;
    for (int b = 0; b < n / QK_K; b++) {
        const __m512i sch = iq4xs_scales(&x[b]);
        __m512i acc = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            /* 4 sub-blocks of 16 bytes: low nibbles are elements 0..15, high 16..31 */
            const __m512i q = ld512(x[b].qs + 64 * h);
            const __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            __m512i idx[2];
            idx[0] = _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11), hi);
            idx[1] = _mm512_permutex2var_epi64(lo, _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15), hi);
            #pragma GCC unroll 8
            for (int t = 0; t < 2; t++) {
                const int j = 4 * h + 2 * t;
                const __m512i a = ld512(y[b].qs + 32 * j);
                /* |v| * sign(a, v); table entries 0..7 are the negative ones */
                const __mmask64 neg = _mm512_cmplt_epu8_mask(idx[t], _mm512_set1_epi8(8));
                const __m512i sa = _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
                const __m512i p = pairs_us(_mm512_shuffle_epi8(abs_table, idx[t]), sa);
                acc = dpwssd(acc, p, sub_scales(sch, j));
            }
        }
        const int isum = hsum512(acc);
        const float d4d8 = f16(x[b].d) * y[b].d;
        sum += d4d8 * (float)isum;
    }
    *s = sum;
}

static void dot_q8_k(int n, float *s, const void *vx, const void *vy) {
    const block_q8_K *x = vx, *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        __m512i acc = _mm512_setzero_si512();
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) acc = _mm512_add_epi32(acc, dot_ss(ld512(x[b].qs + 64 * j), ld512(y[b].qs + 64 * j)));
        const int sumi = hsum512(acc);
        sum += (float)sumi * (x[b].d * y[b].d);
    }
    *s = sum;
}

static void register_int8(mf_type_traits *tab) {
    tab[MF_TYPE_Q4_0].vec_dot = dot_q4_0;
    tab[MF_TYPE_Q4_1].vec_dot = dot_q4_1;
    tab[MF_TYPE_Q5_0].vec_dot = dot_q5_0;
    tab[MF_TYPE_Q5_1].vec_dot = dot_q5_1;
    tab[MF_TYPE_Q8_0].vec_dot = dot_q8_0;
    tab[MF_TYPE_Q8_1].vec_dot = dot_q8_1;
    tab[MF_TYPE_IQ4_NL].vec_dot = dot_iq4_nl;
    tab[MF_TYPE_Q2_K].vec_dot = dot_q2_k;
    tab[MF_TYPE_Q3_K].vec_dot = dot_q3_k;
    tab[MF_TYPE_Q4_K].vec_dot = dot_q4_k;
    tab[MF_TYPE_Q5_K].vec_dot = dot_q5_k;
    tab[MF_TYPE_Q6_K].vec_dot = dot_q6_k;
    tab[MF_TYPE_IQ4_XS].vec_dot = dot_iq4_xs;
    tab[MF_TYPE_Q8_K].vec_dot = dot_q8_k;
}
