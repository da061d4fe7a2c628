/* attn_kernels.c - scalar attention inner loops and run-time selection. */
#include "cpu/kern/attn/attn_kernels.h"
#include "cpu/kern/features.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <stdlib.h>
#include <string.h>

static const float *load_f32(const uint8_t *row, size_t off, int n, float *buf) {
    (void)n;
    (void)buf;
    return (const float *)row + off;
}

static const float *load_f16(const uint8_t *row, size_t off, int n, float *buf) {
    const mf_fp16 *h = (const mf_fp16 *)row + off;
    for (int i = 0; i < n; i++) buf[i] = mf_fp16_to_fp32(h[i]);
    return buf;
}

/* q8_0 rows are blocks of 32 along the whole row; a head slice may start and
 * end inside a block */
static const float *load_q8_0(const uint8_t *row, size_t off, int n, float *buf) {
    const block_q8_0 *b = (const block_q8_0 *)row;
    for (int i = 0; i < n; i++) {
        const size_t e = off + (size_t)i;
        const block_q8_0 *blk = &b[e / QK8_0];
        buf[i] = (float)blk->qs[e % QK8_0] * mf_fp16_to_fp32(blk->d);
    }
    return buf;
}

static float fold8(float *l) {
    for (int h = MF_ATTN_LANES / 2; h >= 1; h /= 2)
        for (int i = 0; i < h; i++) l[i] += l[i + h];
    return l[0];
}

static float dot_scalar(const float *a, const float *b, int n) {
    float l[MF_ATTN_LANES] = {0};
    for (int i = 0; i < n; i++) l[i % MF_ATTN_LANES] = fmaf(a[i], b[i], l[i % MF_ATTN_LANES]);
    return fold8(l);
}

static void scores_scalar(const float *const *q, int nq, const float *const *k, int nk, int d, float scale, float *out,
                          int ld) {
    for (int j = 0; j < nq; j++)
        for (int i = 0; i < nk; i++) out[(size_t)j * ld + i] = dot_scalar(q[j], k[i], d) * scale;
}

static void accum_scalar(const float *w, int ld, int nq, const float *const *v, int nk, int d, float *acc) {
    for (int j = 0; j < nq; j++)
        for (int i = 0; i < nk; i++) {
            const float s = w[(size_t)j * ld + i];
            if (s == 0.0f) continue;
            float *a = acc + (size_t)j * d;
            for (int e = 0; e < d; e++) a[e] = fmaf(s, v[i][e], a[e]);
        }
}

static float exp_sum_scalar(float *x, int n, float m) {
    float l[MF_ATTN_LANES] = {0};
    for (int i = 0; i < n; i++) {
        x[i] = mf_attn_expf(x[i] - m);
        l[i % MF_ATTN_LANES] += x[i];
    }
    return fold8(l);
}

static void axpy_scalar(float *acc, float s, const float *v, int n) {
    for (int i = 0; i < n; i++) acc[i] = fmaf(s, v[i], acc[i]);
}

static void scale_scalar(float *acc, float c, int n) {
    for (int i = 0; i < n; i++) acc[i] *= c;
}

static const mf_attn_kernels g_scalar[3] = {
    [MF_KV_F32] = {load_f32, load_f32, dot_scalar, scores_scalar, accum_scalar, exp_sum_scalar, axpy_scalar, scale_scalar, "scalar f32"},
    [MF_KV_F16] = {load_f16, load_f16, dot_scalar, scores_scalar, accum_scalar, exp_sum_scalar, axpy_scalar, scale_scalar, "scalar f16"},
    [MF_KV_Q8_0] = {load_q8_0, load_q8_0, dot_scalar, scores_scalar, accum_scalar, exp_sum_scalar, axpy_scalar, scale_scalar, "scalar q8_0"},
};

const mf_attn_kernels *mf_attn_kernels_scalar(mf_kv_type t) { return &g_scalar[t]; }

const mf_attn_kernels *mf_attn_kernels_get(mf_kv_type t) {
    /* the one feature detection (cpu/kern/features.c), with its environment switches */
    if (mf_cpu_init() >= MF_CPU_AVX512) return mf_attn_kernels_avx512(t);
    if (mf_cpu_init() >= MF_CPU_AVX2) {
        const mf_attn_kernels *k = mf_attn_kernels_avx2(t);
        if (k) return k;
    }
    return &g_scalar[t];
}
