/* ref_q8_0.c - Q8_0: blocks of 32 int8 with one f16 scale (d = max|x| / 127). */
#include "quant/ref.h"
#include "quant/blocks.h"

#include <math.h>

void mf_ref_from_float_q8_0(const float *x, void *vy, int64_t n) {
    block_q8_0 *y = vy;
    for (int64_t b = 0; b < n / QK8_0; b++, x += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++) {
            float v = fabsf(x[j]);
            if (v > amax) amax = v;
        }
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = mf_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; j++) y[b].qs[j] = (int8_t)roundf(x[j] * id);
    }
}

void mf_ref_to_float_q8_0(const void *vx, float *y, int64_t n) {
    const block_q8_0 *x = vx;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const float d = mf_fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK8_0; j++) y[b * QK8_0 + j] = (float)x[b].qs[j] * d;
    }
}

/* Per block: exact int32 sum of products, then one float multiply-add in the
 * order ggml uses (sumi * (dx * dy)), so SIMD versions can match bitwise. */
void mf_ref_vec_dot_q8_0_q8_0(int n, float *s, const void *vx, const void *vy) {
    const block_q8_0 *x = vx, *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK8_0; b++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++) sumi += x[b].qs[j] * y[b].qs[j];
        sum += (float)sumi * (mf_fp16_to_fp32(x[b].d) * mf_fp16_to_fp32(y[b].d));
    }
    *s = sum;
}
