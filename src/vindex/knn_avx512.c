/* knn_avx512.c - AVX-512 gate KNN kernels, bitwise equal to knn_kern.c's
 * scalar twins (so the KNN's answer does not depend on the CPU level).
 *
 * The twins fix 8 lanes per row (element i to lane i % 8, products and adds
 * kept separate). A 512-bit register here holds two rows' 8 lanes: row A in
 * lanes 0-7 and row B in lanes 8-15, against the query's 8 elements
 * broadcast to both halves. Each lane then sees exactly the twin's operations
 * in the twin's order, and each half reduces with vx_reduce8 as the twin
 * does. A tile is 16 rows (8 register pairs, 8 independent accumulators to
 * hide the add latency) against one query, or 8 rows against two queries
 * when there are several.
 *
 * f16 and q8_0 rows prefetch the bytes they are at in the row one tile on
 * (a prefetch never faults, past the last row too): one thread's row
 * streams alone did not keep DRAM busy. f32 does not: its scan was at the
 * read ceiling without, and the prefetches halved its rate in L2.
 *
 * f16 widens with vcvtph2ps on 512 bits (exact, as the twin's conversion);
 * q8_0 widens int8 -> int32 -> float (exact) and scales each 32-block by its
 * f16 d (exact) after the block's four products are summed, as the twin. */
#include "vindex/knn_kern.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <immintrin.h>
#include <stdint.h>

/* the two rows' sums: lanes 0-7 and 8-15, each in the twin's order */
static inline void hsum2(__m512 v, float *a, float *b) {
    float l[16];
    _mm512_storeu_ps(l, v);
    *a = vx_reduce8(l);
    *b = vx_reduce8(l + 8);
}

/* elements i..i+7 of rows A and B as one register */
static inline __m512 ld2_f32(const void *a, const void *b, int i) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps((const float *)a + i)),
                              _mm256_loadu_ps((const float *)b + i), 1);
}
static inline __m512 ld2_f16(const void *a, const void *b, int i) {
    const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)((const uint16_t *)a + i))),
                                              _mm_loadu_si128((const __m128i *)((const uint16_t *)b + i)), 1);
    return _mm512_cvtph_ps(h);
}
static inline float el_f32(const void *p, int i) { return ((const float *)p)[i]; }
static inline float el_f16(const void *p, int i) { return mf_fp16_to_fp32(((const uint16_t *)p)[i]); }
/* x[i..i+7] in both halves */
static inline __m512 bx(const float *x, int i) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(x + i)); }

/* The twin's tail: elements n8..n-1 added one by one after the reduction. */
#define TAIL(EL, w, x0, t)                                                                                             \
    for (int i_ = n8; i_ < n; i_++) {                                                                                  \
        const float p_ = EL(w, i_) * (x0)[i_];                                                                         \
        t = t + p_;                                                                                                    \
    }

/* P register pairs (2P rows starting at w[0]) against Q queries: the rows'
 * scores for each query into s. */
