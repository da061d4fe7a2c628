/* dot_float_avx2.c - AVX2/FMA dots of F32, F16 and BF16 rows, bitwise equal to
 * the references: 64 float lanes (F32, F16), or 32 lanes of float runs added
 * to double (BF16), in the layout of quant/lanes.h, held as eight 8-float
 * (4-double) accumulators, and folded in the same pairwise order.
 *
 * A tail shorter than a full 64 (32) element step is copied into a zeroed
 * buffer and run as one more step: its zero products add +0 to lanes that
 * have no element, which leaves them unchanged (a lane is never -0). */
#include "cpu/kern/kernels.h"
#include "cpu/kern/simd_avx2.h"
#include "quant/lanes.h"

static void dot_f32(int n, float *s, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    float tx[MF_FDOT_LANES], ty[MF_FDOT_LANES];
    int i = 0;
    for (;;) {
        const float *px = x + i, *py = y + i;
        if (i + MF_FDOT_LANES > n) {
            if (i == n) break;
            memset(tx, 0, sizeof tx);
            memset(ty, 0, sizeof ty);
            memcpy(tx, px, (size_t)(n - i) * sizeof(float));
            memcpy(ty, py, (size_t)(n - i) * sizeof(float));
            px = tx;
            py = ty;
            i = n - MF_FDOT_LANES; /* so that the step below ends the loop */
        }
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(px + 0), _mm256_loadu_ps(py + 0), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(px + 8), _mm256_loadu_ps(py + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(px + 16), _mm256_loadu_ps(py + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(px + 24), _mm256_loadu_ps(py + 24), a3);
        a4 = _mm256_fmadd_ps(_mm256_loadu_ps(px + 32), _mm256_loadu_ps(py + 32), a4);
        a5 = _mm256_fmadd_ps(_mm256_loadu_ps(px + 40), _mm256_loadu_ps(py + 40), a5);
        a6 = _mm256_fmadd_ps(_mm256_loadu_ps(px + 48), _mm256_loadu_ps(py + 48), a6);
        a7 = _mm256_fmadd_ps(_mm256_loadu_ps(px + 56), _mm256_loadu_ps(py + 56), a7);
        i += MF_FDOT_LANES;
    }
    /* fold 64 -> 8 lanes: +32, +16, +8 (register k holds lanes 8k..8k+7) */
    a0 = _mm256_add_ps(a0, a4);
    a1 = _mm256_add_ps(a1, a5);
    a2 = _mm256_add_ps(a2, a6);
    a3 = _mm256_add_ps(a3, a7);
    a0 = _mm256_add_ps(a0, a2);
    a1 = _mm256_add_ps(a1, a3);
    *s = mf_fold8_ps(_mm256_add_ps(a0, a1));
}

/* The last partial step of 16-bit rows: the remaining m elements of x and y
 * copied into zeroed buffers of `lanes` elements, which the step then reads
 * in their place. */
static inline void pad_tail16(const uint16_t **px, const uint16_t **py, int m, uint16_t *tx, uint16_t *ty, int lanes) {
    memset(tx, 0, (size_t)lanes * 2);
    memset(ty, 0, (size_t)lanes * 2);
    memcpy(tx, *px, (size_t)m * 2);
    memcpy(ty, *py, (size_t)m * 2);
    *px = tx;
    *py = ty;
}

static inline __m256 ld_f16(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static void dot_f16(int n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    uint16_t tx[MF_FDOT_LANES], ty[MF_FDOT_LANES];
    int i = 0;
    for (;;) {
        const uint16_t *px = x + i, *py = y + i;
        if (i + MF_FDOT_LANES > n) {
            if (i == n) break;
            pad_tail16(&px, &py, n - i, tx, ty, MF_FDOT_LANES);
            i = n - MF_FDOT_LANES;
        }
        /* products of halves are exact, so the FMA equals the reference's mul + add */
        a0 = _mm256_fmadd_ps(ld_f16(px + 0), ld_f16(py + 0), a0);
        a1 = _mm256_fmadd_ps(ld_f16(px + 8), ld_f16(py + 8), a1);
        a2 = _mm256_fmadd_ps(ld_f16(px + 16), ld_f16(py + 16), a2);
        a3 = _mm256_fmadd_ps(ld_f16(px + 24), ld_f16(py + 24), a3);
        a4 = _mm256_fmadd_ps(ld_f16(px + 32), ld_f16(py + 32), a4);
        a5 = _mm256_fmadd_ps(ld_f16(px + 40), ld_f16(py + 40), a5);
        a6 = _mm256_fmadd_ps(ld_f16(px + 48), ld_f16(py + 48), a6);
        a7 = _mm256_fmadd_ps(ld_f16(px + 56), ld_f16(py + 56), a7);
        i += MF_FDOT_LANES;
    }
    a0 = _mm256_add_ps(a0, a4);
    a1 = _mm256_add_ps(a1, a5);
    a2 = _mm256_add_ps(a2, a6);
    a3 = _mm256_add_ps(a3, a7);
    a0 = _mm256_add_ps(a0, a2);
    a1 = _mm256_add_ps(a1, a3);
    *s = mf_fold8_ps(_mm256_add_ps(a0, a1));
}

/* quant/lanes.h order 4, with the lanes held out of place: a 32-bit word
 * of bf16 holds columns 2w and 2w + 1, and a shift (even column) or a mask
 * (odd column) turns it into that column's float, with no widening
 * shuffle. So of the 32 lanes, register E0 holds the even lanes 0..14, O0
 * the odd 1..15, E1 and O1 the same of 16..31. Each lane's float run (the
 * product of two bf16 is exact in float: fma = mul + add) and its double
 * sums are the reference's; the fold at the end pairs the same lanes in
 * the same order (+16, +8, +4, then mf_fold4_pd), so the result has the
 * reference's bits. */
static void dot_bf16(int n, float *s, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256d a[8]; /* per run register q (E0, O0, E1, O1): a[2q] its first 4 lanes, a[2q + 1] the next 4 */
    for (int k = 0; k < 8; k++) a[k] = _mm256_setzero_pd();
    uint16_t tx[MF_DDOT_LANES], ty[MF_DDOT_LANES];
    int i = 0;
    while (i < n) {
        __m256 r[4];
        for (int k = 0; k < 4; k++) r[k] = _mm256_setzero_ps();
        for (int t = 0; t < MF_BF16_RUN && i < n; t++) {
            const uint16_t *px = x + i, *py = y + i;
            if (i + MF_DDOT_LANES > n) /* zero-filled lanes add +0: a run is never -0 */
                pad_tail16(&px, &py, n - i, tx, ty, MF_DDOT_LANES);
            for (int h = 0; h < 2; h++) {
                const __m256i vx16 = _mm256_loadu_si256((const __m256i *)(px + 16 * h));
                const __m256i vy16 = _mm256_loadu_si256((const __m256i *)(py + 16 * h));
                r[2 * h] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(vx16, 16)),
                                           _mm256_castsi256_ps(_mm256_slli_epi32(vy16, 16)), r[2 * h]);
                r[2 * h + 1] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(vx16, hi)),
                                               _mm256_castsi256_ps(_mm256_and_si256(vy16, hi)), r[2 * h + 1]);
            }
            i += MF_DDOT_LANES;
        }
        for (int k = 0; k < 4; k++) {
            a[2 * k] = _mm256_add_pd(a[2 * k], _mm256_cvtps_pd(_mm256_castps256_ps128(r[k])));
            a[2 * k + 1] = _mm256_add_pd(a[2 * k + 1], _mm256_cvtps_pd(_mm256_extractf128_ps(r[k], 1)));
        }
    }
    /* +16: lanes l and l + 16 sit at the same place of E0/E1 and O0/O1 */
    for (int k = 0; k < 4; k++) a[k] = _mm256_add_pd(a[k], a[k + 4]);
    /* +8: even lanes {0,2,4,6} + {8,10,12,14}, odd {1,3,5,7} + {9,11,13,15} */
    const __m256d ev = _mm256_add_pd(a[0], a[1]), od = _mm256_add_pd(a[2], a[3]);
    /* +4: lanes 0 + 4 and 2 + 6 from the even, 1 + 5 and 3 + 7 from the odd */
    const __m128d e = _mm_add_pd(_mm256_castpd256_pd128(ev), _mm256_extractf128_pd(ev, 1)); /* lanes 0, 2 */
    const __m128d o = _mm_add_pd(_mm256_castpd256_pd128(od), _mm256_extractf128_pd(od, 1)); /* lanes 1, 3 */
    const __m256d l4 = _mm256_set_m128d(_mm_unpackhi_pd(e, o), _mm_unpacklo_pd(e, o));   /* lanes 0, 1, 2, 3 */
    *s = (float)mf_fold4_pd(l4);
}

void mf_cpu_reg_dot_float_avx2(mf_type_traits *tab) {
    tab[MF_TYPE_F32].vec_dot = dot_f32;
    tab[MF_TYPE_F16].vec_dot = dot_f16;
    tab[MF_TYPE_BF16].vec_dot = dot_bf16;
}
