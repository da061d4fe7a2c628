/* dot_kquant_avx2.c - AVX2 dots of the 256-element super-block types (Q2_K,
 * Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, Q8_K) with Q8_K activations, bitwise equal
 * to the references.
 *
 * Float order (quant/lanes.h): one float per super-block, added in order into
 * one float; each kernel reduces its int32 lanes to the super-block's exact
 * isum (and min sum), then evaluates the reference's scalar expression.
 *
 * Integer exactness: levels are unsigned (0..3, 0..7, 0..15, 0..31, 0..63) and
 * multiplied by the signed activations with maddubs (pair sums at most
 * 63 * 128 * 2, far from int16 saturation); sub-block scales are applied with
 * madd on int16 (exact int32). Level offsets (Q3_K's 4, Q6_K's 32) and mins
 * go through the activation's bsums, as the references do. IQ4_XS table values
 * are signed and use |v| * sign(a, v), exact for activations without -128
 * (the quantizer never writes it). */
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/qsearch.h"

static inline __m256i ld256(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }
static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

/* Scale broadcasts by byte shuffles. `half` holds 8 int16 scales in both
 * 128-bit halves; pair_scales(half, k) = [s[2k] x 8 | s[2k+1] x 8] (one
 * scale per 16 elements), one_scale(half, j) = [s[j] x 16] (per 32). */
static inline __m256i pair_scales(__m256i half, int k) {
    const int8_t a = (int8_t)(4 * k), b = (int8_t)(4 * k + 2);
    const __m256i m = _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1,
                                       b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1, b, b + 1);
    return _mm256_shuffle_epi8(half, m);
}

static inline __m256i one_scale(__m256i half, int j) {
    const int8_t a = (int8_t)(2 * j);
    const __m256i m = _mm256_setr_epi8(a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1,
                                       a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1, a, a + 1);
    return _mm256_shuffle_epi8(half, m);
}

/* 16 int16 scales -> the 8 of half h in both 128-bit halves */
static inline __m256i half_of(__m256i sc16, int h) {
    return h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
}

/* ---------------- Q2_K ---------------- */

static void dot_q2_k(int n, float *s, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m15 = _mm_set1_epi8(15);
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        const __m128i sc8 = _mm_loadu_si128((const __m128i *)x[b].scales);
        const __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc8, m15));
        const __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc8, 4), m15));
        const __m256i vmin = _mm256_madd_epi16(mn16, ld256(y[b].bsums));
        __m256i acc = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m256i q = ld256(x[b].qs + 32 * h);
            const __m256i half = half_of(sc16, h);
            #pragma GCC unroll 8
            for (int k = 0; k < 4; k++) {
                const __m256i w = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
                const __m256i p = _mm256_maddubs_epi16(w, ld256(y[b].qs + 128 * h + 32 * k));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pair_scales(half, k)));
            }
        }
        int isum, summs;
        mf_hsum2_i32_8(acc, vmin, &isum, &summs);
        const float dall = y[b].d * f16(x[b].d);
        const float dmin = y[b].d * f16(x[b].dmin);
        sum += dall * (float)isum - dmin * (float)summs;
    }
    *s = sum;
}

/* ---------------- Q3_K ---------------- */

/* The 16 six-bit scales of a Q3_K block minus 32, as 16 int8 (mf_q3k_scales). */
static inline __m128i q3k_scales(const uint8_t p[12]) {
    uint64_t lo8;
    uint32_t hi4;
    memcpy(&lo8, p, 8);
    memcpy(&hi4, p + 8, 4);
    const uint64_t m2 = 0x03030303u;
    /* top 2 bits of scale j sit at bits 2*(j/4) of byte 8 + j%4 */
    const uint64_t h01 = ((uint64_t)hi4 & m2) | (((uint64_t)(hi4 >> 2) & m2) << 32);
    const uint64_t h23 = ((uint64_t)(hi4 >> 4) & m2) | (((uint64_t)(hi4 >> 6) & m2) << 32);
    const uint64_t s0 = (lo8 & 0x0f0f0f0f0f0f0f0full) | h01 << 4;        /* scales 0..7 */
    const uint64_t s1 = ((lo8 >> 4) & 0x0f0f0f0f0f0f0f0full) | h23 << 4; /* scales 8..15 */
    return _mm_sub_epi8(_mm_set_epi64x((long long)s1, (long long)s0), _mm_set1_epi8(32));
}