#define FLOAT_TILE(LD2, EL, P, Q, WIDE)                                                                                \
    do {                                                                                                               \
        __m512 acc[P][Q];                                                                                              \
        _Pragma("GCC unroll 16") for (int p = 0; p < P; p++) {                                                         \
            _Pragma("GCC unroll 2") for (int q = 0; q < Q; q++) acc[p][q] = _mm512_setzero_ps();                       \
        }                                                                                                              \
        int i0 = 0;                                                                                                    \
        /* f32: 16 elements of each row per load, halves regrouped by row (elements i..i+7 then i+8..i+15, \
         * the twin's order per lane) */                                                                               \
        for (; WIDE && i0 + 16 <= n8; i0 += 16) {                                                                      \
            __m512 xl[Q], xh[Q];                                                                                       \
            _Pragma("GCC unroll 2") for (int q = 0; q < Q; q++) xl[q] = bx(xq[q], i0), xh[q] = bx(xq[q], i0 + 8);      \
            _Pragma("GCC unroll 16") for (int p = 0; p < P; p++) {                                                     \
                const __m512 wa = _mm512_loadu_ps((const float *)w[2 * p] + i0);                                       \
                const __m512 wb = _mm512_loadu_ps((const float *)w[2 * p + 1] + i0);                                   \
                const __m512 lo = _mm512_shuffle_f32x4(wa, wb, 0x44), hi = _mm512_shuffle_f32x4(wa, wb, 0xEE);        \
                _Pragma("GCC unroll 2") for (int q = 0; q < Q; q++) {                                                  \
                    acc[p][q] = _mm512_add_ps(acc[p][q], _mm512_mul_ps(lo, xl[q]));                                    \
                    acc[p][q] = _mm512_add_ps(acc[p][q], _mm512_mul_ps(hi, xh[q]));                                    \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (int i = i0; i < n8; i += 8) {                                                                             \
            __m512 xv[Q];                                                                                              \
            _Pragma("GCC unroll 2") for (int q = 0; q < Q; q++) xv[q] = bx(xq[q], i);                                  \
            _Pragma("GCC unroll 16") for (int p = 0; p < P; p++) {                                                     \
                if (!WIDE && (i & 31) == 0) { /* f16: a line per row every 4 steps */                                  \
                    _mm_prefetch((const char *)((uintptr_t)w[2 * p] + 2 * P * rb + 2 * (size_t)i), _MM_HINT_T0);       \
                    _mm_prefetch((const char *)((uintptr_t)w[2 * p + 1] + 2 * P * rb + 2 * (size_t)i), _MM_HINT_T0);   \
                }                                                                                                      \
                const __m512 wv = LD2(w[2 * p], w[2 * p + 1], i);                                                      \
                _Pragma("GCC unroll 2") for (int q = 0; q < Q; q++) {                                                  \
                    acc[p][q] = _mm512_add_ps(acc[p][q], _mm512_mul_ps(wv, xv[q]));                                    \
                }                                                                                                      \
            }                                                                                                          \
        }                                                                                                              \
        for (int p = 0; p < P; p++)                                                                                    \
            for (int q = 0; q < Q; q++) {                                                                              \
                float ta, tb;                                                                                          \
                hsum2(acc[p][q], &ta, &tb);                                                                            \
                TAIL(EL, w[2 * p], xq[q], ta)                                                                          \
                TAIL(EL, w[2 * p + 1], xq[q], tb)                                                                      \
                s[(size_t)(q0 + q) * ss + r + 2 * p] = ta;                                                             \
                s[(size_t)(q0 + q) * ss + r + 2 * p + 1] = tb;                                                         \
            }                                                                                                          \
    } while (0)

#define FLOAT_KERNEL(name, LD2, EL, WIDE)                                                                                    \
    static void name(const void *rows, size_t rb, int nr, const float *x, size_t xs, int nx, int n, float *s,         \
                     size_t ss) {                                                                                      \
        const int n8 = n & ~7;                                                                                         \
        int r = 0;                                                                                                     \
        for (; r < nr;) {                                                                                              \
            const void *w[16];                                                                                         \
            const int left = nr - r;                                                                                   \
            /* one query: 16 rows per tile; several: 8 rows x 2 queries (the rows stay in L1 across the  \
             * queries); then pairs, an odd last row paired with itself */                                             \
            const int tr = left >= 16 && nx == 1 ? 16 : left >= 8 ? 8 : 2;                                             \
            for (int k = 0; k < tr; k++)                                                                               \
                w[k] = (const uint8_t *)rows + (size_t)(r + (k < left ? k : left - 1)) * rb;                           \
            if (tr == 16) {                                                                                            \
                for (int q0 = 0; q0 < nx; q0++) {                                                                      \
                    const float *xq[1] = {x + (size_t)q0 * xs};                                                        \
                    FLOAT_TILE(LD2, EL, 8, 1, WIDE);                                                                         \
                }                                                                                                      \
                r += 16;                                                                                               \
                continue;                                                                                              \
            }                                                                                                          \
            if (tr == 8) {                                                                                             \
                int q0 = 0;                                                                                            \
                for (; q0 + 2 <= nx; q0 += 2) {                                                                        \
                    const float *xq[2] = {x + (size_t)q0 * xs, x + (size_t)(q0 + 1) * xs};                             \
                    FLOAT_TILE(LD2, EL, 4, 2, WIDE);                                                                         \
                }                                                                                                      \
                for (; q0 < nx; q0++) {                                                                                \
                    const float *xq[1] = {x + (size_t)q0 * xs};                                                        \
                    FLOAT_TILE(LD2, EL, 4, 1, WIDE);                                                                         \
                }                                                                                                      \
                r += 8;                                                                                                \
                continue;                                                                                              \
            }                                                                                                          \
            /* the last one or two rows: a lone row's pair twin is itself, its result stored once */                 \
            for (int q0 = 0; q0 < nx; q0++) {                                                                          \
                const float *xq[1] = {x + (size_t)q0 * xs};                                                            \
                __m512 a = _mm512_setzero_ps();                                                                        \
                for (int i = 0; i < n8; i += 8) a = _mm512_add_ps(a, _mm512_mul_ps(LD2(w[0], w[1], i), bx(xq[0], i))); \
                float ta, tb;                                                                                          \
                hsum2(a, &ta, &tb);                                                                                    \
                TAIL(EL, w[0], xq[0], ta)                                                                              \
                TAIL(EL, w[1], xq[0], tb)                                                                              \
                s[(size_t)q0 * ss + r] = ta;                                                                           \
                if (left > 1) s[(size_t)q0 * ss + r + 1] = tb;                                                         \
            }                                                                                                          \
            r += left > 1 ? 2 : 1;                                                                                     \
        }                                                                                                              \
    }

FLOAT_KERNEL(dot_f32, ld2_f32, el_f32, 1)
FLOAT_KERNEL(dot_f16, ld2_f16, el_f16, 0)

/* q8_0. The twin, per 32-block b and lane j: t = q[j]x[j] + q[8+j]x[8+j]
 * + q[16+j]x[16+j] + q[24+j]x[24+j] (in that order, unfused), then
 * l[j] += d * t. Here chunk c of rows A and B (8 int8 each) is one 16-byte
 * load pair widened to 16 floats. */
static inline __m512 q8_chunk2(const block_q8_0 *a, const block_q8_0 *b, int c) {
    const __m128i lo = _mm_loadl_epi64((const __m128i *)(a->qs + 8 * c));
    const __m128i v = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(lo), (const double *)(const void *)(b->qs + 8 * c)));
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(v));
}

