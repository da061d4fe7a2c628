/* quantize_avx2.c - AVX2 activation quantizers (from_float of F16, BF16, Q8_0,
 * Q8_1, Q8_K), byte-identical to the references, NaN and inf included.
 *
 * What keeps them identical:
 * - F16 uses vcvtps2ph with round-to-nearest-even, which is what the reference
 *   converter computes (fp16.h), quiet-NaN payloads included.
 * - BF16 is the reference's integer rounding, on 8 lanes.
 * - Q8_0/Q8_1 round with roundf (ties away from zero), rebuilt exactly from a
 *   truncation and the exact remainder; the float -> int conversion is the x86
 *   one the reference imitates (INT32_MIN for NaN / out of range), and the byte
 *   kept is the low byte, as the reference's cast keeps it. The block maximum is
 *   order-independent for finite values; a block holding a NaN (whose
 *   left-to-right MAX semantics depend on position) goes to the reference.
 * - Q8_K rounds with the reference's magic-number trick bit for bit; its
 *   maximum ignores NaN in both versions, and the signed maximum is the first
 *   element of largest magnitude, found by index. */
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/blocks.h"
#include "quant/ref.h"

/* ---------------- F16 / BF16 ---------------- */

static void from_float_f16(const float *x, void *vy, int64_t n) {
    mf_fp16 *y = vy;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) y[i] = mf_fp32_to_fp16(x[i]);
}

/* 8 floats -> 8 bf16 as mf_fp32_to_bf16: NaN -> (u >> 16) | 64, else
 * round to nearest even on the top 16 bits. Result in the low 16 bits of each lane. */
static inline __m256i bf16_round8(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i q = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
    return _mm256_blendv_epi8(r, q, is_nan);
}

static void from_float_bf16(const float *x, void *vy, int64_t n) {
    mf_bf16 *y = vy;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i a = bf16_round8(_mm256_loadu_ps(x + i)), b = bf16_round8(_mm256_loadu_ps(x + i + 8));
        /* values are 0..65535: the unsigned-saturating pack keeps them exactly */
        const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), _MM_SHUFFLE(3, 1, 2, 0));
        _mm256_storeu_si256((__m256i *)(y + i), p);
    }
    for (; i < n; i++) y[i] = mf_fp32_to_bf16(x[i]);
}

/* ---------------- Q8_0 / Q8_1 ---------------- */

static inline float hmax8(__m256 v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* roundf on 8 lanes: truncate, then step away from zero when the exact
 * remainder is at least one half. NaN stays NaN, infinities stay. */
static inline __m256 roundf8(__m256 v) {
    const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const __m256 sign = _mm256_and_ps(v, _mm256_set1_ps(-0.0f));
    const __m256 rem = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(v, t));
    const __m256 step = _mm256_and_ps(_mm256_cmp_ps(rem, _mm256_set1_ps(0.5f), _CMP_GE_OQ),
                                      _mm256_or_ps(_mm256_set1_ps(1.0f), sign));
    return _mm256_add_ps(t, step);
}

/* The low bytes of 4 x 8 int32 lanes, in order (a C cast to int8_t of each). */
static inline __m256i low_bytes32(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ff = _mm256_set1_epi32(0xff);
    a = _mm256_and_si256(a, ff);
    b = _mm256_and_si256(b, ff);
    c = _mm256_and_si256(c, ff);
    d = _mm256_and_si256(d, ff);
    const __m256i ab = _mm256_packus_epi32(a, b), cd = _mm256_packus_epi32(c, d);
    const __m256i v = _mm256_packus_epi16(ab, cd); /* a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7 */
    return _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline int has_nan32(const __m256 v[4]) {
    __m256 u = _mm256_cmp_ps(v[0], v[0], _CMP_UNORD_Q);
    for (int k = 1; k < 4; k++) u = _mm256_or_ps(u, _mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
    return _mm256_movemask_ps(u) != 0;
}

/* One 32-element block as the Q8_0/Q8_1 references: writes the 32 bytes and
 * returns d; returns a NaN flag instead (and writes nothing) when the block
 * holds a NaN. */
static inline int q8_block(const float *x, int8_t qs[32], float *d_out) {
    __m256 v[4];
    for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
    if (has_nan32(v)) return 0;
    const __m256 abs = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) m = _mm256_max_ps(m, _mm256_andnot_ps(abs, v[k]));
    const float amax = hmax8(m);
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; k++) q[k] = _mm256_cvttps_epi32(roundf8(_mm256_mul_ps(v[k], vid)));
    _mm256_storeu_si256((__m256i *)qs, low_bytes32(q[0], q[1], q[2], q[3]));
    *d_out = d;
    return 1;
}

