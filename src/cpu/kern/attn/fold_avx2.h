/* fold_avx2.h - the dots' 8-lane fold for eight dots at once (the AVX2 and
 * AVX-512 attention kernels, which must fold alike to stay bitwise the
 * scalar set). Include after <immintrin.h> in a file built with AVX. */
#ifndef MF_CPU_ATTN_FOLD_AVX2_H
#define MF_CPU_ATTN_FOLD_AVX2_H

#include <immintrin.h>

/* fold8 of eight vectors at once: lane i of the result = fold8(s[i]), with
 * the same additions in the same order (halves, then pairs of pairs, then
 * the last pair), done on transposed data instead of one vector at a time */
static inline __m256 fold8x8(const __m256 s[8]) {
    __m256 t[4], u[2];
    #pragma GCC unroll 4
    for (int i = 0; i < 4; i++) /* [s_i halves summed | s_(i+4) halves summed] */
        t[i] = _mm256_add_ps(_mm256_permute2f128_ps(s[i], s[i + 4], 0x20), _mm256_permute2f128_ps(s[i], s[i + 4], 0x31));
    #pragma GCC unroll 2
    for (int i = 0; i < 2; i++) { /* lanes 0+2, 1+3 of two sources, side by side */
        const __m256d a = _mm256_castps_pd(t[2 * i]), b = _mm256_castps_pd(t[2 * i + 1]);
        u[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)), _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
    }
    return _mm256_add_ps(_mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

#endif