/* d of A in lanes 0-7, d of B in lanes 8-15 (both exact conversions) */
static inline __m512 q8_d2(const block_q8_0 *a, const block_q8_0 *b) {
    const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)a->d | (uint32_t)b->d << 16)));
    const __m512i idx = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    return _mm512_permutexvar_ps(idx, _mm512_castps128_ps512(f));
}

#define Q8_TILE(P)                                                                                                     \
    do {                                                                                                               \
        __m512 acc[P];                                                                                                 \
        _Pragma("GCC unroll 16") for (int p = 0; p < P; p++) acc[p] = _mm512_setzero_ps();                             \
        for (int b = 0; b < nb; b++) {                                                                                 \
            const float *xb = x0 + 32 * b;                                                                             \
            const __m512 x0v = bx(xb, 0), x1v = bx(xb, 8), x2v = bx(xb, 16), x3v = bx(xb, 24);                         \
            _Pragma("GCC unroll 16") for (int p = 0; p < P; p++) {                                                     \
                const block_q8_0 *ba = w[2 * p] + b, *bb = w[2 * p + 1] + b;                                           \
                _mm_prefetch((const char *)((uintptr_t)ba + 2 * P * rb), _MM_HINT_T0);                                 \
                _mm_prefetch((const char *)((uintptr_t)bb + 2 * P * rb), _MM_HINT_T0);                                 \
                __m512 t = _mm512_mul_ps(q8_chunk2(ba, bb, 0), x0v);                                                   \
                t = _mm512_add_ps(t, _mm512_mul_ps(q8_chunk2(ba, bb, 1), x1v));                                        \
                t = _mm512_add_ps(t, _mm512_mul_ps(q8_chunk2(ba, bb, 2), x2v));                                        \
                t = _mm512_add_ps(t, _mm512_mul_ps(q8_chunk2(ba, bb, 3), x3v));                                        \
                acc[p] = _mm512_add_ps(acc[p], _mm512_mul_ps(q8_d2(ba, bb), t));                                       \
            }                                                                                                          \
        }                                                                                                              \
        for (int p = 0; p < P; p++) {                                                                                  \
            float ta, tb;                                                                                              \
            hsum2(acc[p], &ta, &tb);                                                                                   \
            s[(size_t)q * ss + r + 2 * p] = ta;                                                                        \
            if (r + 2 * p + 1 < nr) s[(size_t)q * ss + r + 2 * p + 1] = tb;                                            \
        }                                                                                                              \
    } while (0)

