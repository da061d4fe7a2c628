/* test_quant_roundtrip.c - dequantize(quantize(x)) stays within each type's
 * error bound, for several row lengths and data shapes, and the reference
 * quantizers handle degenerate rows (zeros, constants, a lone spike).
 *
 * Two kinds of bound:
 *  - the legacy and 8-bit types have a provable per-element bound from their
 *    construction (scale from the block's extreme value, round-half-up or
 *    round-to-nearest, f16 rounding of d and m), checked on every element;
 *  - the K-quants and IQ4 search their scales, so their bound is statistical:
 *    relative RMSE over all rows, and max |error| relative to the enclosing
 *    block's max |x|. The figures are the measured values (N(0,1) data:
 *    Q2_K 0.30, Q3_K 0.15, Q4_K 0.071, Q5_K 0.036, Q6_K 0.018, IQ4 0.077) with
 *    ~20% headroom; each extra bit roughly halves them, as expected. */
#include "testutil.h"
#include "qrand.h"

#include "quant/types.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    mf_type t;
    /* statistical bounds (0 = type has a per-element bound instead) */
    double rmse[QDATA_COUNT]; /* relative RMSE: sqrt(sum e^2 / sum x^2) */
    double max_rel;           /* max |e| / max |x| of the enclosing max_blk elements */
    int max_blk;
} rt_case;

static const rt_case k_cases[] = {
    {MF_TYPE_Q4_0, {0}, 0, 0},
    {MF_TYPE_Q4_1, {0}, 0, 0},
    {MF_TYPE_Q5_0, {0}, 0, 0},
    {MF_TYPE_Q5_1, {0}, 0, 0},
    {MF_TYPE_Q8_0, {0}, 0, 0},
    {MF_TYPE_Q8_1, {0}, 0, 0},
    {MF_TYPE_Q8_K, {0}, 0, 0},
    /*                gauss  heavy  uniform  max_rel  per */
    {MF_TYPE_Q2_K, {0.36, 0.39, 0.28}, 0.46, 256},
    {MF_TYPE_Q3_K, {0.18, 0.24, 0.15}, 0.29, 256},
    {MF_TYPE_Q4_K, {0.086, 0.12, 0.066}, 0.12, 256},
    {MF_TYPE_Q5_K, {0.044, 0.060, 0.034}, 0.057, 256},
    /* Q6_K: the search may shrink the grid so the extreme clamps by up to one
     * step, and one step at the largest sub-block scale is max|x|/32 */
    {MF_TYPE_Q6_K, {0.022, 0.036, 0.016}, 1.0 / 32, 256},
    {MF_TYPE_IQ4_NL, {0.092, 0.147, 0.077}, 0.153, 32},
    {MF_TYPE_IQ4_XS, {0.093, 0.147, 0.078}, 0.157, 256},
};

/* |e| bound for element x of a block (legacy / 8-bit types). f16 rounds d and
 * m to 2^-11 relative; 2^-24 covers its subnormal spacing near zero. */
static double hard_bound(mf_type t, const float *blk, int n) {
    double amax = 0, mn = DBL_MAX, mx = -DBL_MAX;
    for (int i = 0; i < n; i++) {
        amax = fmax(amax, fabs(blk[i]));
        mn = fmin(mn, blk[i]);
        mx = fmax(mx, blk[i]);
    }
    const double f16 = 1.0 / 2048, tiny = 64 * 5.96e-8;
    switch (t) {
    /* levels -8..7 with the extreme on -8: half a step, except the opposite
     * extreme which clamps from 8 to 7 (one full step) */
    case MF_TYPE_Q4_0: return amax / 8 * (1 + 8 * f16) * 1.001 + tiny;
    case MF_TYPE_Q5_0: return amax / 16 * (1 + 16 * f16) * 1.001 + tiny;
    /* levels 0..nmax over [min, max]: half a step, plus the f16 error of d
     * (times the level) and of the min */
    case MF_TYPE_Q4_1: return ((mx - mn) / 15 * (0.5 + 15 * f16) + fabs(mn) * f16) * 1.001 + tiny;
    case MF_TYPE_Q5_1: return ((mx - mn) / 31 * (0.5 + 31 * f16) + fabs(mn) * f16) * 1.001 + tiny;
    /* round to nearest of 255 levels */
    case MF_TYPE_Q8_0:
    case MF_TYPE_Q8_1: return amax / 127 * (0.5 + 127 * f16) * 1.001 + tiny;
    case MF_TYPE_Q8_K: return amax / 127 * 0.5 * 1.001 + tiny; /* d stays f32 */
    default: return 0;
    }
}

typedef struct {
    double se, sx, max_rel, worst_hard; /* worst_hard: max |e| / bound (<= 1 passes) */
    int nonfinite;
} rt_stats;

static void roundtrip_row(const rt_case *c, const float *x, int64_t n, rt_stats *st) {
    const mf_type_traits *tr = mf_type_traits_ref(c->t);
    const int blck = mf_type_geom_get(c->t)->blck;
    void *q = malloc(mf_row_size(c->t, n));
    float *y = malloc((size_t)n * sizeof(float));
    tr->from_float_ref(x, q, n);
    tr->to_float(q, y, n);
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(y[i])) st->nonfinite++;
        const double e = fabs((double)x[i] - y[i]);
        st->se += e * e;
        st->sx += (double)x[i] * x[i];
        if (c->max_blk) {
            const float *b = x + i / c->max_blk * c->max_blk;
            double amax = 0;
            for (int j = 0; j < c->max_blk; j++) amax = fmax(amax, fabs(b[j]));
            if (amax > 0) st->max_rel = fmax(st->max_rel, e / amax);
            else if (e > 0) st->max_rel = INFINITY; /* zeros must stay zeros */
        } else {
            const double bound = hard_bound(c->t, x + i / blck * blck, blck);
            st->worst_hard = fmax(st->worst_hard, bound > 0 ? e / bound : (e > 0 ? INFINITY : 0));
        }
    }
    free(y);
    free(q);
}

