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

/* a run's 16 float lanes added to their two 8-double lanes */
static inline void run_to_d(__m512 r, __m512d *lo, __m512d *hi) {
    *lo = _mm512_add_pd(*lo, _mm512_cvtps_pd(_mm512_castps512_ps256(r)));
    *hi = _mm512_add_pd(*hi, _mm512_cvtps_pd(_mm512_extractf32x8_ps(r, 1)));
}

/* quant/lanes.h order 4, with the lanes held out of place: a 32-bit word
 * of bf16 holds columns 2w and 2w + 1, and a shift (even column) or a mask
 * (odd column) turns it into that column's float with no widening shuffle.
 * So register E holds the even lanes 0, 2, .., 30 and O the odd ones. Each
 * lane's float run (the product of two bf16 is exact in float: fma = mul +
 * add) and its double sums are the reference's, and the fold at the end
 * pairs the same lanes in the same order (+16, +8, +4, mf_fold4_pd), so
 * the bits are the reference's. Masked loads only for the tail: on every
 * step they ran 5x slower streamed from memory. */
static void dot_bf16(int n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    /* ae: even lanes 0..14 (ae[0]) and 16..30 (ae[1]); ao: the odd ones */
    __m512d ae[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()}, ao[2] = {ae[0], ae[0]};
    int i = 0;
    while (i < n) {
        __m512 re = _mm512_setzero_ps(), ro = re;
        /* zero-filled lanes add +0 * +0: a run is never -0, so it is unchanged */
        for (int t = 0; t < MF_BF16_RUN && i < n; t++, i += MF_DDOT_LANES) {
            const int rem = n - i;
            const __mmask32 m = rem >= 32 ? 0xffffffffu : (__mmask32)((1u << rem) - 1);
            const __m512i vx32 = rem >= 32 ? _mm512_loadu_si512(x + i) : _mm512_maskz_loadu_epi16(m, x + i);
            const __m512i vy32 = rem >= 32 ? _mm512_loadu_si512(y + i) : _mm512_maskz_loadu_epi16(m, y + i);
            re = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(vx32, 16)),
                                 _mm512_castsi512_ps(_mm512_slli_epi32(vy32, 16)), re);
            ro = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_and_si512(vx32, hi)),
                                 _mm512_castsi512_ps(_mm512_and_si512(vy32, hi)), ro);
        }
        run_to_d(re, &ae[0], &ae[1]);
        run_to_d(ro, &ao[0], &ao[1]);
    }
    /* +16: lanes 2w and 2w + 16 sit at place w of ae[0] and ae[1] (odd alike) */
    const __m512d ev = _mm512_add_pd(ae[0], ae[1]), od = _mm512_add_pd(ao[0], ao[1]);
    /* +8: even lanes {0, 2, 4, 6} + {8, .., 14}; odd {1, .., 7} + {9, .., 15} */
    const __m256d e8 = _mm256_add_pd(_mm512_castpd512_pd256(ev), _mm512_extractf64x4_pd(ev, 1));
    const __m256d o8 = _mm256_add_pd(_mm512_castpd512_pd256(od), _mm512_extractf64x4_pd(od, 1));
    /* +4: lanes 0 + 4 and 2 + 6 from the even, 1 + 5 and 3 + 7 from the odd */
    const __m128d e = _mm_add_pd(_mm256_castpd256_pd128(e8), _mm256_extractf128_pd(e8, 1));
    const __m128d o = _mm_add_pd(_mm256_castpd256_pd128(o8), _mm256_extractf128_pd(o8, 1));
    *s = (float)mf_fold4_pd(_mm256_set_m128d(_mm_unpackhi_pd(e, o), _mm_unpacklo_pd(e, o)));
}

void mf_cpu_reg_dot_float_avx512(mf_type_traits *tab) {
    tab[MF_TYPE_F32].vec_dot = dot_f32;
    tab[MF_TYPE_F16].vec_dot = dot_f16;
    tab[MF_TYPE_BF16].vec_dot = dot_bf16;
}
