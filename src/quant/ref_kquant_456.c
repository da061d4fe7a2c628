/* ref_kquant_456.c - Q4_K, Q5_K (8 sub-blocks of 32, asymmetric: 6-bit scale
 * and min per sub-block) and Q6_K (16 sub-blocks of 16, symmetric, 8-bit
 * scales). Quantize (llama-quantize's no-imatrix path), dequantize, dot with Q8_K. */
#include "quant/ref.h"
#include "quant/blocks.h"
#include "quant/qsearch.h"

#include <math.h>
#include <string.h>

static inline int clamp_int(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---------- shared by Q4_K and Q5_K ---------- */

/* Fits the 8 sub-blocks of one super-block (levels 0..nmax), stores d, dmin
 * and the packed 6-bit scales/mins into the block fields given, and leaves in L
 * each element's level against the scales as stored. */
static void fit_k_asym(const float *x, int nmax, float rmin, int nstep, mf_fp16 *d_out, mf_fp16 *dmin_out,
                       uint8_t packed[K_SCALE_SIZE], uint8_t L[QK_K]) {
    float scales[QK_K / 32], mins[QK_K / 32], w[32];
    uint8_t Laux[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        /* weight = rms of the sub-block + |x|: large elements matter more */
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = mf_make_qkx2_quants(32, nmax, x + 32 * j, w, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t ls = (uint8_t)mf_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)mf_nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        /* layout: see mf_k4_scale_min */
        if (j < 4) {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            packed[j - 4] |= (uint8_t)((ls >> 4) << 6);
            packed[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = mf_fp32_to_fp16(max_scale / 63.f);
    *dmin_out = mf_fp32_to_fp16(max_min / 63.f);
    /* re-level against the stored values; a sub-block whose scale rounded to
     * zero keeps the levels of its search */
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, mn;
        mf_k4_scale_min(j, packed, &sc, &mn);
        const float d = mf_fp16_to_fp32(*d_out) * sc;
        if (!d) continue;
        const float dm = mf_fp16_to_fp32(*dmin_out) * mn;
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)clamp_int(mf_nearest_int((x[32 * j + i] + dm) / d), 0, nmax);
    }
}

/* The K4 scale layout unpacked for the dot: 16-element group g gets the scale
 * of sub-block g/2; returns sum over groups of bsums[g] * min[g/2]. */
static int k4_dot_scales(const uint8_t packed[K_SCALE_SIZE], const int16_t bsums[QK_K / 16], int sc16[QK_K / 16]) {
    int summ = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, mn;
        mf_k4_scale_min(j, packed, &sc, &mn);
        sc16[2 * j] = sc16[2 * j + 1] = sc;
        summ += (bsums[2 * j] + bsums[2 * j + 1]) * mn;
    }
    return summ;
}

/* Q4_K/Q5_K dot per super-block: isum = sum of sc * q * a (exact int32),
 * summ = sum of min * bsum, then sum += (dx*dy) * isum - (dminx*dy) * summ,
 * one float per super-block in super-block order (lanes.h). ggml's scalar
 * kernel spreads isum over 8 float lanes by element index mod 8, a shape no
 * int8 SIMD dot can keep. */
static int k4_isum(const int8_t w[QK_K], const int8_t a[QK_K], const int sc16[QK_K / 16]) {
    int isum = 0;
    for (int g = 0; g < QK_K / 16; g++) {
        int sub = 0;
        for (int i = 0; i < 16; i++) sub += w[16 * g + i] * a[16 * g + i];
        isum += sc16[g] * sub;
    }
    return isum;
}

/* ---------------- Q4_K ---------------- */

void mf_ref_from_float_q4_k(const float *x, void *vy, int64_t n) {
    block_q4_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        memset(y[b].scales, 0, sizeof y[b].scales);
        fit_k_asym(x, 15, -1.f, 20, &y[b].d, &y[b].dmin, y[b].scales, L);
        /* per 64 elements: 32 bytes, first 32 in the low nibbles, next 32 in the high */
        for (int h = 0; h < QK_K; h += 64)
            for (int l = 0; l < 32; l++) y[b].qs[h / 2 + l] = (uint8_t)(L[h + l] | L[h + l + 32] << 4);
    }
}

