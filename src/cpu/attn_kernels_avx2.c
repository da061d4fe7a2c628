/* attn_kernels_avx2.c - AVX2 + FMA + F16C attention inner loops (compiled with
 * those flags; selected only after a CPUID check). */
#include "cpu/attn_kernels.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <immintrin.h>

static const float *load_f32(const uint8_t *row, size_t off, int n, float *buf) {
    (void)n;
    (void)buf;
    return (const float *)row + off;
}

static const float *load_f16(const uint8_t *row, size_t off, int n, float *buf) {
    const mf_fp16 *h = (const mf_fp16 *)row + off;
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(buf + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    for (; i < n; i++) buf[i] = mf_fp16_to_fp32(h[i]);
    return buf;
}

static const float *load_q8_0(const uint8_t *row, size_t off, int n, float *buf) {
    const block_q8_0 *b = (const block_q8_0 *)row;
    int i = 0;
    /* whole 8-element groups that stay inside one block */
    while (i < n) {
        const size_t e = off + (size_t)i;
        const block_q8_0 *blk = &b[e / QK8_0];
        const int in = (int)(e % QK8_0);
        if (in % 8 == 0 && in + 8 <= QK8_0 && i + 8 <= n) {
            const __m256 d = _mm256_set1_ps(mf_fp16_to_fp32(blk->d));
            const __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk->qs + in)));
            _mm256_storeu_ps(buf + i, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
            i += 8;
        } else {
            buf[i] = (float)blk->qs[in] * mf_fp16_to_fp32(blk->d);
            i++;
        }
    }
    return buf;
}

static float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static float dot(const float *a, const float *b, int n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = hsum(_mm256_add_ps(s0, s1));
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

static void axpy(float *acc, float s, const float *v, int n) {
    const __m256 vs = _mm256_set1_ps(s);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] += s * v[i];
}

static void scale_add(float *acc, float c, const float *v, int n) {
    const __m256 vc = _mm256_set1_ps(c);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(_mm256_loadu_ps(acc + i), vc, _mm256_loadu_ps(v + i)));
    for (; i < n; i++) acc[i] = acc[i] * c + v[i];
}

static const mf_attn_kernels g_avx2[3] = {
    [MF_KV_F32] = {load_f32, load_f32, dot, axpy, scale_add, "avx2 f32"},
    [MF_KV_F16] = {load_f16, load_f16, dot, axpy, scale_add, "avx2 f16"},
    [MF_KV_Q8_0] = {load_q8_0, load_q8_0, dot, axpy, scale_add, "avx2 q8_0"},
};

const mf_attn_kernels *mf_attn_kernels_avx2(mf_kv_type t) { return &g_avx2[t]; }