static void test_random(const rt_case *c, qrand *r) {
    const int blck = mf_type_geom_get(c->t)->blck;
    /* several row lengths: one block, odd block counts, typical widths */
    const int64_t lens32[] = {32, 96, 256, 1056, 4096};
    const int64_t lens256[] = {256, 768, 2560, 4096};
    const int64_t *lens = blck == 32 ? lens32 : lens256;
    const int nlens = blck == 32 ? 5 : 4;
    const double scales[] = {1.0, 0.01, 300.0}; /* scale invariance, away from f16 limits */
    for (int kind = 0; kind < QDATA_COUNT; kind++) {
        rt_stats st = {0};
        for (int s = 0; s < 3; s++)
            for (int li = 0; li < nlens; li++)
                for (int rep = 0; rep < 3; rep++) {
                    float *x = malloc((size_t)lens[li] * sizeof(float));
                    qrand_fill(r, x, lens[li], (qdata)kind, scales[s]);
                    rt_stats one = {0};
                    roundtrip_row(c, x, lens[li], &one);
                    /* the relative RMSE does not depend on the scale, so summing
                     * rows of different scales needs normalising per row */
                    st.se += one.se / one.sx * (double)lens[li];
                    st.sx += (double)lens[li];
                    st.max_rel = fmax(st.max_rel, one.max_rel);
                    st.worst_hard = fmax(st.worst_hard, one.worst_hard);
                    st.nonfinite += one.nonfinite;
                    free(x);
                }
        const double rmse = sqrt(st.se / st.sx);
        static const char *names[] = {"gauss", "heavy", "uniform"};
        CHECK(st.nonfinite == 0, "%s %s: %d non-finite outputs", mf_type_name(c->t), names[kind], st.nonfinite);
        if (c->max_blk) {
            CHECK(rmse <= c->rmse[kind], "%s %s: relative RMSE %.5f above bound %.5f", mf_type_name(c->t), names[kind],
                  rmse, c->rmse[kind]);
            CHECK(st.max_rel <= c->max_rel, "%s %s: max |error| / block max %.5f above bound %.5f",
                  mf_type_name(c->t), names[kind], st.max_rel, c->max_rel);
            fprintf(stderr, "  %-7s %-7s rel RMSE %.5f (bound %.3f)  max err/amax%d %.5f (bound %.3f)\n",
                    mf_type_name(c->t), names[kind], rmse, c->rmse[kind], c->max_blk, st.max_rel, c->max_rel);
        } else {
            CHECK(st.worst_hard <= 1.0, "%s %s: an element's error is %.4f x its provable bound", mf_type_name(c->t),
                  names[kind], st.worst_hard);
            fprintf(stderr, "  %-7s %-7s rel RMSE %.5f  worst element error = %.3f x provable bound\n",
                    mf_type_name(c->t), names[kind], rmse, st.worst_hard);
        }
    }
}

/* Degenerate rows: exact zeros stay exact; a constant row, a lone spike and a
 * row of one repeated block must come back close and finite. */
static void test_degenerate(const rt_case *c) {
    const mf_type_traits *tr = mf_type_traits_ref(c->t);
    const int64_t n = 512;
    float x[512], y[512];
    void *q = malloc(mf_row_size(c->t, n));
    const char *name = mf_type_name(c->t);

    memset(x, 0, sizeof x);
    tr->from_float_ref(x, q, n);
    tr->to_float(q, y, n);
    int nz = 0;
    for (int i = 0; i < n; i++) nz += y[i] != 0.0f;
    CHECK(nz == 0, "%s: all-zero row dequantizes to %d non-zero values", name, nz);

    /* constant row: representable exactly by every scale/min type; symmetric
     * types put it on their extreme level, which f16 may round slightly */
    for (int i = 0; i < n; i++) x[i] = 0.75f;
    tr->from_float_ref(x, q, n);
    tr->to_float(q, y, n);
    double worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(y[i] - 0.75));
    CHECK(worst <= 0.75 * 0.02, "%s: constant 0.75 row comes back with error %.6f", name, worst);

    /* a lone spike per 256: the zeros around it must stay (near) zero */
    memset(x, 0, sizeof x);
    x[7] = -3.0f;
    x[300] = 2.0f;
    tr->from_float_ref(x, q, n);
    tr->to_float(q, y, n);
    worst = 0;
    for (int i = 0; i < n; i++) worst = fmax(worst, fabs(y[i] - x[i]));
    CHECK(worst <= 3.0 * 0.02, "%s: spike row comes back with error %.6f", name, worst);
    free(q);
}

int main(void) {
    qrand r = {0x9e3779b97f4a7c15ull};
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const rt_case *c = &k_cases[i];
        const mf_type_traits *tr = mf_type_traits_ref(c->t);
        CHECK(tr && tr->from_float_ref && tr->to_float, "%s: no reference quantize/dequantize", mf_type_name(c->t));
        if (!tr) continue;
        test_random(c, &r);
        test_degenerate(c);
    }
    return test_summary("quant_roundtrip");
}
