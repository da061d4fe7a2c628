/* dot_legacy_avx2.c - AVX2 dots of the 32-element block types (Q4_0, Q4_1,
 * Q5_0, Q5_1, Q8_0, Q8_1, IQ4_NL) with their Q8_0/Q8_1 activations, bitwise
 * equal to the references.
 *
 * Float order (quant/lanes.h): block b's value goes into lane b % 8. The
 * kernels take 8 blocks at a time: each block's exact int32 sum is reduced
 * from its 8 partial lanes (mf_reduce8_i32 gives the 8 totals in block
 * order), the 8 scale products are formed with the reference's expression as
 * one vector, and that vector is added to one 8-lane accumulator: the same
 * per-lane chain of additions as the reference. A last partial group runs
 * with zero sums and zero scales in its missing lanes, which adds +0.
 *
 * Integer exactness: unsigned levels (Q4/Q5) are multiplied with maddubs,
 * whose int16 pair sums stay far from saturation (31 * 128 * 2); the level
 * offset (8 or 16) is a second maddubs with a constant, subtracted in int16.
 * Signed bytes (Q8, IQ4 table values) use |x| * sign(y, x), exact when y is
 * not -128 — the activation quantizers never write -128. */
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/qsearch.h"

#define GROUP 8

static inline __m256i ones16(void) { return _mm256_set1_epi16(1); }
static inline __m256i ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* ---- one block's 8 int32 partial sums ---- */

static inline __m256i blk_q4_1(const block_q4_1 *x, const block_q8_1 *y) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(mf_nibbles32(x->qs), ld256(y->qs)), ones16());
}

static inline __m256i blk_q5_1(const block_q5_1 *x, const block_q8_1 *y) {
    const __m256i q = _mm256_or_si256(mf_nibbles32(x->qs), mf_bits32_to_0x10(mf_ld32(x->qh)));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, ld256(y->qs)), ones16());
}

static inline __m256i blk_q8_1(const block_q8_1 *x, const block_q8_1 *y) {
    return mf_dot_i8_avx2(ld256(x->qs), ld256(y->qs));
}

static inline __m256i iq4_table(void) {
    const __m128i t = _mm_loadu_si128((const __m128i *)mf_iq4nl_values);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(t), t, 1);
}

/* weight side of one block: the bytes the activation is multiplied with */
static inline __m256i w_q4_0(const block_q4_0 *x) { return mf_nibbles32(x->qs); }
static inline __m256i w_q5_0(const block_q5_0 *x) {
    return _mm256_or_si256(mf_nibbles32(x->qs), mf_bits32_to_0x10(mf_ld32(x->qh)));
}
static inline __m256i w_q8_0(const block_q8_0 *x) { return ld256(x->qs); }
static inline __m256i w_iq4_nl(const block_iq4_nl *x) { return _mm256_shuffle_epi8(iq4_table(), mf_nibbles32(x->qs)); }

/* activation side: the block's 8 exact int32 partial sums from its weight bytes q */
static inline __m256i a_off8(__m256i q, const block_q8_0 *y) {
    const __m256i a = ld256(y->qs);
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(_mm256_set1_epi8(8), a));
    return _mm256_madd_epi16(p, ones16());
}
static inline __m256i a_off16(__m256i q, const block_q8_0 *y) {
    const __m256i a = ld256(y->qs);
    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(_mm256_set1_epi8(16), a));
    return _mm256_madd_epi16(p, ones16());
}
static inline __m256i a_i8(__m256i q, const block_q8_0 *y) { return mf_dot_i8_avx2(q, ld256(y->qs)); }

/* the single-row kernels' blocks: the weight side, then the activation side */
static inline __m256i blk_q4_0(const block_q4_0 *x, const block_q8_0 *y) { return a_off8(w_q4_0(x), y); }
static inline __m256i blk_q5_0(const block_q5_0 *x, const block_q8_0 *y) { return a_off16(w_q5_0(x), y); }
static inline __m256i blk_q8_0(const block_q8_0 *x, const block_q8_0 *y) { return a_i8(w_q8_0(x), y); }
static inline __m256i blk_iq4_nl(const block_iq4_nl *x, const block_q8_0 *y) { return a_i8(w_iq4_nl(x), y); }

/* ---- 8 blocks: exact int sums as floats, lanes past m are 0 ---- */