static void dot_q3_k(int n, float *s, const void *vx, const void *vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m3 = _mm256_set1_epi8(3);
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(q3k_scales(x[b].scales));
        /* the level offset: 4 * sum_j (sc_j - 32) * bsum_j */
        const __m256i voff = _mm256_slli_epi32(_mm256_madd_epi16(sc16, ld256(y[b].bsums)), 2);
        const __m256i hm = ld256(x[b].hmask);
        __m256i acc = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m256i q = ld256(x[b].qs + 32 * h);
            const __m256i half = half_of(sc16, h);
            #pragma GCC unroll 8
            for (int k = 0; k < 4; k++) {
                /* third bit of element 128h + 32k + l: bit 4h + k of hmask[l], moved to bit 2 */
                const int bit = 4 * h + k;
                __m256i hb = _mm256_and_si256(hm, _mm256_set1_epi8((char)(1 << bit)));
                hb = bit >= 2 ? _mm256_srli_epi16(hb, bit - 2) : _mm256_slli_epi16(hb, 2 - bit);
                const __m256i w = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3), hb);
                const __m256i p = _mm256_maddubs_epi16(w, ld256(y[b].qs + 128 * h + 32 * k));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pair_scales(half, k)));
            }
        }
        const int isum = mf_hsum_i32_8(_mm256_sub_epi32(acc, voff));
        const float d = f16(x[b].d) * y[b].d;
        sum += d * (float)isum;
    }
    *s = sum;
}

/* ---------------- Q4_K / Q5_K ---------------- */

/* Unpacks the 12-byte scale/min field (mf_k4_scale_min): scales as 8 int16 in
 * both 128-bit halves, mins as 16 int16 with each min twice (one per
 * 16-element bsum). */
static inline void k4_scales(const uint8_t p[12], __m256i *sc_half, __m256i *mn_pairs) {
    uint32_t w[3];
    memcpy(w, p, 12);
    const uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t sc_lo = w[0] & m6, mn_lo = w[1] & m6;
    const uint32_t sc_hi = (w[2] & m4) | ((w[0] >> 6) & m2) << 4;
    const uint32_t mn_hi = ((w[2] >> 4) & m4) | ((w[1] >> 6) & m2) << 4;
    const __m128i sc8 = _mm_setr_epi32((int)sc_lo, (int)sc_hi, 0, 0);
    const __m128i mn8 = _mm_setr_epi32((int)mn_lo, (int)mn_hi, 0, 0);
    const __m128i sc16 = _mm_cvtepu8_epi16(sc8);
    *sc_half = _mm256_inserti128_si256(_mm256_castsi128_si256(sc16), sc16, 1);
    *mn_pairs = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
}

static void dot_q4_k(int n, float *s, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        __m256i sch, mnp;
        k4_scales(x[b].scales, &sch, &mnp);
        const __m256i vmin = _mm256_madd_epi16(mnp, ld256(y[b].bsums));
        __m256i acc = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) {
            const __m256i q = ld256(x[b].qs + 32 * j);
            const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            const __m256i pl = _mm256_maddubs_epi16(lo, ld256(y[b].qs + 64 * j));
            const __m256i ph = _mm256_maddubs_epi16(hi, ld256(y[b].qs + 64 * j + 32));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pl, one_scale(sch, 2 * j)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(ph, one_scale(sch, 2 * j + 1)));
        }
        int isum, summ;
        mf_hsum2_i32_8(acc, vmin, &isum, &summ);
        const float d = f16(x[b].d) * y[b].d;
        const float dmin = f16(x[b].dmin) * y[b].d;
        sum += d * (float)isum - dmin * (float)summ;
    }
    *s = sum;
}

