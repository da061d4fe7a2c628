/* dequant_avx2.c - AVX2 dequantizers (to_float), bitwise equal to the
 * references: the same float operations per element (int -> float is exact,
 * then the reference's multiplies and adds in its order, never fused).
 *
 * F16 -> F32 through vcvtph2ps is exact, except that the instruction quiets a
 * signaling NaN where the reference keeps the bits; those lanes are patched. */
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/qsearch.h"

static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

/* 16 bytes of levels (unsigned) -> two 8-float vectors */
static inline void u8x16_to_f32(__m128i q, __m256 *lo, __m256 *hi) {
    *lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
    *hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8)));
}

static inline void i8x16_to_f32(__m128i q, __m256 *lo, __m256 *hi) {
    *lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
    *hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)));
}

/* y[0..32) = f(level) for 32 signed levels in a ymm, as level * d */
static inline void store32_mul(float *y, __m256i q, __m256 d) {
    __m256 a, b, c, e;
    i8x16_to_f32(_mm256_castsi256_si128(q), &a, &b);
    i8x16_to_f32(_mm256_extracti128_si256(q, 1), &c, &e);
    _mm256_storeu_ps(y, _mm256_mul_ps(a, d));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(b, d));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(c, d));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(e, d));
}

/* as store32_mul with the reference's d * level order */
static inline void store32_dmul(float *y, __m256i q, __m256 d) {
    __m256 a, b, c, e;
    i8x16_to_f32(_mm256_castsi256_si128(q), &a, &b);
    i8x16_to_f32(_mm256_extracti128_si256(q, 1), &c, &e);
    _mm256_storeu_ps(y, _mm256_mul_ps(d, a));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(d, b));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(d, c));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(d, e));
}

/* unsigned levels: y = level * d + m (Q4_1 / Q5_1) */
static inline void store32_mul_add(float *y, __m256i q, __m256 d, __m256 m) {
    __m256 a, b, c, e;
    u8x16_to_f32(_mm256_castsi256_si128(q), &a, &b);
    u8x16_to_f32(_mm256_extracti128_si256(q, 1), &c, &e);
    _mm256_storeu_ps(y, _mm256_add_ps(_mm256_mul_ps(a, d), m));
    _mm256_storeu_ps(y + 8, _mm256_add_ps(_mm256_mul_ps(b, d), m));
    _mm256_storeu_ps(y + 16, _mm256_add_ps(_mm256_mul_ps(c, d), m));
    _mm256_storeu_ps(y + 24, _mm256_add_ps(_mm256_mul_ps(e, d), m));
}

/* unsigned levels: y = dl * level - ml (K-quants) */
static inline void store32_k(float *y, __m256i q, __m256 dl, __m256 ml) {
    __m256 a, b, c, e;
    u8x16_to_f32(_mm256_castsi256_si128(q), &a, &b);
    u8x16_to_f32(_mm256_extracti128_si256(q, 1), &c, &e);
    _mm256_storeu_ps(y, _mm256_sub_ps(_mm256_mul_ps(dl, a), ml));
    _mm256_storeu_ps(y + 8, _mm256_sub_ps(_mm256_mul_ps(dl, b), ml));
    _mm256_storeu_ps(y + 16, _mm256_sub_ps(_mm256_mul_ps(dl, c), ml));
    _mm256_storeu_ps(y + 24, _mm256_sub_ps(_mm256_mul_ps(dl, e), ml));
}

/* ---------------- float types ---------------- */

static void to_float_f16(const void *vx, float *y, int64_t n) {
    const uint16_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_loadu_si128((const __m128i *)(x + i));
        __m256i f = _mm256_castps_si256(_mm256_cvtph_ps(h));
        /* signaling NaN (exponent 31, mantissa != 0, quiet bit 0x200 clear):
         * clear the float quiet bit the conversion set */
        const __m256i h32 = _mm256_cvtepu16_epi32(h);
        const __m256i top = _mm256_cmpeq_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x7e00)), _mm256_set1_epi32(0x7c00));
        const __m256i low0 = _mm256_cmpeq_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x1ff)), _mm256_setzero_si256());
        const __m256i snan = _mm256_andnot_si256(low0, top);
        f = _mm256_andnot_si256(_mm256_and_si256(snan, _mm256_set1_epi32(0x00400000)), f);
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(f));
    }
    for (; i < n; i++) y[i] = mf_fp16_to_fp32(x[i]);
}

