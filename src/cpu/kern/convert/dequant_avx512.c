/* dequant_avx512.c - AVX-512 dequantizers (to_float) for the float types and
 * the most used weight types (Q8_0, Q4_0, Q4_K, Q6_K), bitwise equal to the
 * references (same per-element float operations, never fused). The other
 * types keep the AVX2 versions at this level: dequantization is bound by
 * the float stores, so wider registers buy little there. */
#if defined(__GNUC__) && !defined(__clang__)
/* this level must run on AVX-512 CPUs without VNNI/BF16: keep the compiler
 * from emitting them (CMake compiles every *_avx512.c with those flags) */
#pragma GCC target("no-avx512vnni,no-avx512bf16")
#endif
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/qsearch.h"

static inline __mmask16 first16(int64_t c) { return (__mmask16)(c >= 16 ? 0xffff : (1u << c) - 1); }
static inline float f16(uint16_t h) { return _cvtsh_ss(h); }

static void to_float_f16(const void *vx, float *y, int64_t n) {
    const uint16_t *x = vx;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = first16(n - i);
        const __m256i h = _mm256_maskz_loadu_epi16(m, x + i);
        __m512i f = _mm512_castps_si512(_mm512_cvtph_ps(h));
        /* vcvtph2ps quiets signaling NaNs; the reference keeps their bits */
        const __mmask16 top = _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, _mm256_set1_epi16(0x7e00)), _mm256_set1_epi16(0x7c00));
        const __mmask16 low = _mm256_test_epi16_mask(h, _mm256_set1_epi16(0x1ff));
        f = _mm512_mask_and_epi32(f, top & low, f, _mm512_set1_epi32(~0x00400000));
        _mm512_mask_storeu_ps(y + i, m, _mm512_castsi512_ps(f));
    }
}

static void to_float_bf16(const void *vx, float *y, int64_t n) {
    const uint16_t *x = vx;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = first16(n - i);
        const __m512i v = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i)), 16);
        _mm512_mask_storeu_ps(y + i, m, _mm512_castsi512_ps(v));
    }
}

/* 32 signed levels (bytes) times d, level * d */
static inline void store32_mul(float *y, __m256i q, __m512 d) {
    const __m512 a = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)));
    const __m512 b = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)));
    _mm512_storeu_ps(y, _mm512_mul_ps(a, d));
    _mm512_storeu_ps(y + 16, _mm512_mul_ps(b, d));
}

static void to_float_q8_0(const void *vx, float *y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t b = 0; b < n / QK8_0; b++, y += QK8_0)
        store32_mul(y, _mm256_loadu_si256((const __m256i *)x[b].qs), _mm512_set1_ps(f16(x[b].d)));
}

static void to_float_q4_0(const void *vx, float *y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t b = 0; b < n / QK4_0; b++, y += QK4_0)
        store32_mul(y, _mm256_sub_epi8(mf_nibbles32(x[b].qs), _mm256_set1_epi8(8)), _mm512_set1_ps(f16(x[b].d)));
}

/* 32 unsigned levels: dl * level - ml */
static inline void store32_k(float *y, __m256i q, __m512 dl, __m512 ml) {
    const __m512 a = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q)));
    const __m512 b = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q, 1)));
    _mm512_storeu_ps(y, _mm512_sub_ps(_mm512_mul_ps(dl, a), ml));
    _mm512_storeu_ps(y + 16, _mm512_sub_ps(_mm512_mul_ps(dl, b), ml));
}

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
            store32_k(y + 64 * j, _mm256_and_si256(q, m4), _mm512_set1_ps(d * sc0), _mm512_set1_ps(dmin * mn0));
            store32_k(y + 64 * j + 32, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4), _mm512_set1_ps(d * sc1),
                      _mm512_set1_ps(dmin * mn1));
        }
    }
}

static void to_float_q6_k(const void *vx, float *y, int64_t n) {
    const block_q6_K *x = vx;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i mask01 = _mm512_inserti64x4(_mm512_set1_epi8(0x03), _mm256_set1_epi8(0x0c), 1);
    const __m512i mask23 = _mm512_inserti64x4(_mm512_set1_epi8(0x30), _mm256_set1_epi8((char)0xc0), 1);
    const __m512i sh01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i sh23 = _mm512_inserti64x4(_mm512_set1_epi16(0), _mm256_set1_epi16(2), 1);
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = f16(x[b].d);
        #pragma GCC unroll 8
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512(x[b].ql + 64 * h);
            const __m256i qh1 = _mm256_loadu_si256((const __m256i *)(x[b].qh + 32 * h));
            const __m512i qh = _mm512_inserti64x4(_mm512_castsi256_si512(qh1), qh1, 1);
            __m512i w[2];
            w[0] = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_sllv_epi16(_mm512_and_si512(qh, mask01), sh01));
            w[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                   _mm512_srlv_epi16(_mm512_and_si512(qh, mask23), sh23));
            #pragma GCC unroll 8
            for (int t = 0; t < 2; t++) {
                /* 64 elements = 4 groups of 16: y = (d * sc) * (level - 32) */
                const __m512i v = _mm512_sub_epi8(w[t], _mm512_set1_epi8(32));
                #pragma GCC unroll 8
                for (int g = 0; g < 4; g++) {
                    const int grp = 8 * h + 4 * t + g;
                    __m128i qg;
                    switch (g) {
                    case 0: qg = _mm512_extracti32x4_epi32(v, 0); break;
                    case 1: qg = _mm512_extracti32x4_epi32(v, 1); break;
                    case 2: qg = _mm512_extracti32x4_epi32(v, 2); break;
                    default: qg = _mm512_extracti32x4_epi32(v, 3); break;
                    }
                    const __m512 s = _mm512_set1_ps(d * x[b].scales[grp]);
                    _mm512_storeu_ps(y + 16 * grp, _mm512_mul_ps(s, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(qg))));
                }
            }
        }
    }
}

void mf_cpu_reg_dequant_avx512(mf_type_traits *tab) {
    tab[MF_TYPE_F16].to_float = to_float_f16;
    tab[MF_TYPE_BF16].to_float = to_float_bf16;
    tab[MF_TYPE_Q8_0].to_float = to_float_q8_0;
    tab[MF_TYPE_Q4_0].to_float = to_float_q4_0;
    tab[MF_TYPE_Q4_K].to_float = to_float_q4_k;
    tab[MF_TYPE_Q6_K].to_float = to_float_q6_k;
}
