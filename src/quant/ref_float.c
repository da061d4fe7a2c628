/* ref_float.c - reference kernels for F32, F16 and BF16 rows.
 * Dots accumulate in double, as ggml's scalar path does, so the reference is
 * the most accurate of the implementations it is compared with. */
#include "quant/ref.h"
#include "quant/fp16.h"

#include <string.h>

void mf_ref_to_float_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
void mf_ref_from_float_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void mf_ref_vec_dot_f32(int n, float *s, const void *x, const void *y) {
    const float *a = x, *b = y;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)a[i] * (double)b[i];
    *s = (float)sum;
}

void mf_ref_to_float_f16(const void *src, float *dst, int64_t n) {
    const mf_fp16 *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = mf_fp16_to_fp32(h[i]);
}

void mf_ref_from_float_f16(const float *src, void *dst, int64_t n) {
    mf_fp16 *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = mf_fp32_to_fp16(src[i]);
}

void mf_ref_vec_dot_f16(int n, float *s, const void *x, const void *y) {
    const mf_fp16 *a = x, *b = y;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)(mf_fp16_to_fp32(a[i]) * mf_fp16_to_fp32(b[i]));
    *s = (float)sum;
}

void mf_ref_to_float_bf16(const void *src, float *dst, int64_t n) {
    const mf_bf16 *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = mf_bf16_to_fp32(h[i]);
}

void mf_ref_from_float_bf16(const float *src, void *dst, int64_t n) {
    mf_bf16 *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = mf_fp32_to_bf16(src[i]);
}

void mf_ref_vec_dot_bf16(int n, float *s, const void *x, const void *y) {
    const mf_bf16 *a = x, *b = y;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += (double)(mf_bf16_to_fp32(a[i]) * mf_bf16_to_fp32(b[i]));
    *s = (float)sum;
}
