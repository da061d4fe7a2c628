/* ref_iq4.c - IQ4_NL (32-weight blocks, one f16 scale) and IQ4_XS (256-weight
 * super-blocks, 6-bit scale per 32): 4-bit indices into a fixed non-uniform
 * table. Quantize as llama-quantize does (the 7-step scale search; llama.cpp's
 * own quantize_row_iq4_nl_ref skips it and so writes different bytes),
 * dequantize, dot with Q8_0 (IQ4_NL) or Q8_K (IQ4_XS). */
#include "quant/ref.h"
#include "quant/blocks.h"
#include "quant/lanes.h"
#include "quant/qsearch.h"

#include <math.h>
#include <string.h>

/* llama-quantize's search width: candidate grids -127+t for t in -7..7 */
#define IQ4_NTRY 7

/* Best scale for one 32-element sub-block: weighted (x^2) least squares over
 * the table levels chosen for each of 1 + 2*IQ4_NTRY + 1 candidate grids.
 * Writes the chosen levels of the first grid to L (callers re-level anyway);
 * returns 0 for an all-zero block. */
static float iq4_fit_block(const float *x, uint8_t L[32]) {
    const int8_t *vals = mf_iq4nl_values;
    float w[32];
    float amax = 0, max = 0;
    for (int j = 0; j < 32; j++) {
        w[j] = x[j] * x[j];
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    if (amax < MF_GROUP_MAX_EPS) return 0.0f;
    /* first grid: the extreme element on the table's extreme (-127) */
    float d = -max / vals[0];
    float id = 1 / d;
    float sumqx = 0, sumq2 = 0;
    for (int j = 0; j < 32; j++) {
        int l = mf_iq4_nearest(vals, id * x[j]);
        L[j] = (uint8_t)l;
        float q = vals[l];
        sumqx += w[j] * q * x[j];
        sumq2 += w[j] * q * q;
    }
    d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
    float best = d * sumqx;
    for (int t = -IQ4_NTRY; t <= IQ4_NTRY; t++) {
        id = (t + vals[0]) / max;
        sumqx = sumq2 = 0;
        for (int j = 0; j < 32; j++) {
            float q = vals[mf_iq4_nearest(vals, id * x[j])];
            sumqx += w[j] * q * x[j];
            sumq2 += w[j] * q * q;
        }
        if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    return d;
}

/* 32 levels into 16 bytes: element j in the low nibble, j + 16 in the high. */
static void pack_nibbles(const uint8_t L[32], uint8_t qs[16]) {
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)(L[j] | L[j + 16] << 4);
}

/* ---------------- IQ4_NL ---------------- */

void mf_ref_from_float_iq4_nl(const float *x, void *vy, int64_t n) {
    block_iq4_nl *y = vy;
    uint8_t L[32];
    for (int64_t b = 0; b < n / QK4_NL; b++, x += QK4_NL) {
        const float d = iq4_fit_block(x, L);
        y[b].d = mf_fp32_to_fp16(d);
        /* final levels against the unrounded best scale */
        const float id = d ? 1 / d : 0;
        for (int j = 0; j < 32; j++) L[j] = (uint8_t)mf_iq4_nearest(mf_iq4nl_values, id * x[j]);
        pack_nibbles(L, y[b].qs);
    }
}

void mf_ref_to_float_iq4_nl(const void *vx, float *y, int64_t n) {
    const block_iq4_nl *x = vx;
    for (int64_t b = 0; b < n / QK4_NL; b++, y += QK4_NL) {
        const float d = mf_fp16_to_fp32(x[b].d);
        for (int j = 0; j < 16; j++) {
            y[j] = d * mf_iq4nl_values[x[b].qs[j] & 0xf];
            y[j + 16] = d * mf_iq4nl_values[x[b].qs[j] >> 4];
        }
    }
}

/* Per block: d = dy*dx, then d * sumi into the 8 lanes of lanes.h. */
void mf_ref_vec_dot_iq4_nl_q8_0(int n, float *s, const void *vx, const void *vy) {
    const block_iq4_nl *x = vx;
    const block_q8_0 *y = vy;
    float lanes[MF_BLOCK_LANES] = {0};
    for (int b = 0; b < n / QK4_NL; b++) {
        const float d = mf_fp16_to_fp32(y[b].d) * mf_fp16_to_fp32(x[b].d);
        int sumi = 0;
        for (int j = 0; j < 16; j++) {
            sumi += y[b].qs[j] * mf_iq4nl_values[x[b].qs[j] & 0xf];
            sumi += y[b].qs[j + 16] * mf_iq4nl_values[x[b].qs[j] >> 4];
        }
        lanes[b % MF_BLOCK_LANES] += d * (float)sumi;
    }
    *s = mf_lanes_fold(lanes, MF_BLOCK_LANES);
}

/* ---------------- IQ4_XS ---------------- */

void mf_ref_from_float_iq4_xs(const float *x, void *vy, int64_t n) {
    block_iq4_xs *y = vy;
    uint8_t L[QK_K];
    float scales[QK_K / 32];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float amax = 0, max_scale = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            scales[ib] = iq4_fit_block(x + 32 * ib, L + 32 * ib);
            if (fabsf(scales[ib]) > amax) {
                amax = fabsf(scales[ib]);
                max_scale = scales[ib];
            }
        }
        /* sub-block scales become 6-bit signed multiples of d (the largest maps to -32) */
        const float d = -max_scale / 32;
        const float id = d ? 1 / d : 0.f;
        y[b].d = mf_fp32_to_fp16(d);
        y[b].scales_h = 0;
        memset(y[b].scales_l, 0, sizeof y[b].scales_l);
        for (int ib = 0; ib < QK_K / 32; ib++) {
            int l = mf_nearest_int(id * scales[ib]);
            l = l < -32 ? -32 : l > 31 ? 31 : l;
            /* re-level against the quantized (but not f16-rounded) sub-block scale */
            const float dl = d * l;
            const float idl = dl ? 1 / dl : 0.f;
            for (int j = 0; j < 32; j++) L[32 * ib + j] = (uint8_t)mf_iq4_nearest(mf_iq4nl_values, idl * x[32 * ib + j]);
            l += 32;
            y[b].scales_l[ib / 2] |= (uint8_t)((l & 0xf) << (4 * (ib % 2)));
            y[b].scales_h |= (uint16_t)((l >> 4) << (2 * ib));
        }
        for (int ib = 0; ib < QK_K / 32; ib++) pack_nibbles(L + 32 * ib, y[b].qs + 16 * ib);
    }
}