static void dot_q5_k(int n, float *s, const void *vx, const void *vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        __m256i sch, mnp;
        k4_scales(x[b].scales, &sch, &mnp);
        const __m256i vmin = _mm256_madd_epi16(mnp, ld256(y[b].bsums));
        const __m256i qh = ld256(x[b].qh);
        __m256i acc = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) {
            const __m256i q = ld256(x[b].qs + 32 * j);
            /* 5th bits: bit 2j (2j + 1) of qh[l] for element 64j + l (64j + 32 + l), moved to bit 4 */
            __m256i hl = _mm256_and_si256(qh, _mm256_set1_epi8((char)(1 << (2 * j))));
            __m256i hh = _mm256_and_si256(qh, _mm256_set1_epi8((char)(2 << (2 * j))));
            hl = 2 * j <= 4 ? _mm256_slli_epi16(hl, 4 - 2 * j) : _mm256_srli_epi16(hl, 2 * j - 4);
            hh = 2 * j + 1 <= 4 ? _mm256_slli_epi16(hh, 3 - 2 * j) : _mm256_srli_epi16(hh, 2 * j - 3);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), hl);
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), hh);
            const __m256i pl = _mm256_maddubs_epi16(lo, ld256(y[b].qs + 64 * j));
            const __m256i ph = _mm256_maddubs_epi16(hi, ld256(y[b].qs + 64 * j + 32));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pl, one_scale(sch, 2 * j)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(ph, one_scale(sch, 2 * j + 1)));
        }
        int isum, summ;
        mf_hsum2_i32_8(acc, vmin, &isum, &summ);
        const float d = f16(x[b].d) * y[b].d;
        const float dmin = f16(x[b].dmin) * y[b].d;
        sum += d * (float)isum - dmin * (float)summ;
    }
    *s = sum;
}

/* ---------------- Q6_K ---------------- */

/* The 6-bit levels of half h (elements 128h ..): quarter k = elements
 * 128h + 32k + l, the low nibble of ql[l] / ql[32 + l] / their high nibble,
 * the top two bits from bits 2k, 2k + 1 of qh[l] (moved to bits 4, 5). */
static inline void q6k_levels(const block_q6_K *x, int h, __m256i w[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i l0 = ld256(x->ql + 64 * h), l1 = ld256(x->ql + 64 * h + 32);
    const __m256i qh = ld256(x->qh + 32 * h);
    w[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x03)), 4));
    w[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0c)), 2));
    w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
    w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8((char)0xc0)), 2));
}

static void dot_q6_k(int n, float *s, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
        /* the level offset: 32 * sum_j sc_j * bsum_j */
        const __m256i voff = _mm256_slli_epi32(_mm256_madd_epi16(sc16, ld256(y[b].bsums)), 5);
        __m256i acc = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m256i half = half_of(sc16, h);
            __m256i w[4];
            q6k_levels(&x[b], h, w);
            #pragma GCC unroll 8
            for (int k = 0; k < 4; k++) {
                const __m256i p = _mm256_maddubs_epi16(w[k], ld256(y[b].qs + 128 * h + 32 * k));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, pair_scales(half, k)));
            }
        }
        const int isum = mf_hsum_i32_8(_mm256_sub_epi32(acc, voff));
        const float d = f16(x[b].d) * y[b].d;
        sum += d * (float)isum;
    }
    *s = sum;
}

/* ---------------- IQ4_XS ---------------- */

/* The 8 sub-block scales ls - 32 as int16, in both 128-bit halves. */
static inline __m256i iq4xs_scales(const block_iq4_xs *x) {
    const __m256i lo = _mm256_srlv_epi32(_mm256_set1_epi32((int)mf_ld32(x->scales_l)), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    const __m256i hi = _mm256_srlv_epi32(_mm256_set1_epi32(x->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    const __m256i ls = _mm256_or_si256(_mm256_and_si256(lo, _mm256_set1_epi32(0x0f)),
                                       _mm256_slli_epi32(_mm256_and_si256(hi, _mm256_set1_epi32(3)), 4));
    const __m256i v = _mm256_sub_epi32(ls, _mm256_set1_epi32(32));
    const __m128i v16 = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(v16), v16, 1);
}

static void dot_iq4_xs(int n, float *s, const void *vx, const void *vy) {
    const block_iq4_xs *x = vx;
    const block_q8_K *y = vy;
    const __m128i t = _mm_loadu_si128((const __m128i *)mf_iq4nl_values);
    const __m256i table = _mm256_inserti128_si256(_mm256_castsi128_si256(t), t, 1);
    float sum = 0;
    for (int b = 0; b < n / QK_K; b++) {
        const __m256i sch = iq4xs_scales(&x[b]);
        __m256i acc = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const __m256i v = _mm256_shuffle_epi8(table, mf_nibbles32(x[b].qs + 16 * ib));
            const __m256i a = ld256(y[b].qs + 32 * ib);
            const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(a, v));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, one_scale(sch, ib)));
        }
        const int isum = mf_hsum_i32_8(acc);
        const float d4d8 = f16(x[b].d) * y[b].d;
        sum += d4d8 * (float)isum;
    }
    *s = sum;
}

