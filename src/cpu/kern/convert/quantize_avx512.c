/* quantize_avx512.c - AVX-512 activation quantizers (from_float of F16, BF16,
 * Q8_0, Q8_1, Q8_K), byte-identical to the references, NaN and inf included.
 * The reasoning is quantize_avx2.c's; here 16 lanes at a time, with masked
 * loads for row tails and vpmovdb, which keeps the low byte of each int32
 * exactly as the reference's cast does. */
#if defined(__GNUC__) && !defined(__clang__)
/* this level must run on AVX-512 CPUs without VNNI/BF16: keep the compiler
 * from emitting them (CMake compiles every *_avx512.c with those flags) */
#pragma GCC target("no-avx512vnni,no-avx512bf16")
#endif
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/ref.h"

static inline __mmask16 first16(int64_t c) { return (__mmask16)(c >= 16 ? 0xffff : (1u << c) - 1); }

/* ---------------- F16 / BF16 ---------------- */

static void from_float_f16(const float *x, void *vy, int64_t n) {
    mf_fp16 *y = vy;
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = first16(n - i);
        const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_mask_storeu_epi16(y + i, m, h);
    }
}

static void from_float_bf16(const float *x, void *vy, int64_t n) {
    mf_bf16 *y = vy;
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = first16(n - i);
        const __m512i u = _mm512_castps_si512(_mm512_maskz_loadu_ps(m, x + i));
        /* mf_fp32_to_bf16: NaN -> (u >> 16) | 64, else round to nearest even */
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, abs), inf);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
        __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
        r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtepi32_epi16(r));
    }
}

/* ---------------- Q8_0 / Q8_1 ---------------- */

/* roundf on 16 lanes: truncate, step away from zero when |remainder| >= 1/2 */
static inline __m512 roundf16(__m512 v) {
    const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m512 rem = _mm512_abs_ps(_mm512_sub_ps(v, t));
    const __mmask16 up = _mm512_cmp_ps_mask(rem, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    const __m512 step = _mm512_or_ps(_mm512_set1_ps(1.0f), _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));
    return _mm512_mask_add_ps(t, up, t, step);
}

/* One block of 32 as the Q8_0/Q8_1 references (0 and nothing written when
 * the block holds a NaN: the reference's position-dependent MAX decides). */
static inline int q8_block(const float *x, int8_t qs[32], float *d_out, int *sum_out) {
    const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    if (_mm512_cmp_ps_mask(v0, v0, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(v1, v1, _CMP_UNORD_Q)) return 0;
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m512 vid = _mm512_set1_ps(id);
    const __m512i q0 = _mm512_cvttps_epi32(roundf16(_mm512_mul_ps(v0, vid)));
    const __m512i q1 = _mm512_cvttps_epi32(roundf16(_mm512_mul_ps(v1, vid)));
    _mm_storeu_si128((__m128i *)qs, _mm512_cvtepi32_epi8(q0));
    _mm_storeu_si128((__m128i *)(qs + 16), _mm512_cvtepi32_epi8(q1));
    /* the sum of the stored (low-byte) values */
    const __m512i s0 = _mm512_srai_epi32(_mm512_slli_epi32(q0, 24), 24), s1 = _mm512_srai_epi32(_mm512_slli_epi32(q1, 24), 24);
    *sum_out = _mm512_reduce_add_epi32(_mm512_add_epi32(s0, s1));
    *d_out = d;
    return 1;
}

static void from_float_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        float d;
        int sum;
        if (!q8_block(x, y[b].qs, &d, &sum)) {
            mf_ref_from_float_q8_0(x, &y[b], QK8_0);
            continue;
        }
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    }
}

static void from_float_q8_1(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t b = 0; b < n / QK8_1; b++, x += QK8_1) {
        float d;
        int sum;
        if (!q8_block(x, y[b].qs, &d, &sum)) {
            mf_ref_from_float_q8_1(x, &y[b], QK8_1);
            continue;
        }
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        y[b].s = _cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT);
    }
}

/* ---------------- Q8_K ---------------- */

static void from_float_q8_k(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        /* max |x| ignoring NaN: vmaxps returns its second operand when the first is NaN */
        __m512 m = _mm512_setzero_ps();
        for (int k = 0; k < QK_K / 16; k++) m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)), m);
        const float amax = _mm512_reduce_max_ps(m);
        if (!amax) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        const __m512 va = _mm512_set1_ps(amax);
        float max = 0.0f;
        for (int k = 0; k < QK_K / 16; k++) {
            const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * k)), va, _CMP_EQ_OQ);
            if (hit) {
                max = x[16 * k + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 vs = _mm512_set1_ps(iscale);
        for (int k = 0; k < QK_K / 16; k++) {
            /* mf_nearest_int bit for bit: add 1.5 * 2^23, keep the low mantissa bits */
            const __m512i t = _mm512_castps_si512(_mm512_add_ps(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * k)), _mm512_set1_ps(12582912.0f)));
            __m512i q = _mm512_sub_epi32(_mm512_and_si512(t, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x00400000));
            q = _mm512_min_epi32(q, _mm512_set1_epi32(127));
            _mm_storeu_si128((__m128i *)(y[b].qs + 16 * k), _mm512_cvtepi32_epi8(q));
            const __m512i s = _mm512_srai_epi32(_mm512_slli_epi32(q, 24), 24);
            y[b].bsums[k] = (int16_t)_mm512_reduce_add_epi32(s);
        }
        y[b].d = 1 / iscale;
    }
}

void mf_cpu_reg_quantize_avx512(mf_type_traits *tab) {
    tab[MF_TYPE_F16].from_float = from_float_f16;
    tab[MF_TYPE_BF16].from_float = from_float_bf16;
    tab[MF_TYPE_Q8_0].from_float = from_float_q8_0;
    tab[MF_TYPE_Q8_1].from_float = from_float_q8_1;
    tab[MF_TYPE_Q8_K].from_float = from_float_q8_k;
}