#define DEFINE_SUMS8(NAME, BLK, TX, TY)                                                                      \
    static inline __attribute__((always_inline)) __m256 NAME(const TX *x, const TY *y, int m) {             \
        __m256i v[GROUP];                                                                                    \
        _Pragma("GCC unroll 8") for (int k = 0; k < GROUP; k++) v[k] =                                       \
            k < m ? BLK(x + k, y + k) : _mm256_setzero_si256();                                              \
        return _mm256_cvtepi32_ps(mf_reduce8_i32(v));                                                        \
    }

DEFINE_SUMS8(sums_q4_0, blk_q4_0, block_q4_0, block_q8_0)
DEFINE_SUMS8(sums_q4_1, blk_q4_1, block_q4_1, block_q8_1)
DEFINE_SUMS8(sums_q5_0, blk_q5_0, block_q5_0, block_q8_0)
DEFINE_SUMS8(sums_q5_1, blk_q5_1, block_q5_1, block_q8_1)
DEFINE_SUMS8(sums_q8_0, blk_q8_0, block_q8_0, block_q8_0)
DEFINE_SUMS8(sums_q8_1, blk_q8_1, block_q8_1, block_q8_1)
DEFINE_SUMS8(sums_iq4_nl, blk_iq4_nl, block_iq4_nl, block_q8_0)

/* The scale fields of 8 blocks starting at x (m of them; the rest 0). */
#define LOAD_D(x, m) \
    ((m) == GROUP ? mf_load8_f16((const uint8_t *)&(x)->d, sizeof *(x)) : mf_load8_f16_part((const uint8_t *)&(x)->d, sizeof *(x), (m)))

/* A kernel over blocks with one f16 scale per side; VALUE(sf, dx, dy) is the
 * reference's per-block expression, evaluated on 8 lanes. */
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

/* (float)sumi * dx * dy, left to right */
#define VAL_SUMI_DX_DY(sf, dx, dy) _mm256_mul_ps(_mm256_mul_ps(sf, dx), dy)
/* (dx * dy) * sumi (products commute exactly, so this also covers sumi * (dx * dy)) */
#define VAL_DXDY_SUMI(sf, dx, dy) _mm256_mul_ps(_mm256_mul_ps(dx, dy), sf)

DEFINE_DOT_D(dot_q4_0, sums_q4_0, block_q4_0, block_q8_0, QK4_0, VAL_SUMI_DX_DY)
DEFINE_DOT_D(dot_q5_0, sums_q5_0, block_q5_0, block_q8_0, QK5_0, VAL_DXDY_SUMI)
DEFINE_DOT_D(dot_q8_0, sums_q8_0, block_q8_0, block_q8_0, QK8_0, VAL_DXDY_SUMI)
DEFINE_DOT_D(dot_q8_1, sums_q8_1, block_q8_1, block_q8_1, QK8_1, VAL_DXDY_SUMI)
DEFINE_DOT_D(dot_iq4_nl, sums_iq4_nl, block_iq4_nl, block_q8_0, QK4_NL, VAL_DXDY_SUMI)

/* Q4_1 / Q5_1 with Q8_1: (dx * dy) * sumi + mx * sy per block; d and m (d and
 * s) are adjacent f16 fields, loaded as pairs. */
#define DEFINE_DOT_DM(NAME, SUMS, TX, BLCK)                                                                      \
    static void NAME(int n, float *s, const void *vx, const void *vy) {                                         \
        const TX *x = vx;                                                                                       \
        const block_q8_1 *y = vy;                                                                               \
        const int nb = n / (BLCK);                                                                              \
        __m256 acc = _mm256_setzero_ps();                                                                       \
        for (int b = 0; b < nb; b += GROUP) {                                                                   \
            const int m = nb - b < GROUP ? nb - b : GROUP;                                                      \
            __m256 sf, dx, mx, dy, sy;                                                                          \
            if (m == GROUP) {                                                                                   \
                sf = SUMS(x + b, y + b, GROUP);                                                                 \
                mf_load8_f16x2((const uint8_t *)&x[b].d, sizeof *x, &dx, &mx);                                  \
                mf_load8_f16x2((const uint8_t *)&y[b].d, sizeof *y, &dy, &sy);                                  \
            } else {                                                                                            \
                sf = SUMS(x + b, y + b, m);                                                                     \
                mf_load8_f16x2_part((const uint8_t *)&x[b].d, sizeof *x, m, &dx, &mx);                          \
                mf_load8_f16x2_part((const uint8_t *)&y[b].d, sizeof *y, m, &dy, &sy);                          \
            }                                                                                                   \
            acc = _mm256_add_ps(acc, _mm256_add_ps(_mm256_mul_ps(_mm256_mul_ps(dx, dy), sf), _mm256_mul_ps(mx, sy))); \
        }                                                                                                       \
        *s = mf_fold8_ps(acc);                                                                                  \
    }

