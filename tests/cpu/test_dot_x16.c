/* test_dot_x16.c - the x16 interleaved layout (quant/interleave.h) and its
 * decode kernels:
 *   - packing 16 rows and unpacking each one gives back the row's bytes
 *     (raw random blocks, so every bit of every field is exercised);
 *   - the reference kernel and every SIMD level's vec_dot_x16 give, bitwise,
 *     the scalar vec_dot of each row, for rows of 1 to 33 blocks or
 *     super-blocks,
 *     weights from raw random bytes, all-0xff bytes (every level at its
 *     maximum: the worst case of the kernels' int16 sums) and the quantizer
 *     at tiny / ordinary / huge scales, activations from the Q8_K / Q8_0
 *     quantizer, raw +-127 and all -127 / all +127,
 *     for Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, Q4_0, Q4_1, Q5_0, Q5_1,
 *     Q8_0, IQ4_NL, F16 (every remainder of its 64-lane cycle) and BF16
 *     (even lengths: every remainder of its 32 double lanes);
 *   - the group and activation buffers are allocated to their exact size
 *     (the ASan build catches a kernel reading past either; the kernels'
 *     prefetches run ahead of the group by design and do not fault). */
#include "testutil.h"
#include "../quant/qrand.h"

#include "cpu/kern/features.h"
#include "quant/blocks.h"
#include "quant/fp16.h"
#include "quant/interleave.h"
#include "quant/types.h"

#include <stdlib.h>
#include <string.h>

static const mf_type k_types[] = {MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_Q4_K,  MF_TYPE_Q5_K,   MF_TYPE_Q6_K,
                                  MF_TYPE_IQ4_XS, MF_TYPE_Q4_0, MF_TYPE_Q4_1, MF_TYPE_Q5_0, MF_TYPE_Q5_1,
                                  MF_TYPE_Q8_0, MF_TYPE_IQ4_NL, MF_TYPE_F16,  MF_TYPE_BF16};
/* row lengths: 1 to 33 super-blocks; for the 32-element types also every
 * remainder of the 8-block accumulator cycle and Qwen2.5-0.5B's widths */
static const int64_t k_kquant[] = {256, 512, 768, 1792, 2048, 4096, 8448};
static const int64_t k_legacy[] = {32, 96, 224, 256, 288, 480, 896, 4864};
/* F16: every remainder of the 64-lane cycle around a few lengths */
static const int64_t k_f16[] = {1, 7, 63, 64, 65, 100, 127, 128, 200, 896, 1000, 4864};
/* BF16 (word pairs: even lengths only) around its 32-lane cycle */
static const int64_t k_bf16[] = {2, 30, 32, 34, 62, 64, 66, 100, 200, 896, 1000, 4864};

/* a random finite bf16 with exponent in [lo, hi) */
static mf_bf16 rand_bf16(qrand *r, int lo, int hi) {
    const double e = lo + qrand_uniform(r) * (hi - lo);
    const double v = ldexp(1.0 + qrand_uniform(r), (int)floor(e)) * (qrand_uniform(r) < 0.5 ? -1 : 1);
    return mf_fp32_to_bf16((float)v);
}

static mf_fp16 rand_f16(qrand *r, int lo, int hi) {
    const double e = lo + qrand_uniform(r) * (hi - lo);
    const double v = ldexp(1.0 + qrand_uniform(r), (int)floor(e)) * (qrand_uniform(r) < 0.5 ? -1 : 1);
    return mf_fp32_to_fp16((float)v);
}

