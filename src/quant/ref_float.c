/* ref_float.c - reference kernels for F32, F16 and BF16 rows.
 * Dots use the lane orders of lanes.h (F32/F16: 64 float lanes, lane i % 64
 * gets fma(x_i, y_i, lane); BF16: 32 lanes of f32 runs added in double; then
 * a pairwise fold), the
 * orders the AVX2/AVX-512 kernels keep, so they equal this code bit for bit.
 * Float lanes with FMA are also what llama.cpp's SIMD float dots do. */
#include "quant/ref.h"
#include "quant/fp16.h"
#include "quant/lanes.h"

#include <math.h>
#include <string.h>

void mf_ref_to_float_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }
void mf_ref_from_float_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void mf_ref_vec_dot_f32(int n, float *s, const void *x, const void *y) {
    const float *a = x, *b = y;
    float l[MF_FDOT_LANES] = {0};
    for (int i = 0; i < n; i++) l[i % MF_FDOT_LANES] = fmaf(a[i], b[i], l[i % MF_FDOT_LANES]);
    *s = mf_lanes_fold(l, MF_FDOT_LANES);
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
    float l[MF_FDOT_LANES] = {0};
    /* a product of two halves (11-bit significands, exponents within float's
     * range) is exact in float, so this add is the same value an fma gives */
    for (int i = 0; i < n; i++) l[i % MF_FDOT_LANES] += mf_fp16_to_fp32(a[i]) * mf_fp16_to_fp32(b[i]);
    *s = mf_lanes_fold(l, MF_FDOT_LANES);
}

void mf_ref_to_float_bf16(const void *src, float *dst, int64_t n) {
    const mf_bf16 *h = src;
    for (int64_t i = 0; i < n; i++) dst[i] = mf_bf16_to_fp32(h[i]);
}

void mf_ref_from_float_bf16(const float *src, void *dst, int64_t n) {
    mf_bf16 *h = dst;
    for (int64_t i = 0; i < n; i++) h[i] = mf_fp32_to_bf16(src[i]);
}

/* BF16: element i goes to lane i % 32, and each lane adds its products in
 * runs of MF_BF16_RUN: a run sums in f32 (fma from +0; a bf16 x bf16 product
 * is exact in f32), and each run's sum is added to the lane's double. The
 * lanes are folded in double and rounded to float once. Float lanes folded
 * in float are not enough: the engine rounds every matmul input to bf16
 * (8-bit significand), which turns a 1-ulp difference in a float sum into a
 * 2^-9 step of the next layer's input, and the stories260K BF16 golden
 * drifts past its 0.01 tolerance that way; the runs with a double fold keep
 * it at ~2e-6, as all-double lanes did, at about half the vector work
 * (docs/PERFORMANCE.md, "BF16 decode on a Zen 5"). Runs cover columns
 * [256j, 256j + 256): MF_BF16_RUN products of each of the 32 lanes. */
void mf_ref_vec_dot_bf16(int n, float *s, const void *x, const void *y) {
    const mf_bf16 *a = x, *b = y;
    double l[MF_DDOT_LANES] = {0};
    for (int j = 0; j < n; j += MF_DDOT_LANES * MF_BF16_RUN) {
        float r[MF_DDOT_LANES] = {0};
        for (int i = j; i < n && i < j + MF_DDOT_LANES * MF_BF16_RUN; i++)
            r[i % MF_DDOT_LANES] = fmaf(mf_bf16_to_fp32(a[i]), mf_bf16_to_fp32(b[i]), r[i % MF_DDOT_LANES]);
        for (int q = 0; q < MF_DDOT_LANES; q++) l[q] += (double)r[q];
    }
    *s = (float)mf_lanes_fold_d(l, MF_DDOT_LANES);
}