static void to_float_bf16(const void *vx, float *y, int64_t n) {
    const uint16_t *x = vx;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(x + i))), 16);
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(v));
    }
    for (; i < n; i++) y[i] = mf_bf16_to_fp32(x[i]);
}

/* ---------------- 32-element blocks ---------------- */

static void to_float_q8_0(const void *vx, float *y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t b = 0; b < n / QK8_0; b++, y += QK8_0)
        store32_mul(y, _mm256_loadu_si256((const __m256i *)x[b].qs), _mm256_set1_ps(f16(x[b].d)));
}

static void to_float_q4_0(const void *vx, float *y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t b = 0; b < n / QK4_0; b++, y += QK4_0) {
        const __m256i q = _mm256_sub_epi8(mf_nibbles32(x[b].qs), _mm256_set1_epi8(8));
        store32_mul(y, q, _mm256_set1_ps(f16(x[b].d)));
    }
}

static void to_float_q4_1(const void *vx, float *y, int64_t n) {
    const block_q4_1 *x = vx;
    for (int64_t b = 0; b < n / QK4_1; b++, y += QK4_1)
        store32_mul_add(y, mf_nibbles32(x[b].qs), _mm256_set1_ps(f16(x[b].d)), _mm256_set1_ps(f16(x[b].m)));
}

static void to_float_q5_0(const void *vx, float *y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t b = 0; b < n / QK5_0; b++, y += QK5_0) {
        __m256i q = _mm256_or_si256(mf_nibbles32(x[b].qs), mf_bits32_to_0x10(mf_ld32(x[b].qh)));
        store32_mul(y, _mm256_sub_epi8(q, _mm256_set1_epi8(16)), _mm256_set1_ps(f16(x[b].d)));
    }
}

static void to_float_q5_1(const void *vx, float *y, int64_t n) {
    const block_q5_1 *x = vx;
    for (int64_t b = 0; b < n / QK5_1; b++, y += QK5_1) {
        const __m256i q = _mm256_or_si256(mf_nibbles32(x[b].qs), mf_bits32_to_0x10(mf_ld32(x[b].qh)));
        store32_mul_add(y, q, _mm256_set1_ps(f16(x[b].d)), _mm256_set1_ps(f16(x[b].m)));
    }
}

static inline __m256i iq4_table(void) {
    const __m128i t = _mm_loadu_si128((const __m128i *)mf_iq4nl_values);
    return _mm256_inserti128_si256(_mm256_castsi128_si256(t), t, 1);
}

static void to_float_iq4_nl(const void *vx, float *y, int64_t n) {
    const block_iq4_nl *x = vx;
    const __m256i table = iq4_table();
    for (int64_t b = 0; b < n / QK4_NL; b++, y += QK4_NL)
        store32_dmul(y, _mm256_shuffle_epi8(table, mf_nibbles32(x[b].qs)), _mm256_set1_ps(f16(x[b].d)));
}

/* ---------------- K-quants ---------------- */

static void to_float_q4_k(const void *vx, float *y, int64_t n) {
    const block_q4_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = f16(x[b].d), dmin = f16(x[b].dmin);
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) {
            uint8_t sc0, mn0, sc1, mn1;
            mf_k4_scale_min(2 * j, x[b].scales, &sc0, &mn0);
            mf_k4_scale_min(2 * j + 1, x[b].scales, &sc1, &mn1);
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * j));
            store32_k(y + 64 * j, _mm256_and_si256(q, m4), _mm256_set1_ps(d * sc0), _mm256_set1_ps(dmin * mn0));
            store32_k(y + 64 * j + 32, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm256_set1_ps(d * sc1),
                      _mm256_set1_ps(dmin * mn1));
        }
    }
}