/* ---------------- Q8_K . Q8_K ---------------- */

static void dot_q8_k(int n, float *s, const void *vx, const void *vy) {
    const block_q8_K *x = vx, *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        __m256i acc = _mm256_setzero_si256();
        #pragma GCC unroll 8
        for (int j = 0; j < QK_K / 32; j++)
            acc = _mm256_add_epi32(acc, mf_dot_i8_avx2(ld256(x[b].qs + 32 * j), ld256(y[b].qs + 32 * j)));
        const int sumi = mf_hsum_i32_8(acc);
        sum += (float)sumi * (x[b].d * y[b].d);
    }
    *s = sum;
}

/* ---------------- columns (vec_dot_cols) for Q6_K ----------------
 * One weight row against up to MF_DOT_COLS activation rows: each
 * super-block's levels and scale broadcasts are decoded once, then every
 * column runs the single-row kernel's integer steps and scalar expression in
 * the same order (so each result is bitwise that kernel's). Q6_K's levels
 * take the most decoding (ffn_down of Llama-3.2-1B at 16 tokens: 10% faster
 * than vec_dot per token); Q4_K's cost little to decode, and the same scheme
 * measured within 2% of vec_dot, so it has none. */

static void cols_q6_k(int n, float *s, size_t s_stride, const void *vx, const void *vy, size_t y_stride, int nc) {
    const block_q6_K *x = vx;
    float sum[MF_DOT_COLS] = {0};
    for (int b = 0; b < n / QK_K; b++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[b].scales));
        __m256i w[8], ps[8];
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m256i half = half_of(sc16, h);
            q6k_levels(&x[b], h, w + 4 * h);
            #pragma GCC unroll 8
            for (int k = 0; k < 4; k++) ps[4 * h + k] = pair_scales(half, k);
        }
        const float dx = f16(x[b].d);
        for (int c = 0; c < nc; c++) {
            const block_q8_K *y = (const block_q8_K *)((const uint8_t *)vy + (size_t)c * y_stride) + b;
            const __m256i voff = _mm256_slli_epi32(_mm256_madd_epi16(sc16, ld256(y->bsums)), 5);
            __m256i acc = _mm256_setzero_si256();
            #pragma GCC unroll 8
            for (int h = 0; h < 2; h++)
                #pragma GCC unroll 8
                for (int k = 0; k < 4; k++) {
                    const __m256i p = _mm256_maddubs_epi16(w[4 * h + k], ld256(y->qs + 128 * h + 32 * k));
                    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, ps[4 * h + k]));
                }
            const int isum = mf_hsum_i32_8(_mm256_sub_epi32(acc, voff));
            const float d = dx * y->d;
            sum[c] += d * (float)isum;
        }
    }
    for (int c = 0; c < nc; c++) s[(size_t)c * s_stride] = sum[c];
}

void mf_cpu_reg_dot_kquant_avx2(mf_type_traits *tab) {
    tab[MF_TYPE_Q2_K].vec_dot = dot_q2_k;
    tab[MF_TYPE_Q3_K].vec_dot = dot_q3_k;
    tab[MF_TYPE_Q4_K].vec_dot = dot_q4_k;
    tab[MF_TYPE_Q6_K].vec_dot_cols = cols_q6_k;
    tab[MF_TYPE_Q5_K].vec_dot = dot_q5_k;
    tab[MF_TYPE_Q6_K].vec_dot = dot_q6_k;
    tab[MF_TYPE_IQ4_XS].vec_dot = dot_iq4_xs;
    tab[MF_TYPE_Q8_K].vec_dot = dot_q8_k;
}
