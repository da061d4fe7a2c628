/* ref_q8.c - the 8-bit types: Q8_0 (a weight type and the activation type of
 * Q4_0/Q5_0/Q8_0/IQ4_NL), Q8_1 (activations for Q4_1/Q5_1) and Q8_K
 * (activations for the K-quants and IQ4_XS). Quantize, dequantize, dot.
 *
 * Q8_1 and Q8_K are never weights in llama.cpp; their self-dots exist so the
 * traits table can hand out their quantizers like any other type's, and for
 * tests. */
#include "quant/ref.h"
#include "quant/blocks.h"
#include "quant/lanes.h"
#include "quant/qsearch.h"

#include <math.h>
#include <string.h>

/* ---------------- Q8_0 ---------------- */

void mf_ref_from_float_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) {
            /* written as llama.cpp's MAX(amax, |x|): a NaN resets amax rather than being skipped */
            const float v = fabsf(x[j]);
            amax = amax > v ? amax : v;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = mf_fp32_to_fp16(d);
        /* roundf (ties away from zero), not nearest_int: the legacy 8-bit types use it */
        for (int j = 0; j < QK8_0; j++) y[b].qs[j] = (int8_t)mf_trunc_i8(roundf(x[j] * id));
    }
}

void mf_ref_to_float_q8_0(const void *vx, float *y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float d = mf_fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK8_0; j++) y[b * QK8_0 + j] = (float)x[b].qs[j] * d;
    }
}

/* Per block: exact int32 sum of products, then sumi * (dx * dy) as ggml
 * computes it; blocks are summed in the 8-lane order of lanes.h, so SIMD
 * versions match bitwise. */
void mf_ref_vec_dot_q8_0_q8_0(int n, float *s, const void *vx, const void *vy) {
    const block_q8_0 *x = vx, *y = vy;
    float lanes[MF_BLOCK_LANES] = {0};
    for (int b = 0; b < n / QK8_0; b++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++) sumi += x[b].qs[j] * y[b].qs[j];
        lanes[b % MF_BLOCK_LANES] += (float)sumi * (mf_fp16_to_fp32(x[b].d) * mf_fp16_to_fp32(y[b].d));
    }
    *s = mf_lanes_fold(lanes, MF_BLOCK_LANES);
}

/* ---------------- Q8_1 ---------------- */

void mf_ref_from_float_q8_1(const float *x, void *vy, int64_t n) {
    block_q8_1 *y = vy;
    for (int64_t b = 0; b < n / QK8_1; b++, x += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; j++) {
            /* written as llama.cpp's MAX(amax, |x|): a NaN resets amax rather than being skipped */
            const float v = fabsf(x[j]);
            amax = amax > v ? amax : v;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = mf_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[b].qs[j] = (int8_t)mf_trunc_i8(roundf(x[j] * id));
            sum += y[b].qs[j];
        }
        /* with the unrounded d: the weight's min times this is the min's contribution */
        y[b].s = mf_fp32_to_fp16((float)sum * d);
    }
}

void mf_ref_to_float_q8_1(const void *vx, float *y, int64_t n) {
    const block_q8_1 *x = vx;
    for (int64_t b = 0; b < n / QK8_1; b++) {
        const float d = mf_fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK8_1; j++) y[b * QK8_1 + j] = (float)x[b].qs[j] * d;
    }
}

void mf_ref_vec_dot_q8_1_q8_1(int n, float *s, const void *vx, const void *vy) {
    const block_q8_1 *x = vx, *y = vy;
    float lanes[MF_BLOCK_LANES] = {0};
    for (int b = 0; b < n / QK8_1; b++) {
        int sumi = 0;
        for (int j = 0; j < QK8_1; j++) sumi += x[b].qs[j] * y[b].qs[j];
        lanes[b % MF_BLOCK_LANES] += (float)sumi * (mf_fp16_to_fp32(x[b].d) * mf_fp16_to_fp32(y[b].d));
    }
    *s = mf_lanes_fold(lanes, MF_BLOCK_LANES);
}

/* ---------------- Q8_K ---------------- */

void mf_ref_from_float_q8_k(const float *x, void *vy, int64_t n) {
    block_q8_K *y = vy;
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < QK_K; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        if (!amax) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* -127 (not -128) so that every level is representable with either sign,
         * which the SIMD dots of some IQ types rely on */
        const float iscale = -127.0f / max;
        for (int j = 0; j < QK_K; j++) {
            int v = mf_nearest_int(iscale * x[j]);
            y[b].qs[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++) sum += y[b].qs[16 * g + j];
            y[b].bsums[g] = (int16_t)sum;
        }
        y[b].d = 1 / iscale;
    }
}

void mf_ref_to_float_q8_k(const void *vx, float *y, int64_t n) {
    const block_q8_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++)
        for (int j = 0; j < QK_K; j++) *y++ = x[b].d * x[b].qs[j];
}

/* One float per super-block, in super-block order (lanes.h). */
void mf_ref_vec_dot_q8_k_q8_k(int n, float *s, const void *vx, const void *vy) {
    const block_q8_K *x = vx, *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        int sumi = 0;
        for (int j = 0; j < QK_K; j++) sumi += x[b].qs[j] * y[b].qs[j];
        sum += (float)sumi * (x[b].d * y[b].d);
    }
    *s = sum;
}
