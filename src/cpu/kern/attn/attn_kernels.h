/* attn_kernels.h - the inner loops of attention, per KV cache type and SIMD
 * level: load a head's slice of a cached K or V row as f32, dot, exp of a
 * score row, and the accumulator updates of the online softmax.
 *
 * Float orders are fixed so the AVX2 versions equal the scalar ones bitwise:
 * dot and sum accumulate element i into lane i % 8 (dot with fma) and fold the
 * 8 lanes pairwise (4+4, 2+2, 1+1); exp is mf_attn_expf below, evaluated with
 * the same fma sequence in every version; axpy is one fma per element. */
#ifndef MF_CPU_ATTN_KERNELS_H
#define MF_CPU_ATTN_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "minfer.h"

#define MF_ATTN_LANES 8

typedef struct mf_attn_kernels {
    /* f32 view of elements [off, off+n) of a cached row; may return a pointer
     * into the row itself (f32 cache) or fill and return buf */
    const float *(*load_k)(const uint8_t *row, size_t off, int n, float *buf);
    const float *(*load_v)(const uint8_t *row, size_t off, int n, float *buf);
    float (*dot)(const float *a, const float *b, int n);
    /* out[j*ld + i] = dot(q[j], k[i]) * scale for nq queries x nk keys */
    void (*scores)(const float *const *q, int nq, const float *const *k, int nk, int d, float scale, float *out, int ld);
    /* acc[j*d ..] = fma(w[j*ld + i], v[i], acc) for i in key order, skipping zero weights */
    void (*accum)(const float *w, int ld, int nq, const float *const *v, int nk, int d, float *acc);
    /* x[i] = exp(x[i] - m); returns the sum of the new x */
    float (*exp_sum)(float *x, int n, float m);
    void (*axpy)(float *acc, float s, const float *v, int n);  /* acc = fma(s, v, acc) */
    void (*scale)(float *acc, float c, int n);                 /* acc *= c */
    const char *name;
} mf_attn_kernels;

/* exp(x) for x <= 0 (scores minus their running max): 2^n * p(r) with
 * n = round(x / ln 2), r = x - n ln 2 in two fma steps, p a degree-6 Taylor
 * polynomial (|r| <= ln2/2: relative error ~1e-7); 0 below -87. */
static inline float mf_attn_expf(float x) {
    if (!(x >= -87.0f)) return x != x ? x : 0.0f;
    const float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(n, -0.693145751953125f, x);
    r = fmaf(n, -1.42860682030941723e-06f, r);
    float p = 1.0f / 720.0f;
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    const uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &bits, 4);
    return p * s;
}

/* Best kernels this CPU runs for the cache type (MINFER_NO_AVX2 forces scalar). */
const mf_attn_kernels *mf_attn_kernels_get(mf_kv_type t);
/* the scalar set whatever the CPU (the reference backend) */
const mf_attn_kernels *mf_attn_kernels_scalar(mf_kv_type t);
/* The plain-C set (tests compare against it). */
const mf_attn_kernels *mf_attn_kernels_scalar(mf_kv_type t);
/* AVX2+FMA+F16C set, or NULL when not compiled in. */
const mf_attn_kernels *mf_attn_kernels_avx2(mf_kv_type t);
/* The AVX2 set with scores and accum on 512-bit vectors (AVX-512F/DQ),
 * bitwise the same. */
const mf_attn_kernels *mf_attn_kernels_avx512(mf_kv_type t);
void mf_attn_scores_avx512(const float *const *q, int nq, const float *const *k, int nk, int d, float scale, float *out,
                           int ld);
void mf_attn_accum_avx512(const float *w, int ld, int nq, const float *const *v, int nk, int d, float *acc);

#endif
