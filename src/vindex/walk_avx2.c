/* walk_avx2.c - AVX2 gather kernels, bitwise equal to walk_kern.c's twins:
 * one fused multiply-add per element, 8 lanes at a time, the tail element by
 * element with fmaf (the same rounding as a lane's vfmadd). */
#include "vindex/walk_kern.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <immintrin.h>
#include <math.h>
#include <stdint.h>

static void axpy_f32(float a, const void *row, int n, float *acc) {
    const float *w = row;
    const __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(w + i), _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] = fmaf(a, w[i], acc[i]);
}

static void axpy_f16(float a, const void *row, int n, float *acc) {
    const uint16_t *w = row;
    const __m256 av = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 wv = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(w + i)));
        _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(av, wv, _mm256_loadu_ps(acc + i)));
    }
    for (; i < n; i++) acc[i] = fmaf(a, mf_fp16_to_fp32(w[i]), acc[i]);
}

static void axpy_q8_0(float a, const void *row, int n, float *acc) {
    const block_q8_0 *w = row;
    const __m256 av = _mm256_set1_ps(a);
    for (int b = 0; b < n / 32; b++) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(w[b].d));
        float *o = acc + 32 * b;
        for (int c = 0; c < 4; c++) {
            const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(w[b].qs + 8 * c))));
            _mm256_storeu_ps(o + 8 * c, _mm256_fmadd_ps(av, _mm256_mul_ps(d, q), _mm256_loadu_ps(o + 8 * c)));
        }
    }
}

vx_axpy_fn vx_axpy_avx2(mf_type t) {
    switch (t) {
    case MF_TYPE_F32: return axpy_f32;
    case MF_TYPE_F16: return axpy_f16;
    case MF_TYPE_Q8_0: return axpy_q8_0;
    default: return NULL;
    }
}
