/* knn_kern.c - scalar twins of the gate KNN kernels (the order knn_kern.h
 * fixes) and the choice of kernel for the CPU. */
#include "vindex/knn_kern.h"
#include "cpu/kern/features.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static float row_f32(const float *w, const float *x, int n) {
    float l[8] = {0};
    const int n8 = n & ~7;
    for (int i = 0; i < n8; i += 8)
        for (int j = 0; j < 8; j++) {
            const float p = w[i + j] * x[i + j];
            l[j] = l[j] + p;
        }
    float s = vx_reduce8(l);
    for (int i = n8; i < n; i++) {
        const float p = w[i] * x[i];
        s = s + p;
    }
    return s;
}

static float row_f16(const mf_fp16 *w, const float *x, int n) {
    float l[8] = {0};
    const int n8 = n & ~7;
    for (int i = 0; i < n8; i += 8)
        for (int j = 0; j < 8; j++) {
            const float p = mf_fp16_to_fp32(w[i + j]) * x[i + j];
            l[j] = l[j] + p;
        }
    float s = vx_reduce8(l);
    for (int i = n8; i < n; i++) {
        const float p = mf_fp16_to_fp32(w[i]) * x[i];
        s = s + p;
    }
    return s;
}

static float row_q8_0(const block_q8_0 *w, const float *x, int n) {
    float l[8] = {0};
    for (int b = 0; b < n / 32; b++) {
        const float d = mf_fp16_to_fp32(w[b].d);
        const float *xb = x + 32 * b;
        for (int j = 0; j < 8; j++) {
            float t = (float)w[b].qs[j] * xb[j];
            for (int c = 1; c < 4; c++) {
                const float p = (float)w[b].qs[8 * c + j] * xb[8 * c + j];
                t = t + p;
            }
            const float dt = d * t;
            l[j] = l[j] + dt;
        }
    }
    return vx_reduce8(l);
}

#define SCALAR(name, T, fn)                                                                                            \
    static void name(const void *rows, size_t rb, int nr, const float *x, size_t xs, int nx, int n, float *s,         \
                     size_t ss) {                                                                                      \
        for (int r = 0; r < nr; r++)                                                                                   \
            for (int q = 0; q < nx; q++)                                                                               \
                s[(size_t)q * ss + r] = fn((const T *)((const uint8_t *)rows + (size_t)r * rb), x + (size_t)q * xs, n); \
    }
SCALAR(dot_f32, float, row_f32)
SCALAR(dot_f16, mf_fp16, row_f16)
SCALAR(dot_q8_0, block_q8_0, row_q8_0)

vx_dot_fn vx_dot_scalar(mf_type t) {
    switch (t) {
    case MF_TYPE_F32: return dot_f32;
    case MF_TYPE_F16: return dot_f16;
    case MF_TYPE_Q8_0: return dot_q8_0;
    default: return NULL;
    }
}

static void q8pre_scalar(const void *rows, size_t rb, int nr, const vx_q8q *q, int n, float *s, float *e) {
    const int nb = n / 32;
    for (int r = 0; r < nr; r++) {
        const block_q8_0 *w = (const block_q8_0 *)((const uint8_t *)rows + (size_t)r * rb);
        float acc[16] = {0}, err[16] = {0};
        for (int p = 0; 2 * p < nb; p++)
            for (int h = 0; h < 2 && 2 * p + h < nb; h++) {
                const int b = 2 * p + h;
                const float d = mf_fp16_to_fp32(w[b].d), sc = d * q->dx16[16 * p + 8 * h], c = q->c16[16 * p + 8 * h];
                for (int j = 0; j < 8; j++) {
                    int32_t I = 0;
                    for (int t = 0; t < 4; t++) I += (int32_t)w[b].qs[4 * j + t] * ((int32_t)q->u[32 * b + 4 * j + t] - 128);
                    acc[8 * h + j] = fmaf((float)I, sc, acc[8 * h + j]);
                    err[8 * h + j] = fmaf(fabsf(d), c, err[8 * h + j]);
                }
            }
        s[r] = vx_reduce8(acc) + vx_reduce8(acc + 8);
        e[r] = vx_reduce8(err) + vx_reduce8(err + 8);
    }
}

vx_q8pre_fn vx_q8pre_scalar(void) { return q8pre_scalar; }

/* vx_dot2_fn below AVX-512: the level's one-row kernel per row */
#define DOT2_PAIR(name, T, LEVEL_FN)                                                                                   \
    static void name(const void *a, const void *b, const float *x, int n, float *s) {                                  \
        const vx_dot_fn f = LEVEL_FN(T);                                                                               \
        f(a, 0, 1, x, 0, 1, n, s, 1);                                                                                  \
        f(b, 0, 1, x, 0, 1, n, s + 1, 1);                                                                              \
    }
DOT2_PAIR(dot2_avx2_f32, MF_TYPE_F32, vx_dot_avx2)
DOT2_PAIR(dot2_avx2_f16, MF_TYPE_F16, vx_dot_avx2)
DOT2_PAIR(dot2_avx2_q8_0, MF_TYPE_Q8_0, vx_dot_avx2)
DOT2_PAIR(dot2_scalar_f32, MF_TYPE_F32, vx_dot_scalar)
DOT2_PAIR(dot2_scalar_f16, MF_TYPE_F16, vx_dot_scalar)
DOT2_PAIR(dot2_scalar_q8_0, MF_TYPE_Q8_0, vx_dot_scalar)

vx_dot2_fn vx_dot2_best(mf_type t) {
    const mf_cpu_level lv = mf_cpu_init();
    if (t != MF_TYPE_F32 && t != MF_TYPE_F16 && t != MF_TYPE_Q8_0) return NULL;
    vx_dot2_fn f = lv >= MF_CPU_AVX512 ? vx_dot2_avx512(t) : NULL;
    if (f) return f;
    const bool avx2 = lv >= MF_CPU_AVX2 && vx_dot_avx2(t);
    if (t == MF_TYPE_F32) return avx2 ? dot2_avx2_f32 : dot2_scalar_f32;
    if (t == MF_TYPE_F16) return avx2 ? dot2_avx2_f16 : dot2_scalar_f16;
    return avx2 ? dot2_avx2_q8_0 : dot2_scalar_q8_0;
}

vx_dot_fn vx_dot_best(mf_type t) {
    const mf_cpu_level lv = mf_cpu_init();
    vx_dot_fn f = lv >= MF_CPU_AVX512 ? vx_dot_avx512(t) : NULL;
    if (!f && lv >= MF_CPU_AVX2) f = vx_dot_avx2(t);
    return f ? f : vx_dot_scalar(t);
}