static void from_float_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        float d;
        if (!q8_block(x, y[b].qs, &d)) {
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
        if (!q8_block(x, y[b].qs, &d)) {
            mf_ref_from_float_q8_1(x, &y[b], QK8_1);
            continue;
        }
        /* sum of the signed bytes: pairs with maddubs (1 * q), then madd */
        const __m256i p = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)y[b].qs));
        const int sum = mf_hsum_i32_8(_mm256_madd_epi16(p, _mm256_set1_epi16(1)));
        y[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        y[b].s = _cvtss_sh((float)sum * d, _MM_FROUND_TO_NEAREST_INT);
    }
}

/* ---------------- Q8_K ---------------- */

/* mf_nearest_int on 8 lanes, bit for bit (also for NaN and huge values). */
static inline __m256i nearest_int8(__m256 v) {
    const __m256i t = _mm256_castps_si256(_mm256_add_ps(v, _mm256_set1_ps(12582912.0f)));
    return _mm256_sub_epi32(_mm256_and_si256(t, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x00400000));
}

static void from_float_q8_k(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    const __m256 absmask = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        /* max |x| ignoring NaN: vmaxps returns its second operand when the first is NaN */
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < QK_K / 8; k++) m = _mm256_max_ps(_mm256_andnot_ps(absmask, _mm256_loadu_ps(x + 8 * k)), m);
        const float amax = hmax8(m);
        if (!amax) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* the signed value: first element whose magnitude is amax */
        const __m256 va = _mm256_set1_ps(amax);
        float max = 0.0f;
        for (int k = 0; k < QK_K / 8; k++) {
            const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(absmask, _mm256_loadu_ps(x + 8 * k)), va, _CMP_EQ_OQ));
            if (hit) {
                max = x[8 * k + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 vs = _mm256_set1_ps(iscale);
        const __m256i c127 = _mm256_set1_epi32(127);
        for (int k = 0; k < QK_K / 32; k++) {
            __m256i q[4];
            for (int j = 0; j < 4; j++)
                q[j] = _mm256_min_epi32(nearest_int8(_mm256_mul_ps(vs, _mm256_loadu_ps(x + 32 * k + 8 * j))), c127);
            _mm256_storeu_si256((__m256i *)(y[b].qs + 32 * k), low_bytes32(q[0], q[1], q[2], q[3]));
        }
        /* 16-element sums: maddubs(1, q) pairs, madd to quads, then two quads per half-group */
        for (int k = 0; k < QK_K / 32; k++) {
            const __m256i p = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_loadu_si256((const __m256i *)(y[b].qs + 32 * k)));
            const __m256i q4 = _mm256_madd_epi16(p, _mm256_set1_epi16(1)); /* 8 sums of 4 */
            const __m256i h = _mm256_hadd_epi32(q4, q4);                    /* per half: s01 s23 s01 s23 */
            const __m256i g = _mm256_hadd_epi32(h, h);                      /* per half: the 16-sum */
            y[b].bsums[2 * k] = (int16_t)_mm256_extract_epi32(g, 0);
            y[b].bsums[2 * k + 1] = (int16_t)_mm256_extract_epi32(g, 4);
        }
        y[b].d = 1 / iscale;
    }
}

void mf_cpu_reg_quantize_avx2(mf_type_traits *tab) {
    tab[MF_TYPE_F16].from_float = from_float_f16;
    tab[MF_TYPE_BF16].from_float = from_float_bf16;
    tab[MF_TYPE_Q8_0].from_float = from_float_q8_0;
    tab[MF_TYPE_Q8_1].from_float = from_float_q8_1;
    tab[MF_TYPE_Q8_K].from_float = from_float_q8_k;
}
