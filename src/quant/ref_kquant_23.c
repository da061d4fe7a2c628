/* ref_kquant_23.c - Q2_K and Q3_K: 256-weight super-blocks of 16 sub-blocks
 * of 16, with 2-bit (asymmetric, scale + min) or 3-bit (symmetric) quants.
 * Quantize (llama-quantize's no-imatrix path), dequantize, dot with Q8_K. */
#include "quant/ref.h"
#include "quant/blocks.h"
#include "quant/qsearch.h"

#include <math.h>
#include <string.h>

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Both types store 2 low bits per weight the same way: byte l of the 32-byte
 * group for elements [128h, 128h+128) holds elements l, l+32, l+64, l+96 of it
 * at bit offsets 0, 2, 4, 6. */
static void pack_2bit(const uint8_t L[QK_K], uint8_t qs[QK_K / 4]) {
    for (int h = 0; h < QK_K; h += 128)
        for (int l = 0; l < 32; l++)
            qs[h / 4 + l] = (uint8_t)(L[h + l] | L[h + l + 32] << 2 | L[h + l + 64] << 4 | L[h + l + 96] << 6);
}

static inline int get_2bit(const uint8_t qs[QK_K / 4], int e) {
    return (qs[(e / 128) * 32 + (e % 32)] >> (2 * ((e % 128) / 32))) & 3;
}

/* ---------------- Q2_K ---------------- */

void mf_ref_from_float_q2_k(const float *x, void *vy, int64_t n) {
    block_q2_K *y = vy;
    uint8_t L[QK_K], Laux[16];
    float w[16], scales[QK_K / 16], mins[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        /* per sub-block: best (scale, min) for 4 levels, weighting by |x| and
         * scoring by absolute error */
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            for (int l = 0; l < 16; l++) w[l] = fabsf(x[16 * j + l]);
            scales[j] = mf_make_qkx2_quants(16, 3, x + 16 * j, w, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        /* sub-block scales and mins become 4-bit multiples of d and dmin */
        if (max_scale > 0) {
            const float is = 15.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) y[b].scales[j] = (uint8_t)mf_nearest_int(is * scales[j]);
            y[b].d = mf_fp32_to_fp16(max_scale / 15.f);
        } else {
            memset(y[b].scales, 0, sizeof y[b].scales);
            y[b].d = mf_fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float is = 15.f / max_min;
            for (int j = 0; j < QK_K / 16; j++) y[b].scales[j] |= (uint8_t)(mf_nearest_int(is * mins[j]) << 4);
            y[b].dmin = mf_fp32_to_fp16(max_min / 15.f);
        } else {
            y[b].dmin = mf_fp32_to_fp16(0.f);
        }
        /* re-level every element against the scales as stored; a sub-block
         * whose scale rounded to zero keeps the levels of its search */
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = mf_fp16_to_fp32(y[b].d) * (y[b].scales[j] & 0xF);
            if (!d) continue;
            const float dm = mf_fp16_to_fp32(y[b].dmin) * (y[b].scales[j] >> 4);
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (uint8_t)clamp_int(mf_nearest_int((x[16 * j + i] + dm) / d), 0, 3);
        }
        pack_2bit(L, y[b].qs);
    }
}

void mf_ref_to_float_q2_k(const void *vx, float *y, int64_t n) {
    const block_q2_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = mf_fp16_to_fp32(x[b].d), dmin = mf_fp16_to_fp32(x[b].dmin);
        for (int j = 0; j < QK_K / 16; j++) {
            const uint8_t sc = x[b].scales[j];
            const float dl = d * (sc & 0xF), ml = dmin * (sc >> 4);
            for (int i = 0; i < 16; i++) y[16 * j + i] = dl * get_2bit(x[b].qs, 16 * j + i) - ml;
        }
    }
}

/* Per super-block: one exact integer sum for the scaled quants (isum) and one
 * for the mins (through the activation's 16-element sums), then
 * sum += dall*isum - dmin*summs with dall = dy*dx, dmin = dy*dminx: one float
 * per super-block in super-block order (lanes.h), as ggml's scalar kernel. */
