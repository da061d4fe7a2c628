/* test_quant_dot.c - the reference dots: vec_dot(x, act(y)) against a
 * double-precision dot of the two dequantized rows, and exact determinism.
 *
 * Pairing (llama.cpp's): Q8_0 activations for Q4_0/Q5_0/Q8_0/IQ4_NL, Q8_1 for
 * Q4_1/Q5_1, Q8_K for the K-quants and IQ4_XS (and the self-dots of Q8_1/Q8_K).
 *
 * Tolerance: the integer part of every kernel is exact, so the only difference
 * from the double dot is float rounding of a few products per block and of the
 * running sum: |s - ref| <= (n_blocks + 8) * FLT_EPSILON * sum|x_i * y_i|.
 * Q4_1/Q5_1 add one known term: the kernel takes the activation block's sum
 * from Q8_1's s field (f16 of d * sum(q) with d unrounded) where the
 * dequantized row implies f16(d) * sum(q); that gap, |m_x| * |s - f16(d) sum(q)|
 * per block, is added to the tolerance exactly. */
#include "testutil.h"
#include "qrand.h"

#include "quant/blocks.h"
#include "quant/types.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mf_type k_types[] = {MF_TYPE_Q4_0, MF_TYPE_Q4_1, MF_TYPE_Q5_0, MF_TYPE_Q5_1, MF_TYPE_Q8_0,
                                  MF_TYPE_Q8_1, MF_TYPE_Q8_K, MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_Q4_K,
                                  MF_TYPE_Q5_K, MF_TYPE_Q6_K, MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};

/* The Q8_1 gap described above, summed over blocks; 0 for other pairings. */
static double q8_1_min_gap(mf_type t, const void *xq, const void *yq, int64_t n) {
    if (t != MF_TYPE_Q4_1 && t != MF_TYPE_Q5_1) return 0;
    const block_q8_1 *y = yq;
    double gap = 0;
    for (int64_t b = 0; b < n / 32; b++) {
        const mf_fp16 m = t == MF_TYPE_Q4_1 ? ((const block_q4_1 *)xq)[b].m : ((const block_q5_1 *)xq)[b].m;
        int sum = 0;
        for (int j = 0; j < 32; j++) sum += y[b].qs[j];
        gap += fabs(mf_fp16_to_fp32(m)) *
               fabs((double)mf_fp16_to_fp32(y[b].s) - (double)mf_fp16_to_fp32(y[b].d) * sum);
    }
    return gap;
}

/* Activation extras must be what the kernels assume: Q8_K's bsums are the
 * 16-element sums of qs; Q8_1's s is d * sum(qs) within f16 rounding. */
static void check_act_extras(mf_type vt, const void *yq, int64_t n) {
    if (vt == MF_TYPE_Q8_K) {
        const block_q8_K *y = yq;
        int bad = 0;
        for (int64_t b = 0; b < n / QK_K; b++)
            for (int g = 0; g < QK_K / 16; g++) {
                int sum = 0;
                for (int j = 0; j < 16; j++) sum += y[b].qs[16 * g + j];
                bad += sum != y[b].bsums[g];
            }
        CHECK(bad == 0, "q8_K: %d bsums differ from the sums of their 16 quants", bad);
    } else if (vt == MF_TYPE_Q8_1) {
        const block_q8_1 *y = yq;
        int bad = 0;
        for (int64_t b = 0; b < n / QK8_1; b++) {
            int sum = 0;
            for (int j = 0; j < QK8_1; j++) sum += y[b].qs[j];
            const double want = (double)mf_fp16_to_fp32(y[b].d) * sum;
            /* d and s each carry one f16 rounding (2^-11 relative) */
            bad += fabs(mf_fp16_to_fp32(y[b].s) - want) > fabs(want) * (2.0 / 2048) + 1e-7;
        }
        CHECK(bad == 0, "q8_1: %d blocks whose s is not d * sum(qs)", bad);
    }
}

static double g_worst[MF_TYPE_COUNT]; /* worst |s - ref| / (eps * sum|xy|) per type */

