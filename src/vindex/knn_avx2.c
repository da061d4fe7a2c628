/* knn_avx2.c - AVX2 gate KNN kernels, bitwise equal to knn_kern.c's twins:
 * the same 8 lanes per row and query, products and adds kept separate. A
 * tile is 4 rows x 2 queries (8 independent accumulators, so the add latency
 * is hidden) and each row chunk is loaded once per tile. */
#include "vindex/knn_kern.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <immintrin.h>
#include <stdint.h>

static inline float hsum(__m256 v) {
    float l[8];
    _mm256_storeu_ps(l, v);
    return vx_reduce8(l);
}

static inline __m256 ld_f32(const void *p, int i) { return _mm256_loadu_ps((const float *)p + i); }
static inline __m256 ld_f16(const void *p, int i) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)p + i)));
}
static inline float el_f32(const void *p, int i) { return ((const float *)p)[i]; }
static inline float el_f16(const void *p, int i) { return mf_fp16_to_fp32(((const uint16_t *)p)[i]); }

#define FLOAT_KERNEL(name, LD, EL)                                                                                     \
    static void name(const void *rows, size_t rb, int nr, const float *x, size_t xs, int nx, int n, float *s,         \
                     size_t ss) {                                                                                      \
        const int n8 = n & ~7;                                                                                         \
        int r = 0;                                                                                                     \
        for (; r + 4 <= nr; r += 4) {                                                                                  \
            const uint8_t *w0 = (const uint8_t *)rows + (size_t)r * rb;                                                \
            const void *w[4] = {w0, w0 + rb, w0 + 2 * rb, w0 + 3 * rb};                                                \
            int q = 0;                                                                                                 \
            for (; q + 2 <= nx; q += 2) {                                                                              \
                const float *x0 = x + (size_t)q * xs, *x1 = x0 + xs;                                                   \
                __m256 a[4][2];                                                                                        \
                __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00,   \
                       a31 = a00;                                                                                      \
                for (int i = 0; i < n8; i += 8) {                                                                      \
                    const __m256 v0 = _mm256_loadu_ps(x0 + i), v1 = _mm256_loadu_ps(x1 + i);                           \
                    const __m256 w0v = LD(w[0], i), w1v = LD(w[1], i), w2v = LD(w[2], i), w3v = LD(w[3], i);           \
                    a00 = _mm256_add_ps(a00, _mm256_mul_ps(w0v, v0)), a01 = _mm256_add_ps(a01, _mm256_mul_ps(w0v, v1)); \
                    a10 = _mm256_add_ps(a10, _mm256_mul_ps(w1v, v0)), a11 = _mm256_add_ps(a11, _mm256_mul_ps(w1v, v1)); \
                    a20 = _mm256_add_ps(a20, _mm256_mul_ps(w2v, v0)), a21 = _mm256_add_ps(a21, _mm256_mul_ps(w2v, v1)); \
                    a30 = _mm256_add_ps(a30, _mm256_mul_ps(w3v, v0)), a31 = _mm256_add_ps(a31, _mm256_mul_ps(w3v, v1)); \
                }                                                                                                      \
                a[0][0] = a00, a[0][1] = a01, a[1][0] = a10, a[1][1] = a11;                                            \
                a[2][0] = a20, a[2][1] = a21, a[3][0] = a30, a[3][1] = a31;                                            \
                for (int k = 0; k < 4; k++) {                                                                          \
                    float t0 = hsum(a[k][0]), t1 = hsum(a[k][1]);                                                      \
                    for (int i = n8; i < n; i++) {                                                                     \
                        const float p0 = EL(w[k], i) * x0[i], p1 = EL(w[k], i) * x1[i];                                \
                        t0 = t0 + p0, t1 = t1 + p1;                                                                    \
                    }                                                                                                  \
                    s[(size_t)q * ss + r + k] = t0;                                                                    \
                    s[(size_t)(q + 1) * ss + r + k] = t1;                                                              \
                }                                                                                                      \
            }                                                                                                          \
            for (; q < nx; q++) {                                                                                      \
                const float *x0 = x + (size_t)q * xs;                                                                  \
                __m256 a[4];                                                                                           \
                __m256 b0 = _mm256_setzero_ps(), b1 = b0, b2 = b0, b3 = b0;                                            \
                for (int i = 0; i < n8; i += 8) {                                                                      \
                    const __m256 v0 = _mm256_loadu_ps(x0 + i);                                                         \
                    b0 = _mm256_add_ps(b0, _mm256_mul_ps(LD(w[0], i), v0));                                            \
                    b1 = _mm256_add_ps(b1, _mm256_mul_ps(LD(w[1], i), v0));                                            \
                    b2 = _mm256_add_ps(b2, _mm256_mul_ps(LD(w[2], i), v0));                                            \
                    b3 = _mm256_add_ps(b3, _mm256_mul_ps(LD(w[3], i), v0));                                            \
                }                                                                                                      \
                a[0] = b0, a[1] = b1, a[2] = b2, a[3] = b3;                                                            \
                for (int k = 0; k < 4; k++) {                                                                          \
                    float t0 = hsum(a[k]);                                                                             \
                    for (int i = n8; i < n; i++) {                                                                     \
                        const float p0 = EL(w[k], i) * x0[i];                                                          \
                        t0 = t0 + p0;                                                                                  \
                    }                                                                                                  \
                    s[(size_t)q * ss + r + k] = t0;                                                                    \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (; r < nr; r++) {                                                                                          \
            const void *w0 = (const uint8_t *)rows + (size_t)r * rb;                                                   \
            for (int q = 0; q < nx; q++) {                                                                             \
                const float *x0 = x + (size_t)q * xs;                                                                  \
                __m256 a = _mm256_setzero_ps();                                                                        \
                for (int i = 0; i < n8; i += 8) a = _mm256_add_ps(a, _mm256_mul_ps(LD(w0, i), _mm256_loadu_ps(x0 + i))); \
                float t0 = hsum(a);                                                                                    \
                for (int i = n8; i < n; i++) {                                                                         \
                    const float p0 = EL(w0, i) * x0[i];                                                                \
                    t0 = t0 + p0;                                                                                      \
                }                                                                                                      \
                s[(size_t)q * ss + r] = t0;                                                                            \
            }                                                                                                          \
        }                                                                                                              \
    }

FLOAT_KERNEL(dot_f32, ld_f32, el_f32)
FLOAT_KERNEL(dot_f16, ld_f16, el_f16)

/* the block scale: F16C's conversion (exact, as the twin's integer one) */
static inline float d16(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

/* lane j of a block: q[j]x[j] + q[8+j]x[8+j] + q[16+j]x[16+j] + q[24+j]x[24+j], in that order */
static inline __m256 q8_block(const block_q8_0 *b, const float *xb) {
    __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)b->qs))),
                             _mm256_loadu_ps(xb));
    for (int c = 1; c < 4; c++) {
        const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + 8 * c))));
        t = _mm256_add_ps(t, _mm256_mul_ps(q, _mm256_loadu_ps(xb + 8 * c)));
    }
    return t;
}

