/* walk_avx512.c - AVX-512 gather kernels, bitwise equal to walk_kern.c's
 * twins: one fused multiply-add per element, 16 lanes at a time, the tail
 * masked (a lane's operation is the twin's whatever the width). */
#include "vindex/walk_kern.h"
#include "quant/blocks.h"

#include <immintrin.h>
#include <stdint.h>

static void axpy_f32(float a, const void *row, int n, float *acc) {
    const float *w = row;
    const __m512 av = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(av, _mm512_loadu_ps(w + i), _mm512_loadu_ps(acc + i)));
        _mm512_storeu_ps(acc + i + 16, _mm512_fmadd_ps(av, _mm512_loadu_ps(w + i + 16), _mm512_loadu_ps(acc + i + 16)));
    }
    for (; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(acc + i, m, _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, w + i), _mm512_maskz_loadu_ps(m, acc + i)));
    }
}

static void axpy_f16(float a, const void *row, int n, float *acc) {
    const uint16_t *w = row;
    const __m512 av = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + i)));
        _mm512_storeu_ps(acc + i, _mm512_fmadd_ps(av, wv, _mm512_loadu_ps(acc + i)));
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, w + i));
        _mm512_mask_storeu_ps(acc + i, m, _mm512_fmadd_ps(av, wv, _mm512_maskz_loadu_ps(m, acc + i)));
    }
}

static void axpy_q8_0(float a, const void *row, int n, float *acc) {
    const block_q8_0 *w = row;
    const __m512 av = _mm512_set1_ps(a);
    for (int b = 0; b < n / 32; b++) {
        /* d * q exact, so the product is the twin's d * (float)q */
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(w[b].d));
        const __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)w[b].qs)));
        const __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w[b].qs + 16))));
        float *o = acc + 32 * b;
        _mm512_storeu_ps(o, _mm512_fmadd_ps(av, _mm512_mul_ps(d, q0), _mm512_loadu_ps(o)));
        _mm512_storeu_ps(o + 16, _mm512_fmadd_ps(av, _mm512_mul_ps(d, q1), _mm512_loadu_ps(o + 16)));
    }
}

vx_axpy_fn vx_axpy_avx512(mf_type t) {
    switch (t) {
    case MF_TYPE_F32: return axpy_f32;
    case MF_TYPE_F16: return axpy_f16;
    case MF_TYPE_Q8_0: return axpy_q8_0;
    default: return NULL;
    }
}