static inline int q4k_level(const uint8_t *qs, int e) { return (qs[(e / 64) * 32 + (e % 32)] >> (4 * ((e / 32) & 1))) & 0xF; }

void mf_ref_to_float_q4_k(const void *vx, float *y, int64_t n) {
    const block_q4_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = mf_fp16_to_fp32(x[b].d), dmin = mf_fp16_to_fp32(x[b].dmin);
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, mn;
            mf_k4_scale_min(j, x[b].scales, &sc, &mn);
            const float dl = d * sc, ml = dmin * mn;
            for (int i = 0; i < 32; i++) y[32 * j + i] = dl * q4k_level(x[b].qs, 32 * j + i) - ml;
        }
    }
}

void mf_ref_vec_dot_q4_k_q8_k(int n, float *s, const void *vx, const void *vy) {
    const block_q4_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        int8_t w[QK_K];
        for (int e = 0; e < QK_K; e++) w[e] = (int8_t)q4k_level(x[b].qs, e);
        int sc16[QK_K / 16];
        const int summ = k4_dot_scales(x[b].scales, y[b].bsums, sc16);
        const int isum = k4_isum(w, y[b].qs, sc16);
        const float d = mf_fp16_to_fp32(x[b].d) * y[b].d;
        const float dmin = mf_fp16_to_fp32(x[b].dmin) * y[b].d;
        sum += d * (float)isum - dmin * (float)summ;
    }
    *s = sum;
}

/* ---------------- Q5_K ---------------- */

void mf_ref_from_float_q5_k(const float *x, void *vy, int64_t n) {
    block_q5_K *y = vy;
    uint8_t L[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        memset(y[b].scales, 0, sizeof y[b].scales);
        fit_k_asym(x, 31, -0.5f, 15, &y[b].d, &y[b].dmin, y[b].scales, L);
        /* low 4 bits as in Q4_K; the 5th bit of element 64k + l (64k + 32 + l)
         * is bit 2k (2k + 1) of qh[l] */
        memset(y[b].qh, 0, sizeof y[b].qh);
        for (int h = 0; h < QK_K; h += 64) {
            const int k = h / 64;
            for (int l = 0; l < 32; l++) {
                int lo = L[h + l], hi = L[h + l + 32];
                if (lo > 15) {
                    lo -= 16;
                    y[b].qh[l] |= (uint8_t)(1 << (2 * k));
                }
                if (hi > 15) {
                    hi -= 16;
                    y[b].qh[l] |= (uint8_t)(2 << (2 * k));
                }
                y[b].qs[h / 2 + l] = (uint8_t)(lo | hi << 4);
            }
        }
    }
}

static inline int q5k_level(const block_q5_K *x, int e) {
    return q4k_level(x->qs, e) | ((x->qh[e % 32] >> (e / 32)) & 1) << 4;
}

void mf_ref_to_float_q5_k(const void *vx, float *y, int64_t n) {
    const block_q5_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = mf_fp16_to_fp32(x[b].d), dmin = mf_fp16_to_fp32(x[b].dmin);
        for (int j = 0; j < QK_K / 32; j++) {
            uint8_t sc, mn;
            mf_k4_scale_min(j, x[b].scales, &sc, &mn);
            const float dl = d * sc, ml = dmin * mn;
            for (int i = 0; i < 32; i++) y[32 * j + i] = dl * q5k_level(&x[b], 32 * j + i) - ml;
        }
    }
}

void mf_ref_vec_dot_q5_k_q8_k(int n, float *s, const void *vx, const void *vy) {
    const block_q5_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        int8_t w[QK_K];
        for (int e = 0; e < QK_K; e++) w[e] = (int8_t)q5k_level(&x[b], e);
        int sc16[QK_K / 16];
        const int summ = k4_dot_scales(x[b].scales, y[b].bsums, sc16);
        const int isum = k4_isum(w, y[b].qs, sc16);
        const float d = mf_fp16_to_fp32(x[b].d) * y[b].d;
        const float dmin = mf_fp16_to_fp32(x[b].dmin) * y[b].d;
        sum += d * (float)isum - dmin * (float)summ;
    }
    *s = sum;
}

