/* ref_legacy.c - Q4_0, Q4_1, Q5_0, Q5_1: 32-weight blocks with one f16 scale
 * (and an f16 min for the _1 variants). Quantize, dequantize, and the dot with
 * the activation type llama.cpp pairs them with (Q8_0 for _0, Q8_1 for _1).
 *
 * The quantizers are single-pass (no search): the scale maps the block's
 * extreme value onto the end of the grid, and levels are found by adding a
 * half and truncating, exactly as llama-quantize does without an imatrix. */
#include "quant/ref.h"
#include "quant/blocks.h"
#include "quant/lanes.h"
#include "quant/qsearch.h"

#include <float.h>
#include <math.h>

/* The 5th bits of Q5 blocks as one little-endian word, independent of host order. */
static inline uint32_t load_qh(const uint8_t qh[4]) {
    return (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
}

static inline void store_qh(uint8_t qh[4], uint32_t v) {
    for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(v >> (8 * i));
}

/* Signed value of the largest magnitude in a block (the first one on ties):
 * the _0 formats put it on level -8 (-16), so its sign fixes the grid's orientation
 * and the whole range [-8, 7] is used. */
static float block_signed_absmax(const float *x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

static void block_minmax(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* Levels pass through uint8_t as in llama.cpp: in-range inputs never go
 * negative, and for hostile ones (NaN, inf) the wrap gives llama.cpp's bytes. */
static inline int min15(int q) { return q < 15 ? q : 15; }

/* Stores the levels of elements j and j + 16 of a Q5 block: low nibbles in qs,
 * bit 4 of each in qh (bit j and bit j + 16). */
static inline void put_q5(uint8_t qs[16], uint32_t *qh, int j, uint8_t q0, uint8_t q1) {
    qs[j] = (uint8_t)((q0 & 0x0f) | (q1 & 0x0f) << 4);
    *qh |= (uint32_t)((q0 & 0x10u) >> 4) << j;
    *qh |= (uint32_t)((q1 & 0x10u) >> 4) << (j + 16);
}

/* ---------------- Q4_0 ---------------- */

void mf_ref_from_float_q4_0(const float *x, void *vy, int64_t n) {
    block_q4_0 *y = vy;
    for (int64_t b = 0; b < n / QK4_0; b++, x += QK4_0) {
        const float max = block_signed_absmax(x, QK4_0);
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = mf_fp32_to_fp16(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            /* +8.5 then truncation = round half up onto 0..16; 16 (the far end
             * of the opposite sign) folds back to 15 */
            const uint8_t q0 = (uint8_t)min15(mf_trunc_i8(x[j] * id + 8.5f));
            const uint8_t q1 = (uint8_t)min15(mf_trunc_i8(x[j + QK4_0 / 2] * id + 8.5f));
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void mf_ref_to_float_q4_0(const void *vx, float *y, int64_t n) {
    const block_q4_0 *x = vx;
    for (int64_t b = 0; b < n / QK4_0; b++, y += QK4_0) {
        const float d = mf_fp16_to_fp32(x[b].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            y[j] = ((x[b].qs[j] & 0x0f) - 8) * d;
            y[j + QK4_0 / 2] = ((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

/* Per block: exact integer dot, then sumi * dx * dy (left to right), as ggml's
 * scalar kernel does; blocks are summed in the 8-lane order of lanes.h. */
void mf_ref_vec_dot_q4_0_q8_0(int n, float *s, const void *vx, const void *vy) {
    const block_q4_0 *x = vx;
    const block_q8_0 *y = vy;
    float lanes[MF_BLOCK_LANES] = {0};
    for (int b = 0; b < n / QK4_0; b++) {
        int sumi = 0;
        for (int j = 0; j < QK4_0 / 2; j++) {
            sumi += ((x[b].qs[j] & 0x0f) - 8) * y[b].qs[j];
            sumi += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + QK4_0 / 2];
        }
        lanes[b % MF_BLOCK_LANES] += (float)sumi * mf_fp16_to_fp32(x[b].d) * mf_fp16_to_fp32(y[b].d);
    }
    *s = mf_lanes_fold(lanes, MF_BLOCK_LANES);
}

/* ---------------- Q4_1 ---------------- */

void mf_ref_from_float_q4_1(const float *x, void *vy, int64_t n) {
    block_q4_1 *y = vy;
    for (int64_t b = 0; b < n / QK4_1; b++, x += QK4_1) {
        float min, max;
        block_minmax(x, QK4_1, &min, &max);
        const float d = (max - min) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = mf_fp32_to_fp16(d);
        y[b].m = mf_fp32_to_fp16(min);
        /* levels are taken against the unrounded min and d, as llama.cpp does */
        for (int j = 0; j < QK4_1 / 2; j++) {
            const uint8_t q0 = (uint8_t)min15(mf_trunc_i8((x[j] - min) * id + 0.5f));
            const uint8_t q1 = (uint8_t)min15(mf_trunc_i8((x[j + QK4_1 / 2] - min) * id + 0.5f));
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

void mf_ref_to_float_q4_1(const void *vx, float *y, int64_t n) {
    const block_q4_1 *x = vx;
    for (int64_t b = 0; b < n / QK4_1; b++, y += QK4_1) {
        const float d = mf_fp16_to_fp32(x[b].d), m = mf_fp16_to_fp32(x[b].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            y[j] = (x[b].qs[j] & 0x0f) * d + m;
            y[j + QK4_1 / 2] = (x[b].qs[j] >> 4) * d + m;
        }
    }
}

/* Per block: (dx*dy)*sumi + mx*sy, where sy = dy*sum(qy) carries the min term. */
void mf_ref_vec_dot_q4_1_q8_1(int n, float *s, const void *vx, const void *vy) {
    const block_q4_1 *x = vx;
    const block_q8_1 *y = vy;
    float lanes[MF_BLOCK_LANES] = {0};
    for (int b = 0; b < n / QK4_1; b++) {
        int sumi = 0;
        for (int j = 0; j < QK4_1 / 2; j++) {
            sumi += (x[b].qs[j] & 0x0f) * y[b].qs[j];
            sumi += (x[b].qs[j] >> 4) * y[b].qs[j + QK4_1 / 2];
        }
        lanes[b % MF_BLOCK_LANES] += (mf_fp16_to_fp32(x[b].d) * mf_fp16_to_fp32(y[b].d)) * (float)sumi +
               mf_fp16_to_fp32(x[b].m) * mf_fp16_to_fp32(y[b].s);
    }
    *s = mf_lanes_fold(lanes, MF_BLOCK_LANES);
}

/* ---------------- Q5_0 ---------------- */

void mf_ref_from_float_q5_0(const float *x, void *vy, int64_t n) {
    block_q5_0 *y = vy;
    for (int64_t b = 0; b < n / QK5_0; b++, x += QK5_0) {
        const float max = block_signed_absmax(x, QK5_0);
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = mf_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = mf_trunc_i8(x[j] * id + 16.5f);
            int q1 = mf_trunc_i8(x[j + QK5_0 / 2] * id + 16.5f);
            put_q5(y[b].qs, &qh, j, (uint8_t)(q0 < 31 ? q0 : 31), (uint8_t)(q1 < 31 ? q1 : 31));
        }
        store_qh(y[b].qh, qh);
    }
}

void mf_ref_to_float_q5_0(const void *vx, float *y, int64_t n) {
    const block_q5_0 *x = vx;
    for (int64_t b = 0; b < n / QK5_0; b++, y += QK5_0) {
        const float d = mf_fp16_to_fp32(x[b].d);
        const uint32_t qh = load_qh(x[b].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = (x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int q1 = (x[b].qs[j] >> 4) | (int)((qh >> (j + QK5_0 / 2)) & 1) << 4;
            y[j] = (q0 - 16) * d;
            y[j + QK5_0 / 2] = (q1 - 16) * d;
        }
    }
}

/* Per block: (dx*dy)*sumi. */
void mf_ref_vec_dot_q5_0_q8_0(int n, float *s, const void *vx, const void *vy) {
    const block_q5_0 *x = vx;
    const block_q8_0 *y = vy;
    float lanes[MF_BLOCK_LANES] = {0};
    for (int b = 0; b < n / QK5_0; b++) {
        const uint32_t qh = load_qh(x[b].qh);
        int sumi = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = ((x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4) - 16;
            int q1 = ((x[b].qs[j] >> 4) | (int)((qh >> (j + QK5_0 / 2)) & 1) << 4) - 16;
            sumi += q0 * y[b].qs[j] + q1 * y[b].qs[j + QK5_0 / 2];
        }
        lanes[b % MF_BLOCK_LANES] += (mf_fp16_to_fp32(x[b].d) * mf_fp16_to_fp32(y[b].d)) * (float)sumi;
    }
    *s = mf_lanes_fold(lanes, MF_BLOCK_LANES);
}

/* ---------------- Q5_1 ---------------- */

void mf_ref_from_float_q5_1(const float *x, void *vy, int64_t n) {
    block_q5_1 *y = vy;
    for (int64_t b = 0; b < n / QK5_1; b++, x += QK5_1) {
        float min, max;
        block_minmax(x, QK5_1, &min, &max);
        const float d = (max - min) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = mf_fp32_to_fp16(d);
        y[b].m = mf_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            /* no clamp here in llama.cpp: (max - min) * id rounds to at most 31 */
            put_q5(y[b].qs, &qh, j, (uint8_t)mf_trunc_u8((x[j] - min) * id + 0.5f),
                   (uint8_t)mf_trunc_u8((x[j + QK5_1 / 2] - min) * id + 0.5f));
        }
        store_qh(y[b].qh, qh);
    }
}

void mf_ref_to_float_q5_1(const void *vx, float *y, int64_t n) {
    const block_q5_1 *x = vx;
    for (int64_t b = 0; b < n / QK5_1; b++, y += QK5_1) {
        const float d = mf_fp16_to_fp32(x[b].d), m = mf_fp16_to_fp32(x[b].m);
        const uint32_t qh = load_qh(x[b].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            int q0 = (x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int q1 = (x[b].qs[j] >> 4) | (int)((qh >> (j + QK5_1 / 2)) & 1) << 4;
            y[j] = q0 * d + m;
            y[j + QK5_1 / 2] = q1 * d + m;
        }
    }
}

/* Per block: (dx*dy)*sumi + mx*sy, as for Q4_1. */
void mf_ref_vec_dot_q5_1_q8_1(int n, float *s, const void *vx, const void *vy) {
    const block_q5_1 *x = vx;
    const block_q8_1 *y = vy;
    float lanes[MF_BLOCK_LANES] = {0};
    for (int b = 0; b < n / QK5_1; b++) {
        const uint32_t qh = load_qh(x[b].qh);
        int sumi = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            int q0 = (x[b].qs[j] & 0x0f) | (int)((qh >> j) & 1) << 4;
            int q1 = (x[b].qs[j] >> 4) | (int)((qh >> (j + QK5_1 / 2)) & 1) << 4;
            sumi += q0 * y[b].qs[j] + q1 * y[b].qs[j + QK5_1 / 2];
        }
        lanes[b % MF_BLOCK_LANES] += (mf_fp16_to_fp32(x[b].d) * mf_fp16_to_fp32(y[b].d)) * (float)sumi +
               mf_fp16_to_fp32(x[b].m) * mf_fp16_to_fp32(y[b].s);
    }
    *s = mf_lanes_fold(lanes, MF_BLOCK_LANES);
}
