/* dot_float_avx512.c - AVX-512 dots of F32, F16 and BF16 rows, bitwise equal to
 * the references: 64 float lanes (F32, F16) as four 16-float accumulators, or
 * 32 lanes of float runs (BF16) added to four 8-double accumulators, in the
 * layout and fold order of quant/lanes.h. The last partial step uses masked
 * loads (zero elsewhere) and masked FMAs, so lanes without an element keep
 * their value.
 *
 * BF16 is widened to float (a shift), not fed to vdpbf16ps: that
 * instruction rounds its pair sums and flushes subnormals, which no plain-C
 * reference reproduces cheaply. */
#if defined(__GNUC__) && !defined(__clang__)
/* this level must run on AVX-512 CPUs without VNNI/BF16: keep the compiler
 * from emitting them (CMake compiles every *_avx512.c with those flags) */
#pragma GCC target("no-avx512vnni,no-avx512bf16")
#endif
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/lanes.h"

/* 16 float lanes -> 8, then the AVX2 fold (lanes.h order) */
static inline float fold16(__m512 v) {
    return mf_fold8_ps(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

/* mask of the first c (0..16) lanes */
static inline __mmask16 first16(int c) { return (__mmask16)(c >= 16 ? 0xffff : (1u << c) - 1); }

static void dot_f32(int n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + MF_FDOT_LANES <= n; i += MF_FDOT_LANES) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 32), _mm512_loadu_ps(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 48), _mm512_loadu_ps(y + i + 48), a3);
    }
    if (i < n) {
        const int r = n - i;
        __mmask16 m;
        m = first16(r);
        a0 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i), a0, m);
        m = first16(r - 16 > 0 ? r - 16 : 0);
        a1 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i + 16), _mm512_maskz_loadu_ps(m, y + i + 16), a1, m);
        m = first16(r - 32 > 0 ? r - 32 : 0);
        a2 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i + 32), _mm512_maskz_loadu_ps(m, y + i + 32), a2, m);
        m = first16(r - 48 > 0 ? r - 48 : 0);
        a3 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m, x + i + 48), _mm512_maskz_loadu_ps(m, y + i + 48), a3, m);
    }
    /* fold 64 -> 16: +32, +16 (register k holds lanes 16k..16k+15) */
    a0 = _mm512_add_ps(a0, a2);
    a1 = _mm512_add_ps(a1, a3);
    *s = fold16(_mm512_add_ps(a0, a1));
}

static inline __m512 ld_f16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline __m512 ld_f16_part(const uint16_t *p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }

static void dot_f16(int n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    /* products of halves are exact, so the FMA equals the reference's mul + add */
    for (; i + MF_FDOT_LANES <= n; i += MF_FDOT_LANES) {
        a0 = _mm512_fmadd_ps(ld_f16(x + i), ld_f16(y + i), a0);
        a1 = _mm512_fmadd_ps(ld_f16(x + i + 16), ld_f16(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(ld_f16(x + i + 32), ld_f16(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(ld_f16(x + i + 48), ld_f16(y + i + 48), a3);
    }
    if (i < n) {
        const int r = n - i;
        __mmask16 m;
        m = first16(r);
        a0 = _mm512_mask3_fmadd_ps(ld_f16_part(x + i, m), ld_f16_part(y + i, m), a0, m);
        m = first16(r - 16 > 0 ? r - 16 : 0);
        a1 = _mm512_mask3_fmadd_ps(ld_f16_part(x + i + 16, m), ld_f16_part(y + i + 16, m), a1, m);
        m = first16(r - 32 > 0 ? r - 32 : 0);
        a2 = _mm512_mask3_fmadd_ps(ld_f16_part(x + i + 32, m), ld_f16_part(y + i + 32, m), a2, m);
        m = first16(r - 48 > 0 ? r - 48 : 0);
        a3 = _mm512_mask3_fmadd_ps(ld_f16_part(x + i + 48, m), ld_f16_part(y + i + 48, m), a3, m);
    }
    a0 = _mm512_add_ps(a0, a2);
    a1 = _mm512_add_ps(a1, a3);
    *s = fold16(_mm512_add_ps(a0, a1));
}

/* 16 bf16 (masked) -> 16 floats (a bf16 is the top half of a float) */
static inline __m512 ld_bf16(const uint16_t *p, __mmask16 m) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
}

static inline __m512 ld_bf16_full(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

/* a run's 16 float lanes added to their two 8-double lanes */
static inline void run_to_d(__m512 r, __m512d *lo, __m512d *hi) {
    *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(r)));
    *hi = _mm512_add_pd(*hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(r, 1)));
}

/* quant/lanes.h order 4: lanes 0-15 and 16-31 as two float runs (the
 * product of two bf16 is exact in float: fma = mul + add), added to four
 * 8-double lanes every MF_BF16_RUN steps of 32 */
static void dot_bf16(int n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    while (i < n) {
        __m512 r0 = _mm512_setzero_ps(), r1 = r0;
        /* zero-filled lanes add +0 * +0: a run is never -0, so it is unchanged */
        for (int t = 0; t < MF_BF16_RUN && i < n; t++, i += MF_DDOT_LANES) {
            const int rem = n - i;
            if (rem >= 32) { /* masked loads only for the tail: streamed from memory they ran 5x slower */
                r0 = _mm512_fmadd_ps(ld_bf16_full(x + i), ld_bf16_full(y + i), r0);
                r1 = _mm512_fmadd_ps(ld_bf16_full(x + i + 16), ld_bf16_full(y + i + 16), r1);
                continue;
            }
            const __mmask16 m0 = first16(rem), m1 = first16(rem > 16 ? rem - 16 : 0);
            r0 = _mm512_fmadd_ps(ld_bf16(x + i, m0), ld_bf16(y + i, m0), r0);
            r1 = _mm512_fmadd_ps(ld_bf16(x + i + 16, m1), ld_bf16(y + i + 16, m1), r1);
        }
        run_to_d(r0, &a0, &a1);
        run_to_d(r1, &a2, &a3);
    }
    /* 32 -> 8 double lanes: +16, +8; then +4 (256-bit halves) and the AVX2 fold */
    a0 = _mm512_add_pd(a0, a2);
    a1 = _mm512_add_pd(a1, a3);
    a0 = _mm512_add_pd(a0, a1);
    *s = (float)mf_fold4_pd(_mm256_add_pd(_mm512_castpd512_pd256(a0), _mm512_extractf64x4_pd(a0, 1)));
}

void mf_cpu_reg_dot_float_avx512(mf_type_traits *tab) {
    tab[MF_TYPE_F32].vec_dot = dot_f32;
    tab[MF_TYPE_F16].vec_dot = dot_f16;
    tab[MF_TYPE_BF16].vec_dot = dot_bf16;
}