static inline int iq4xs_scale(const block_iq4_xs *x, int ib) {
    return ((x->scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf) | ((x->scales_h >> (2 * ib)) & 3) << 4;
}

void mf_ref_to_float_iq4_xs(const void *vx, float *y, int64_t n) {
    const block_iq4_xs *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = mf_fp16_to_fp32(x[b].d);
        for (int ib = 0; ib < QK_K / 32; ib++, y += 32) {
            const float dl = d * (iq4xs_scale(&x[b], ib) - 32);
            const uint8_t *qs = x[b].qs + 16 * ib;
            for (int j = 0; j < 16; j++) {
                y[j] = dl * mf_iq4nl_values[qs[j] & 0xf];
                y[j + 16] = dl * mf_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

/* Per super-block: isum = sum over sub-blocks of (ls - 32) * sumi, exact in
 * int32, then sum += d4d8 * isum with d4d8 = dx * dy, one float per
 * super-block (lanes.h). ggml's scalar kernel adds each sub-block into the
 * float sum; folding the scales in as integers gives SIMD kernels one float
 * operation per 256 elements instead of eight. */
void mf_ref_vec_dot_iq4_xs_q8_k(int n, float *s, const void *vx, const void *vy) {
    const block_iq4_xs *x = vx;
    const block_q8_K *y = vy;
    float sum = 0;
    for (int b = 0; b < n / QK_K; b++) {
        const float d4d8 = mf_fp16_to_fp32(x[b].d) * y[b].d;
        int isum = 0;
        for (int ib = 0; ib < QK_K / 32; ib++) {
            const uint8_t *qs = x[b].qs + 16 * ib;
            const int8_t *q8 = y[b].qs + 32 * ib;
            int sumi = 0;
            for (int j = 0; j < 16; j++) {
                sumi += q8[j] * mf_iq4nl_values[qs[j] & 0xf];
                sumi += q8[j + 16] * mf_iq4nl_values[qs[j] >> 4];
            }
            isum += (iq4xs_scale(&x[b], ib) - 32) * sumi;
        }
        sum += d4d8 * (float)isum;
    }
    *s = sum;
}