static void to_float_q5_k(const void *vx, float *y, int64_t n) {
    const block_q5_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = f16(x[b].d), dmin = f16(x[b].dmin);
        const __m256i qh = _mm256_loadu_si256((const __m256i *)x[b].qh);
        #pragma GCC unroll 8
        for (int j = 0; j < 4; j++) {
            uint8_t sc0, mn0, sc1, mn1;
            mf_k4_scale_min(2 * j, x[b].scales, &sc0, &mn0);
            mf_k4_scale_min(2 * j + 1, x[b].scales, &sc1, &mn1);
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x[b].qs + 32 * j));
            const __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * j))), b1 = _mm256_set1_epi8((char)(2 << (2 * j)));
            const __m256i h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), _mm256_set1_epi8(16));
            const __m256i h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), _mm256_set1_epi8(16));
            store32_k(y + 64 * j, _mm256_or_si256(_mm256_and_si256(q, m4), h0), _mm256_set1_ps(d * sc0),
                      _mm256_set1_ps(dmin * mn0));
            store32_k(y + 64 * j + 32, _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1),
                      _mm256_set1_ps(d * sc1), _mm256_set1_ps(dmin * mn1));
        }
    }
}

static void to_float_q6_k(const void *vx, float *y, int64_t n) {
    const block_q6_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(3), c32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = f16(x[b].d);
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(x[b].ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * h));
            __m256i w[4];
            w[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m2), 4));
            w[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m2), 4));
            w[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m2), 4));
            w[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m2), 4));
            #pragma GCC unroll 8
            for (int k = 0; k < 4; k++) {
                /* elements 128h + 32k + [0, 32): two 16-element groups; y = (d * sc) * (q - 32) */
                const int g = 8 * h + 2 * k;
                float *o = y + 128 * h + 32 * k;
                const __m256i v = _mm256_sub_epi8(w[k], c32);
                __m256 a, bb, c, e;
                i8x16_to_f32(_mm256_castsi256_si128(v), &a, &bb);
                i8x16_to_f32(_mm256_extracti128_si256(v, 1), &c, &e);
                const __m256 s0 = _mm256_set1_ps(d * x[b].scales[g]), s1 = _mm256_set1_ps(d * x[b].scales[g + 1]);
                _mm256_storeu_ps(o, _mm256_mul_ps(s0, a));
                _mm256_storeu_ps(o + 8, _mm256_mul_ps(s0, bb));
                _mm256_storeu_ps(o + 16, _mm256_mul_ps(s1, c));
                _mm256_storeu_ps(o + 24, _mm256_mul_ps(s1, e));
            }
        }
    }
}

static void to_float_iq4_xs(const void *vx, float *y, int64_t n) {
    const block_iq4_xs *x = vx;
    const __m256i table = iq4_table();
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = f16(x[b].d);
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
            const int ls = ((x[b].scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | ((x[b].scales_h >> (2 * ib)) & 3) << 4;
            const float dl = d * (ls - 32);
            store32_dmul(y, _mm256_shuffle_epi8(table, mf_nibbles32(x[b].qs + 16 * ib)), _mm256_set1_ps(dl));
        }
    }
}

void mf_cpu_reg_dequant_avx2(mf_type_traits *tab) {
    tab[MF_TYPE_F16].to_float = to_float_f16;
    tab[MF_TYPE_BF16].to_float = to_float_bf16;
    tab[MF_TYPE_Q8_0].to_float = to_float_q8_0;
    tab[MF_TYPE_Q4_0].to_float = to_float_q4_0;
    tab[MF_TYPE_Q4_1].to_float = to_float_q4_1;
    tab[MF_TYPE_Q5_0].to_float = to_float_q5_0;
    tab[MF_TYPE_Q5_1].to_float = to_float_q5_1;
    tab[MF_TYPE_IQ4_NL].to_float = to_float_iq4_nl;
    tab[MF_TYPE_Q4_K].to_float = to_float_q4_k;
    tab[MF_TYPE_Q5_K].to_float = to_float_q5_k;
    tab[MF_TYPE_Q6_K].to_float = to_float_q6_k;
    tab[MF_TYPE_IQ4_XS].to_float = to_float_iq4_xs;
}