/* 16 rows: raw random blocks with finite f16 scales, or quantized data */
static void make_rows(qrand *r, mf_type t, int64_t k, int mode, uint8_t *rows) {
    const size_t rs = mf_row_size(t, k);
    const int64_t nb = k / mf_type_geom_get(t)->blck;
    if ((mode == 0 || mode == 4) && t == MF_TYPE_F16) {
        for (int64_t i = 0; i < 16 * k; i++) ((mf_fp16 *)rows)[i] = rand_f16(r, -14, 8);
        return;
    }
    if ((mode == 0 || mode == 4) && t == MF_TYPE_BF16) {
        /* wide exponents: the double lanes' sums must stay exact across magnitudes too */
        for (int64_t i = 0; i < 16 * k; i++) ((mf_bf16 *)rows)[i] = rand_bf16(r, mode ? -100 : -20, mode ? 100 : 20);
        return;
    }
    if (mode == 0 || mode == 4) {
        /* mode 4: every level at its maximum, the int16 sums' worst case */
        for (size_t i = 0; i < 16 * rs; i++) rows[i] = mode == 4 ? 0xff : (uint8_t)(qrand_uniform(r) * 256);
        for (int row = 0; row < 16; row++)
            for (int64_t b = 0; b < nb; b++) {
                uint8_t *p = rows + row * rs + (size_t)b * (size_t)mf_type_geom_get(t)->size;
                const mf_fp16 h[2] = {rand_f16(r, -14, 4), rand_f16(r, -14, 4)};
                if (t == MF_TYPE_Q4_K || t == MF_TYPE_Q5_K || t == MF_TYPE_Q4_1 || t == MF_TYPE_Q5_1) memcpy(p, h, 4); /* d, dmin / m */
                else if (t == MF_TYPE_Q6_K) memcpy(&((block_q6_K *)p)->d, h, 2);
                else if (t == MF_TYPE_Q3_K) memcpy(&((block_q3_K *)p)->d, h, 2);
                else if (t == MF_TYPE_Q2_K) memcpy(&((block_q2_K *)p)->d, h, 4); /* d, dmin */
                else memcpy(p, h, 2); /* Q4_0 / Q5_0 / Q8_0 / IQ4_NL / IQ4_XS: d first */
            }
        return;
    }
    const double scale = mode == 1 ? 1e-4 : mode == 2 ? 1.0 : 3e3;
    float *x = malloc((size_t)k * sizeof(float));
    for (int row = 0; row < 16; row++) {
        qrand_fill(r, x, k, (qdata)(row % QDATA_COUNT), scale);
        if (row == 5) memset(x, 0, (size_t)k * sizeof(float)); /* an all-zero row */
        mf_type_traits_ref(t)->from_float_ref(x, rows + row * rs, k);
    }
    free(x);
}

/* an activation row of type vt (Q8_K or Q8_0) from the quantizer; raw 1:
 * then every quant set to +-127, raw 2 / 3: all -127 / all +127 (Q8_K bsums
 * kept consistent) */
static void make_act(qrand *r, mf_type vt, int64_t k, int raw, uint8_t *y) {
    float *x = malloc((size_t)k * sizeof(float));
    qrand_fill(r, x, k, QDATA_HEAVY, 1.0);
    mf_type_traits_ref(vt)->from_float(x, y, k);
    free(x);
    if (!raw) return;
    if (vt == MF_TYPE_F16) {
        for (int64_t i = 0; i < k; i++) ((mf_fp16 *)y)[i] = rand_f16(r, -14, 8);
        return;
    }
    if (vt == MF_TYPE_BF16) {
        for (int64_t i = 0; i < k; i++) ((mf_bf16 *)y)[i] = rand_bf16(r, raw == 1 ? -100 : -20, raw == 1 ? 100 : 20);
        return;
    }
    if (vt == MF_TYPE_Q8_1) {
        /* d and s stay the quantizer's: the kernels take s as given */
        for (int64_t b = 0; b < k / 32; b++)
            for (int i = 0; i < 32; i++) ((block_q8_1 *)y)[b].qs[i] = (int8_t)(raw == 2 ? -127 : raw == 3 ? 127 : qrand_uniform(r) < 0.5 ? -127 : 127);
        return;
    }
    if (vt == MF_TYPE_Q8_0) {
        for (int64_t b = 0; b < k / 32; b++)
            for (int i = 0; i < 32; i++) ((block_q8_0 *)y)[b].qs[i] = (int8_t)(raw == 2 ? -127 : raw == 3 ? 127 : qrand_uniform(r) < 0.5 ? -127 : 127);
        return;
    }
    block_q8_K *q = (block_q8_K *)y;
    for (int64_t b = 0; b < k / QK_K; b++) {
        for (int i = 0; i < QK_K; i++) q[b].qs[i] = (int8_t)(raw == 2 ? -127 : raw == 3 ? 127 : qrand_uniform(r) < 0.5 ? -127 : 127);
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += q[b].qs[16 * j + i];
            q[b].bsums[j] = (int16_t)s;
        }
    }
}