void mf_ref_vec_dot_q2_k_q8_k(int n, float *s, const void *vx, const void *vy) {
    const block_q2_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        int summs = 0, isum = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            summs += y[b].bsums[j] * (x[b].scales[j] >> 4);
            int sub = 0;
            for (int i = 0; i < 16; i++) sub += y[b].qs[16 * j + i] * get_2bit(x[b].qs, 16 * j + i);
            isum += (x[b].scales[j] & 0xF) * sub;
        }
        const float dall = y[b].d * mf_fp16_to_fp32(x[b].d);
        const float dmin = y[b].d * mf_fp16_to_fp32(x[b].dmin);
        sum += dall * (float)isum - dmin * (float)summs;
    }
    *s = sum;
}

/* ---------------- Q3_K ---------------- */

void mf_ref_from_float_q3_k(const float *x, void *vy, int64_t n) {
    block_q3_K *y = vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        /* signed sub-block scales; the one of largest magnitude sets d */
        float amax = 0, max_scale = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = mf_make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        memset(y[b].scales, 0, sizeof y[b].scales);
        if (max_scale) {
            /* 6-bit signed scale per sub-block, stored +32: low nibbles in bytes
             * 0..7 (sub-blocks 8..15 in the high nibble), top 2 bits in 8..11 */
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < QK_K / 16; j++) {
                int8_t l8 = (int8_t)mf_nearest_int(iscale * scales[j]);
                int l = clamp_int(l8, -32, 31) + 32;
                if (j < 8) y[b].scales[j] = (uint8_t)(l & 0xF);
                else y[b].scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                y[b].scales[8 + j % 4] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y[b].d = mf_fp32_to_fp16(1 / iscale);
        } else {
            y[b].d = mf_fp32_to_fp16(0.f);
        }
        /* re-level against the stored scales (levels -4..3, kept +4) */
        int sc[QK_K / 16];
        mf_q3k_scales(y[b].scales, sc);
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = mf_fp16_to_fp32(y[b].d) * (int8_t)(sc[j] - 32);
            if (!d) continue;
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (int8_t)(clamp_int(mf_nearest_int(x[16 * j + i] / d), -4, 3) + 4);
        }
        /* the third bit goes to hmask (element e: byte e%32, bit e/32), the low two to qs */
        uint8_t low[QK_K];
        memset(y[b].hmask, 0, sizeof y[b].hmask);
        for (int e = 0; e < QK_K; e++) {
            int l = L[e];
            if (l > 3) {
                y[b].hmask[e % 32] |= (uint8_t)(1 << (e / 32));
                l -= 4;
            }
            low[e] = (uint8_t)l;
        }
        pack_2bit(low, y[b].qs);
    }
}

/* level - 4 of element e: 2 bits from qs, and 4 is subtracted when the hmask bit is clear */
static inline int q3k_value(const block_q3_K *x, int e) {
    return get_2bit(x->qs, e) - ((x->hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4);
}

void mf_ref_to_float_q3_k(const void *vx, float *y, int64_t n) {
    const block_q3_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = mf_fp16_to_fp32(x[b].d);
        int sc[QK_K / 16];
        mf_q3k_scales(x[b].scales, sc);
        for (int j = 0; j < QK_K / 16; j++) {
            const float dl = d * (sc[j] - 32);
            for (int i = 0; i < 16; i++) y[16 * j + i] = dl * q3k_value(&x[b], 16 * j + i);
        }
    }
}

/* Per super-block: isum = sum of (sc - 32) * (q - 4) * a over the 256
 * elements, exact in int32, then sum += (dx * dy) * isum: one float per
 * super-block in super-block order (lanes.h). ggml's scalar kernel spreads
 * this over 8 float lanes by element index mod 8, a shape no int8 SIMD dot
 * can keep. The level offset 4 goes through the activation's 16-element sums
 * (sum of (q - 4) * a = sum of q * a - 4 * bsum), as Q2_K's mins do, so SIMD
 * kernels multiply unsigned levels 0..7. */
void mf_ref_vec_dot_q3_k_q8_k(int n, float *s, const void *vx, const void *vy) {
    const block_q3_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        int sc[QK_K / 16];
        mf_q3k_scales(x[b].scales, sc);
        int isum = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int sub = 0;
            for (int i = 0; i < 16; i++) sub += (q3k_value(&x[b], 16 * j + i) + 4) * y[b].qs[16 * j + i];
            isum += (sc[j] - 32) * (sub - 4 * y[b].bsums[j]);
        }
        const float d = mf_fp16_to_fp32(x[b].d) * y[b].d;
        sum += d * (float)isum;
    }
    *s = sum;
}