DEFINE_DOT_DM(dot_q4_1, sums_q4_1, block_q4_1, QK4_1)
DEFINE_DOT_DM(dot_q5_1, sums_q5_1, block_q5_1, QK5_1)

/* ---- one weight row, several activation rows (vec_dot_cols) ----
 * The same arithmetic per column as the kernels above - each block's exact
 * int32 sum, the 8 block totals of a group in block order, the reference's
 * scale expression, one 8-lane accumulator per column, the same fold - with
 * each group's weight bytes decoded once for every column. */

#define DEFINE_DOT_COLS(NAME, TX, BLCK, WDEC, ACT, VALUE)                                                       \
    static void NAME(int n, float *s, size_t s_stride, const void *vx, const void *vy, size_t y_stride, int nc) { \
        const TX *x = vx;                                                                                      \
        const int nb = n / (BLCK);                                                                             \
        __m256 acc[MF_DOT_COLS];                                                                               \
        for (int c = 0; c < nc; c++) acc[c] = _mm256_setzero_ps();                                             \
        for (int b = 0; b < nb; b += GROUP) {                                                                  \
            const int m = nb - b < GROUP ? nb - b : GROUP;                                                     \
            __m256i w[GROUP];                                                                                  \
            _Pragma("GCC unroll 8") for (int k = 0; k < GROUP; k++) w[k] = k < m ? WDEC(x + b + k) : _mm256_setzero_si256(); \
            const __m256 dx = LOAD_D(x + b, m);                                                                \
            for (int c = 0; c < nc; c++) {                                                                     \
                const block_q8_0 *y = (const block_q8_0 *)((const uint8_t *)vy + (size_t)c * y_stride) + b;    \
                __m256i v[GROUP];                                                                              \
                _Pragma("GCC unroll 8") for (int k = 0; k < GROUP; k++) v[k] =                                 \
                    k < m ? ACT(w[k], y + k) : _mm256_setzero_si256();                                         \
                const __m256 sf = _mm256_cvtepi32_ps(mf_reduce8_i32(v));                                       \
                acc[c] = _mm256_add_ps(acc[c], VALUE(sf, dx, LOAD_D(y, m)));                                   \
            }                                                                                                  \
        }                                                                                                      \
        for (int c = 0; c < nc; c++) s[(size_t)c * s_stride] = mf_fold8_ps(acc[c]);                            \
    }

DEFINE_DOT_COLS(cols_q4_0, block_q4_0, QK4_0, w_q4_0, a_off8, VAL_SUMI_DX_DY)
DEFINE_DOT_COLS(cols_q5_0, block_q5_0, QK5_0, w_q5_0, a_off16, VAL_DXDY_SUMI)
DEFINE_DOT_COLS(cols_q8_0, block_q8_0, QK8_0, w_q8_0, a_i8, VAL_DXDY_SUMI)
DEFINE_DOT_COLS(cols_iq4_nl, block_iq4_nl, QK4_NL, w_iq4_nl, a_i8, VAL_DXDY_SUMI)

void mf_cpu_reg_dot_legacy_avx2(mf_type_traits *tab) {
    tab[MF_TYPE_Q4_0].vec_dot_cols = cols_q4_0;
    tab[MF_TYPE_Q5_0].vec_dot_cols = cols_q5_0;
    tab[MF_TYPE_Q8_0].vec_dot_cols = cols_q8_0;
    tab[MF_TYPE_IQ4_NL].vec_dot_cols = cols_iq4_nl;
    tab[MF_TYPE_Q4_0].vec_dot = dot_q4_0;
    tab[MF_TYPE_Q4_1].vec_dot = dot_q4_1;
    tab[MF_TYPE_Q5_0].vec_dot = dot_q5_0;
    tab[MF_TYPE_Q5_1].vec_dot = dot_q5_1;
    tab[MF_TYPE_Q8_0].vec_dot = dot_q8_0;
    tab[MF_TYPE_Q8_1].vec_dot = dot_q8_1;
    tab[MF_TYPE_IQ4_NL].vec_dot = dot_iq4_nl;
}