/* ---------------- Q6_K ---------------- */

void mf_ref_from_float_q6_k(const float *x, void *vy, int64_t n) {
    block_q6_K *y = vy;
    int8_t L[QK_K];
    float scales[QK_K / 16];
    for (int64_t b = 0; b < n / QK_K; b++, x += QK_K) {
        float max_scale = 0, max_abs = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            scales[j] = mf_make_qx_quants(16, 32, x + 16 * j, L + 16 * j, NULL);
            if (fabsf(scales[j]) > max_abs) {
                max_abs = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        if (max_abs < MF_GROUP_MAX_EPS) {
            memset(&y[b], 0, sizeof y[b]);
            continue;
        }
        /* 8-bit signed sub-block scales; the largest maps to -128 (clipped to 127
         * on the other side) */
        const float iscale = -128.f / max_scale;
        y[b].d = mf_fp32_to_fp16(1 / iscale);
        for (int j = 0; j < QK_K / 16; j++) {
            int v = mf_nearest_int(iscale * scales[j]);
            y[b].scales[j] = (int8_t)(v < 127 ? v : 127);
        }
        for (int j = 0; j < QK_K / 16; j++) {
            const float d = mf_fp16_to_fp32(y[b].d) * y[b].scales[j];
            if (!d) continue;
            for (int i = 0; i < 16; i++)
                L[16 * j + i] = (int8_t)(clamp_int(mf_nearest_int(x[16 * j + i] / d), -32, 31) + 32);
        }
        /* per 128 elements: ql gets 64 bytes (elements l and l+64 in byte l, l+32
         * and l+96 in byte l+32), qh 32 bytes (top 2 bits of l, l+32, l+64, l+96) */
        for (int h = 0; h < QK_K / 128; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = y[b].ql + 64 * h, *qh = y[b].qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | (Lh[l + 64] & 0xF) << 4);
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | (Lh[l + 96] & 0xF) << 4);
                qh[l] = (uint8_t)((Lh[l] >> 4) | (Lh[l + 32] >> 4) << 2 | (Lh[l + 64] >> 4) << 4 | (Lh[l + 96] >> 4) << 6);
            }
        }
    }
}

/* level - 32 of element e */
static inline int q6k_value(const block_q6_K *x, int e) {
    const int h = e / 128, r = e % 128, l = r % 32, quarter = r / 32;
    const uint8_t lowbyte = x->ql[64 * h + l + 32 * (quarter & 1)];
    const int low = (lowbyte >> (4 * (quarter >> 1))) & 0xF;
    const int high = (x->qh[32 * h + l] >> (2 * quarter)) & 3;
    return (low | high << 4) - 32;
}

void mf_ref_to_float_q6_k(const void *vx, float *y, int64_t n) {
    const block_q6_K *x = vx;
    for (int64_t b = 0; b < n / QK_K; b++, y += QK_K) {
        const float d = mf_fp16_to_fp32(x[b].d);
        for (int e = 0; e < QK_K; e++) y[e] = d * x[b].scales[e / 16] * q6k_value(&x[b], e);
    }
}

/* Per super-block: isum = sum of sc * (q - 32) * a (exact int32), then
 * sum += (dx * dy) * isum, one float per super-block (lanes.h). The offset 32
 * goes through the activation's 16-element sums (sum of (q - 32) * a =
 * sum of q * a - 32 * bsum), so SIMD kernels multiply unsigned levels 0..63. */
void mf_ref_vec_dot_q6_k_q8_k(int n, float *s, const void *vx, const void *vy) {
    const block_q6_K *x = vx;
    const block_q8_K *y = vy;
    float sum = 0.0f;
    for (int b = 0; b < n / QK_K; b++) {
        int isum = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int sub = 0;
            for (int i = 0; i < 16; i++) sub += (q6k_value(&x[b], 16 * j + i) + 32) * y[b].qs[16 * j + i];
            isum += x[b].scales[j] * (sub - 32 * y[b].bsums[j]);
        }
        const float d = mf_fp16_to_fp32(x[b].d) * y[b].d;
        sum += d * (float)isum;
    }
    *s = sum;
}
