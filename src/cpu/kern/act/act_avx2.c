/* act_avx2.c - SwiGLU on 8 lanes: out = silu(g) * u with silu from
 * mf_silu_ref's operations (ops.c), so both give the same bits. */
#include "cpu/cpu.h"
#include "cpu/kern/attn/exp_avx2.h"

#include <string.h>

/* x * s with s = (x >= 0 ? 1 : t) / (1 + t), t = exp(-|x|) */
static inline __m256 silu8(__m256 x) {
    const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
    const __m256 t = exp8(_mm256_sub_ps(_mm256_setzero_ps(), ax));
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 num = _mm256_blendv_ps(t, one, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_GE_OQ));
    return _mm256_mul_ps(x, _mm256_div_ps(num, _mm256_add_ps(one, t)));
}

void mf_cpu_swiglu_avx2(const float *g, const float *u, float *out, long n) {
    long i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(g + i)), _mm256_loadu_ps(u + i)));
    if (i < n) {
        float a[8] = {0}, b[8] = {0}, o[8];
        memcpy(a, g + i, sizeof(float) * (size_t)(n - i));
        memcpy(b, u + i, sizeof(float) * (size_t)(n - i));
        _mm256_storeu_ps(o, _mm256_mul_ps(silu8(_mm256_loadu_ps(a)), _mm256_loadu_ps(b)));
        memcpy(out + i, o, sizeof(float) * (size_t)(n - i));
    }
}
