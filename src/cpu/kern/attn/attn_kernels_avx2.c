/* attn_kernels_avx2.c - AVX2 + FMA + F16C attention inner loops (compiled with
 * those flags; selected only after a CPUID check). */
#include "cpu/kern/attn/attn_kernels.h"
#include "cpu/kern/attn/exp_avx2.h"
#include "cpu/kern/attn/fold_avx2.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

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

/* fold 8 lanes pairwise: 4+4, then 2+2, then 1+1 (the scalar fold8's order) */
static float fold8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* the first n (< 8) elements of p, zeros elsewhere */
static __m256 load_tail(const float *p, int n) {
    float t[8] = {0};
    memcpy(t, p, sizeof(float) * (size_t)n);
    return _mm256_loadu_ps(t);
}

static float dot(const float *a, const float *b, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc);
    if (i < n) acc = _mm256_fmadd_ps(load_tail(a + i, n - i), load_tail(b + i, n - i), acc);
    return fold8(acc);
}

static void axpy(float *acc, float s, const float *v, int n);

/* 8 keys per pass over the query: the query's loads serve eight dots; each
 * dot keeps its own 8 lanes and fold8x8 folds them as fold8 would, so the
 * result equals dot() bitwise */
static void scores(const float *const *q, int nq, const float *const *k, int nk, int d, float scale, float *out, int ld) {
    const __m256 vscale = _mm256_set1_ps(scale);
    for (int j = 0; j < nq; j++) {
        const float *a = q[j];
        float *o = out + (size_t)j * ld;
        int i = 0;
        if (d % 8 == 0) {
            for (; i + 8 <= nk; i += 8) {
                __m256 acc[8];
                #pragma GCC unroll 8
                for (int r = 0; r < 8; r++) acc[r] = _mm256_setzero_ps();
                for (int e = 0; e < d; e += 8) {
                    const __m256 x = _mm256_loadu_ps(a + e);
                    #pragma GCC unroll 8
                    for (int r = 0; r < 8; r++) acc[r] = _mm256_fmadd_ps(x, _mm256_loadu_ps(k[i + r] + e), acc[r]);
                }
                _mm256_storeu_ps(o + i, _mm256_mul_ps(fold8x8(acc), vscale));
            }
        }
        for (; i < nk; i++) o[i] = dot(a, k[i], d) * scale;
    }
}

/* per query, a slab of NV * 8 accumulator columns [col, col + NV * 8) stays
 * in registers across the chunk's keys; NV is a compile-time constant in each
 * instance so r[] really lives in registers (a run-time NV left it on the
 * stack: every fma went through a store-forwarded load, 2x slower). Per
 * element the fmas run in key order, as axpy, whatever the slab split. */
static inline __attribute__((always_inline)) void accum_nv(const int NV, const float *w, int ld, int nq,
                                                          const float *const *v, int nk, int d, int col, float *acc) {
    for (int j = 0; j < nq; j++) {
        __m256 r[16];
        float *a = acc + (size_t)j * d + col;
        #pragma GCC unroll 16
        for (int e = 0; e < NV; e++) r[e] = _mm256_loadu_ps(a + 8 * e);
        const float *wj = w + (size_t)j * ld;
        for (int i = 0; i < nk; i++) {
            if (wj[i] == 0.0f) continue;
            const __m256 s = _mm256_set1_ps(wj[i]);
            const float *vi = v[i] + col;
            #pragma GCC unroll 16
            for (int e = 0; e < NV; e++) r[e] = _mm256_fmadd_ps(s, _mm256_loadu_ps(vi + 8 * e), r[e]);
        }
        #pragma GCC unroll 16
        for (int e = 0; e < NV; e++) _mm256_storeu_ps(a + 8 * e, r[e]);
    }
}

static void accum(const float *w, int ld, int nq, const float *const *v, int nk, int d, float *acc) {
    switch (d) { /* the common head sizes in one slab */
    case 64: accum_nv(8, w, ld, nq, v, nk, d, 0, acc); return;
    case 128: accum_nv(16, w, ld, nq, v, nk, d, 0, acc); return;
    case 32: accum_nv(4, w, ld, nq, v, nk, d, 0, acc); return;
    case 96: accum_nv(12, w, ld, nq, v, nk, d, 0, acc); return;
    case 80: accum_nv(10, w, ld, nq, v, nk, d, 0, acc); return;
    default: break;
    }
    /* any other size (256 for Gemma): 128-column slabs, then 8-column ones */
    int col = 0;
    for (; col + 128 <= d; col += 128) accum_nv(16, w, ld, nq, v, nk, d, col, acc);
    for (; col + 8 <= d; col += 8) accum_nv(1, w, ld, nq, v, nk, d, col, acc);
    if (col == d) return;
    for (int j = 0; j < nq; j++) /* the last d % 8 columns */
        for (int i = 0; i < nk; i++) {
            const float s = w[(size_t)j * ld + i];
            if (s != 0.0f)
                for (int e = col; e < d; e++) acc[(size_t)j * d + e] = fmaf(s, v[i][e], acc[(size_t)j * d + e]);
        }
}

static float exp_sum(float *x, int n, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    if (i < n) {
        float t[8];
        __m256 e = exp8(_mm256_sub_ps(load_tail(x + i, n - i), vm));
        _mm256_storeu_ps(t, e);
        memcpy(x + i, t, sizeof(float) * (size_t)(n - i));
        /* lanes past the tail hold exp(0 - m): zero them before adding */
        for (int k = n - i; k < 8; k++) t[k] = 0;
        acc = _mm256_add_ps(acc, _mm256_loadu_ps(t));
    }
    return fold8(acc);
}

static void axpy(float *acc, float s, const float *v, int n) {
    const __m256 vs = _mm256_set1_ps(s);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vs, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
    for (; i < n; i++) acc[i] = fmaf(s, v[i], acc[i]);
}

static void scale(float *acc, float c, int n) {
    const __m256 vc = _mm256_set1_ps(c);
    int i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), vc));
    for (; i < n; i++) acc[i] *= c;
}

static const mf_attn_kernels g_avx2[3] = {
    [MF_KV_F32] = {load_f32, load_f32, dot, scores, accum, exp_sum, axpy, scale, "avx2 f32"},
    [MF_KV_F16] = {load_f16, load_f16, dot, scores, accum, exp_sum, axpy, scale, "avx2 f16"},
    [MF_KV_Q8_0] = {load_q8_0, load_q8_0, dot, scores, accum, exp_sum, axpy, scale, "avx2 q8_0"},
};

const mf_attn_kernels *mf_attn_kernels_avx2(mf_kv_type t) { return &g_avx2[t]; }

/* the same with the scores and V accumulation of attn_kernels_avx512.c
 * (chosen only where the CPU has AVX-512) */
static const mf_attn_kernels g_avx512[3] = {
    [MF_KV_F32] = {load_f32, load_f32, dot, mf_attn_scores_avx512, mf_attn_accum_avx512, exp_sum, axpy, scale, "avx512 f32"},
    [MF_KV_F16] = {load_f16, load_f16, dot, mf_attn_scores_avx512, mf_attn_accum_avx512, exp_sum, axpy, scale, "avx512 f16"},
    [MF_KV_Q8_0] = {load_q8_0, load_q8_0, dot, mf_attn_scores_avx512, mf_attn_accum_avx512, exp_sum, axpy, scale, "avx512 q8_0"},
};

const mf_attn_kernels *mf_attn_kernels_avx512(mf_kv_type t) { return &g_avx512[t]; }