static void dot_case(mf_type t, int64_t n, qdata kx, qdata ky, qrand *r) {
    const mf_type_traits *tr = mf_type_traits_ref(t);
    const mf_type_traits *vt = mf_type_traits_ref(tr->vec_dot_type);
    const char *name = mf_type_name(t);
    CHECK(vt && vt->from_float && vt->to_float, "%s: activation type %s has no quantizer", name,
          mf_type_name(tr->vec_dot_type));
    if (!vt) return;
    const size_t xb = mf_row_size(t, n), yb = mf_row_size(tr->vec_dot_type, n);
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    float *xd = malloc((size_t)n * sizeof(float)), *yd = malloc((size_t)n * sizeof(float));
    uint8_t *xq = malloc(xb), *yq = malloc(yb);
    qrand_fill(r, x, n, kx, 1.0);
    qrand_fill(r, y, n, ky, 0.3);
    tr->from_float_ref(x, xq, n);
    vt->from_float(y, yq, n);
    check_act_extras(tr->vec_dot_type, yq, n);
    tr->to_float(xq, xd, n);
    vt->to_float(yq, yd, n);

    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; i++) {
        ref += (double)xd[i] * yd[i];
        mag += fabs((double)xd[i] * yd[i]);
    }
    float s = NAN;
    tr->vec_dot((int)n, &s, xq, yq);
    const int64_t nb = n / mf_type_geom_get(t)->blck;
    const double gap = q8_1_min_gap(t, xq, yq, n);
    const double tol = (double)(nb + 8) * FLT_EPSILON * mag + gap;
    const double err = fabs((double)s - ref);
    CHECK(isfinite(s) && err <= tol, "%s n=%lld: vec_dot %.9g vs double %.9g: |diff| %.3g above tolerance %.3g",
          name, (long long)n, s, ref, err, tol);
    if (mag > 0) g_worst[t] = fmax(g_worst[t], fmax(err - gap, 0) / (FLT_EPSILON * mag));

    /* determinism: same call again, and on copies at other addresses */
    float s2 = NAN;
    tr->vec_dot((int)n, &s2, xq, yq);
    uint8_t *xc = malloc(xb + 64), *yc = malloc(yb + 64);
    memcpy(xc + 4, xq, xb);
    memcpy(yc + 36, yq, yb);
    float s3 = NAN;
    tr->vec_dot((int)n, &s3, xc + 4, yc + 36);
    CHECK(!memcmp(&s, &s2, sizeof s) && !memcmp(&s, &s3, sizeof s),
          "%s n=%lld: vec_dot not bitwise repeatable (%.9g, %.9g, %.9g)", name, (long long)n, s, s2, s3);
    free(xc);
    free(yc);
    free(x);
    free(y);
    free(xd);
    free(yd);
    free(xq);
    free(yq);
}

/* A zero activation row must give exactly 0, whatever the weights. */
static void zero_case(mf_type t) {
    const mf_type_traits *tr = mf_type_traits_ref(t);
    const mf_type_traits *vt = mf_type_traits_ref(tr->vec_dot_type);
    const int64_t n = 512;
    float x[512], y[512] = {0};
    qrand r = {42};
    qrand_fill(&r, x, n, QDATA_GAUSS, 1.0);
    uint8_t *xq = malloc(mf_row_size(t, n)), *yq = malloc(mf_row_size(tr->vec_dot_type, n));
    tr->from_float_ref(x, xq, n);
    vt->from_float(y, yq, n);
    float s = NAN;
    tr->vec_dot((int)n, &s, xq, yq);
    CHECK(s == 0.0f, "%s: dot with a zero activation row is %g", mf_type_name(t), s);
    free(xq);
    free(yq);
}

int main(void) {
    qrand r = {0x243f6a8885a308d3ull};
    for (size_t i = 0; i < sizeof k_types / sizeof k_types[0]; i++) {
        const mf_type t = k_types[i];
        const mf_type_traits *tr = mf_type_traits_ref(t);
        CHECK(tr && tr->vec_dot, "%s: no reference vec_dot", mf_type_name(t));
        if (!tr) continue;
        const int blck = mf_type_geom_get(t)->blck;
        const int64_t lens32[] = {32, 96, 256, 1056, 4096, 11008};
        const int64_t lens256[] = {256, 768, 2560, 4096, 11008};
        const int64_t *lens = blck == 32 ? lens32 : lens256;
        const int nlens = blck == 32 ? 6 : 5;
        for (int li = 0; li < nlens; li++)
            for (int kx = 0; kx < QDATA_COUNT; kx++)
                for (int ky = 0; ky < QDATA_COUNT; ky++) dot_case(t, lens[li], (qdata)kx, (qdata)ky, &r);
        zero_case(t);
        fprintf(stderr, "  %-7s . %-5s worst |vec_dot - double dot| = %.2f x FLT_EPSILON x sum|x*y|\n",
                mf_type_name(t), mf_type_name(tr->vec_dot_type), g_worst[t]);
    }
    return test_summary("quant_dot");
}