static void dot_q8_0(const void *rows, size_t rb, int nr, const float *x, size_t xs, int nx, int n, float *s,
                     size_t ss) {
    const int nb = n / 32;
    int r = 0;
    for (; r + 4 <= nr; r += 4) {
        const block_q8_0 *w[4];
        for (int k = 0; k < 4; k++) w[k] = (const block_q8_0 *)((const uint8_t *)rows + (size_t)(r + k) * rb);
        for (int q = 0; q < nx; q++) {
            const float *x0 = x + (size_t)q * xs;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int b = 0; b < nb; b++) {
                const float *xb = x0 + 32 * b;
                a0 = _mm256_add_ps(a0, _mm256_mul_ps(_mm256_set1_ps(d16(w[0][b].d)), q8_block(&w[0][b], xb)));
                a1 = _mm256_add_ps(a1, _mm256_mul_ps(_mm256_set1_ps(d16(w[1][b].d)), q8_block(&w[1][b], xb)));
                a2 = _mm256_add_ps(a2, _mm256_mul_ps(_mm256_set1_ps(d16(w[2][b].d)), q8_block(&w[2][b], xb)));
                a3 = _mm256_add_ps(a3, _mm256_mul_ps(_mm256_set1_ps(d16(w[3][b].d)), q8_block(&w[3][b], xb)));
            }
            s[(size_t)q * ss + r] = hsum(a0), s[(size_t)q * ss + r + 1] = hsum(a1);
            s[(size_t)q * ss + r + 2] = hsum(a2), s[(size_t)q * ss + r + 3] = hsum(a3);
        }
    }
    for (; r < nr; r++) {
        const block_q8_0 *w0 = (const block_q8_0 *)((const uint8_t *)rows + (size_t)r * rb);
        for (int q = 0; q < nx; q++) {
            const float *x0 = x + (size_t)q * xs;
            __m256 a = _mm256_setzero_ps();
            for (int b = 0; b < nb; b++)
                a = _mm256_add_ps(a, _mm256_mul_ps(_mm256_set1_ps(mf_fp16_to_fp32(w0[b].d)), q8_block(&w0[b], x0 + 32 * b)));
            s[(size_t)q * ss + r] = hsum(a);
        }
    }
}

vx_dot_fn vx_dot_avx2(mf_type t) {
    switch (t) {
    case MF_TYPE_F32: return dot_f32;
    case MF_TYPE_F16: return dot_f16;
    case MF_TYPE_Q8_0: return dot_q8_0;
    default: return NULL;
    }
}