static void dot_q8_0(const void *rows, size_t rb, int nr, const float *x, size_t xs, int nx, int n, float *s,
                     size_t ss) {
    const int nb = n / 32;
    int r = 0;
    while (r < nr) {
        /* 16 rows for one query; 8 for several (re-read per query, from L1) */
        const int left = nr - r, tr = left >= 16 && nx == 1 ? 16 : left >= 8 ? 8 : 2;
        const block_q8_0 *w[16];
        for (int k = 0; k < tr; k++)
            w[k] = (const block_q8_0 *)((const uint8_t *)rows + (size_t)(r + (k < left ? k : left - 1)) * rb);
        for (int q = 0; q < nx; q++) {
            const float *x0 = x + (size_t)q * xs;
            if (tr == 16) Q8_TILE(8);
            else if (tr == 8) Q8_TILE(4);
            else Q8_TILE(1);
        }
        r += tr < left ? tr : left;
    }
}

/* vx_dot2_fn: rows a and b, anywhere, as the two halves of one tile pair
 * (the walk's up rows of two features, or a feature's gate and up rows) */
#define DOT2_FLOAT(name, LD2, EL, WIDE)                                                                                \
    static void name(const void *a, const void *b, const float *x, int n, float *s) {                                  \
        const int n8 = n & ~7, r = 0, q0 = 0;                                                                          \
        const size_t rb = 0, ss = 0; /* prefetches the rows themselves: no next tile */                                \
        const void *w[2] = {a, b};                                                                                     \
        const float *xq[1] = {x};                                                                                      \
        FLOAT_TILE(LD2, EL, 1, 1, WIDE);                                                                               \
    }
DOT2_FLOAT(dot2_f32, ld2_f32, el_f32, 1)
DOT2_FLOAT(dot2_f16, ld2_f16, el_f16, 0)

static void dot2_q8_0(const void *a, const void *b, const float *x, int n, float *s) {
    const int nb = n / 32, r = 0, q = 0, nr = 2;
    const size_t rb = 0, ss = 0;
    const block_q8_0 *w[2] = {a, b};
    const float *x0 = x;
    Q8_TILE(1);
}

vx_dot2_fn vx_dot2_avx512(mf_type t) {
    switch (t) {
    case MF_TYPE_F32: return dot2_f32;
    case MF_TYPE_F16: return dot2_f16;
    case MF_TYPE_Q8_0: return dot2_q8_0;
    default: return NULL;
    }
}

vx_dot_fn vx_dot_avx512(mf_type t) {
    switch (t) {
    case MF_TYPE_F32: return dot_f32;
    case MF_TYPE_F16: return dot_f16;
    case MF_TYPE_Q8_0: return dot_q8_0;
    default: return NULL;
    }
}