int main(void) {
    qrand r = {0x9e3779b97f4a7c15ull};
    const mf_cpu_level top = mf_cpu_level_supported();
    int kernels_run = 0;
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const mf_type t = k_types[ti];
        const mf_type_traits *ref = mf_type_traits_ref(t);
        CHECK(!ref->vec_dot_x16, "%s: the reference table has no x16 kernel", mf_type_name(t));
        const int blck = mf_type_geom_get(t)->blck, kq = blck == QK_K;
        CHECK(t == MF_TYPE_BF16 || ((blck == 1 || !mf_x16_layout(t, blck - 1)) && mf_x16_layout(t, blck)),
              "%s: layout needs whole blocks", mf_type_name(t));
        if (t == MF_TYPE_BF16) CHECK(!mf_x16_layout(t, 3) && mf_x16_layout(t, 2), "BF16: layout needs even rows");
        const int bf = t == MF_TYPE_BF16;
        const int64_t *ks = kq ? k_kquant : bf ? k_bf16 : blck == 1 ? k_f16 : k_legacy;
        const size_t nks = kq   ? sizeof k_kquant / sizeof k_kquant[0]
                           : bf ? sizeof k_bf16 / sizeof k_bf16[0]
                           : blck == 1 ? sizeof k_f16 / sizeof k_f16[0] : sizeof k_legacy / sizeof k_legacy[0];
        const mf_type vt = ref->vec_dot_type;
        for (size_t bi = 0; bi < nks; bi++) {
            const int64_t k = ks[bi];
            const size_t rs = mf_row_size(t, k);
            for (int mode = 0; mode < 5; mode++) {
                uint8_t *rows = malloc(16 * rs), *group = malloc(16 * rs), *back = malloc(rs);
                uint8_t *y = malloc(mf_row_size(vt, k));
                make_rows(&r, t, k, mode, rows);
                mf_x16_pack(t, rows, rs, k, group);
                for (int row = 0; row < 16; row++) {
                    mf_x16_unpack_row(t, group, row, k, back);
                    CHECK(!memcmp(back, rows + row * rs, rs), "%s k=%lld mode %d: row %d does not unpack to its bytes",
                          mf_type_name(t), (long long)k, mode, row);
                }
                for (int raw = 0; raw < 4; raw++) {
                    make_act(&r, vt, k, raw, y);
                    float want[16], got[16];
                    for (int row = 0; row < 16; row++) ref->vec_dot((int)k, &want[row], rows + row * rs, y);
                    mf_x16_dot_ref(t, (int)k, got, group, y, back);
                    CHECK(!memcmp(want, got, sizeof want), "%s k=%lld mode %d: mf_x16_dot_ref differs from vec_dot",
                          mf_type_name(t), (long long)k, mode);
                    for (int lv = MF_CPU_SCALAR; lv <= (int)top; lv++) {
                        const mf_type_traits *tr = mf_cpu_traits_for_level(t, (mf_cpu_level)lv);
                        if (!tr || !tr->vec_dot_x16) continue;
                        kernels_run++;
                        memset(got, 0xff, sizeof got);
                        tr->vec_dot_x16((int)k, got, group, y);
                        for (int row = 0; row < 16; row++)
                            CHECK(!memcmp(&want[row], &got[row], 4),
                                  "%s k=%lld mode %d act %d level %s row %d: %.9g, vec_dot %.9g", mf_type_name(t),
                                  (long long)k, mode, raw, mf_cpu_level_name((mf_cpu_level)lv), row, got[row], want[row]);
                    }
                }
                free(rows);
                free(group);
                free(back);
                free(y);
            }
        }
    }
    if (top >= MF_CPU_AVX2) CHECK(kernels_run > 0, "the CPU has %s but no x16 kernel ran", mf_cpu_level_name(top));
    else printf("test_dot_x16: this CPU has no AVX2; only the layout and the reference kernel were checked\n");
    printf("test_dot_x16: %d SIMD kernel runs\n", kernels_run);
    return test_summary("test_dot_x16");
}
