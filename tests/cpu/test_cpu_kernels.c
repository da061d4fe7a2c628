/* test_cpu_kernels.c - every SIMD kernel the CPU supports (AVX2, AVX-512,
 * AVX-512 VNNI) against the scalar reference, bitwise (memcmp):
 *   - vec_dot of every type with its activation type, on rows of one block,
 *     odd and even block counts, partial 8-block groups and 4096+ elements,
 *     from quantized random data at ordinary and extreme scales, from raw
 *     random block bytes (every level and scale byte pattern), and at
 *     misaligned addresses;
 *   - the activation quantizers (from_float of F16, BF16, Q8_0, Q8_1, Q8_K) on
 *     random rows and on rows salted with NaN, inf, -0, subnormals and exact
 *     rounding ties;
 *   - dequantization (to_float), F16 and BF16 on all 65536 bit patterns.
 *
 * The float dots are bitwise too: the references fix a lane layout
 * (quant/lanes.h) the SIMD kernels keep. Their accuracy against an exact dot
 * is checked separately, with the tolerance stated at float_accuracy().
 *
 * Activation bytes are drawn from [-127, 127]: the quantizers never write
 * -128, and the AVX2 / AVX-512 (non-VNNI) signed dots rely on that (see
 * src/cpu/dot_legacy_avx2.c). Q8_K bsums are kept equal to the sums of their
 * quants, which the quantizer guarantees and the references assume.
 *
 * A level the CPU lacks is skipped with a note. */
#include "testutil.h"
#include "../quant/qrand.h"

#include "cpu/kern/features.h"
#include "quant/blocks.h"
#include "quant/types.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mf_type k_dot_types[] = {MF_TYPE_F32,  MF_TYPE_F16,  MF_TYPE_BF16, MF_TYPE_Q4_0,   MF_TYPE_Q4_1,  MF_TYPE_Q5_0,
                                      MF_TYPE_Q5_1, MF_TYPE_Q8_0, MF_TYPE_Q8_1, MF_TYPE_Q2_K,   MF_TYPE_Q3_K,  MF_TYPE_Q4_K,
                                      MF_TYPE_Q5_K, MF_TYPE_Q6_K, MF_TYPE_Q8_K, MF_TYPE_IQ4_NL, MF_TYPE_IQ4_XS};
static const mf_type k_act_types[] = {MF_TYPE_F16, MF_TYPE_BF16, MF_TYPE_Q8_0, MF_TYPE_Q8_1, MF_TYPE_Q8_K};

static const mf_cpu_level k_levels[] = {MF_CPU_AVX2, MF_CPU_AVX512, MF_CPU_AVX512_VNNI};
#define N_LEVELS 3

static int is_float_type(int t) { return t == MF_TYPE_F32 || t == MF_TYPE_F16 || t == MF_TYPE_BF16; }

/* ---------------- data ---------------- */

static void rand_bytes(qrand *r, uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(qrand_uniform(r) * 256);
}

/* A finite f16 of either sign with magnitude 2^e, e uniform in [lo, hi], plus
 * random mantissa bits. */
static mf_fp16 rand_f16(qrand *r, int lo, int hi) {
    const double e = lo + qrand_uniform(r) * (hi - lo);
    const double v = ldexp(1.0 + qrand_uniform(r), (int)floor(e)) * (qrand_uniform(r) < 0.5 ? -1 : 1);
    return mf_fp32_to_fp16((float)v);
}

/* Random bytes for a row of weights of type t with the f16 scale fields set
 * to finite values (raw random f16 would put inf/NaN in most rows). */
static void raw_weights(qrand *r, int t, uint8_t *row, int64_t n) {
    const mf_type_geom *g = mf_type_geom_get(t);
    const int64_t nb = n / g->blck;
    rand_bytes(r, row, (size_t)nb * (size_t)g->size);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = row + b * g->size;
        switch (t) {
        case MF_TYPE_F16:
            ((mf_fp16 *)row)[b] = rand_f16(r, -8, 8);
            break;
        case MF_TYPE_BF16: ((mf_bf16 *)row)[b] = mf_fp32_to_bf16(mf_fp16_to_fp32(rand_f16(r, -8, 8))); break;
        case MF_TYPE_F32: {
            float v = mf_fp16_to_fp32(rand_f16(r, -8, 8));
            memcpy(p, &v, 4);
            break;
        }
        case MF_TYPE_Q4_0: ((block_q4_0 *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q4_1: ((block_q4_1 *)p)->d = rand_f16(r, -14, 4), ((block_q4_1 *)p)->m = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q5_0: ((block_q5_0 *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q5_1: ((block_q5_1 *)p)->d = rand_f16(r, -14, 4), ((block_q5_1 *)p)->m = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q8_0: ((block_q8_0 *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q8_1: ((block_q8_1 *)p)->d = rand_f16(r, -14, 4), ((block_q8_1 *)p)->s = rand_f16(r, -14, 4); break;
        case MF_TYPE_IQ4_NL: ((block_iq4_nl *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q2_K: ((block_q2_K *)p)->d = rand_f16(r, -14, 4), ((block_q2_K *)p)->dmin = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q3_K: ((block_q3_K *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q4_K: ((block_q4_K *)p)->d = rand_f16(r, -14, 4), ((block_q4_K *)p)->dmin = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q5_K: ((block_q5_K *)p)->d = rand_f16(r, -14, 4), ((block_q5_K *)p)->dmin = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q6_K: ((block_q6_K *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_IQ4_XS: ((block_iq4_xs *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q8_K: {
            block_q8_K *q = (block_q8_K *)p;
            q->d = mf_fp16_to_fp32(rand_f16(r, -14, 4));
            for (int j = 0; j < QK_K / 16; j++) {
                int s = 0;
                for (int i = 0; i < 16; i++) s += q->qs[16 * j + i];
                q->bsums[j] = (int16_t)s;
            }
            break;
        }
        default: break;
        }
    }
}

/* Random activation bytes of type vt: quants in [-127, 127], finite scales,
 * consistent bsums. */
static void raw_acts(qrand *r, int vt, uint8_t *row, int64_t n) {
    raw_weights(r, vt, row, n);
    const int64_t nb = n / mf_type_geom_get(vt)->blck;
    int8_t *qs = NULL;
    for (int64_t b = 0; b < nb; b++) {
        if (vt == MF_TYPE_Q8_0) qs = ((block_q8_0 *)row)[b].qs;
        else if (vt == MF_TYPE_Q8_1) qs = ((block_q8_1 *)row)[b].qs;
        else if (vt == MF_TYPE_Q8_K) qs = ((block_q8_K *)row)[b].qs;
        else return;
        const int len = vt == MF_TYPE_Q8_K ? QK_K : 32;
        for (int j = 0; j < len; j++)
            if (qs[j] == -128) qs[j] = (int8_t)(qrand_uniform(r) < 0.5 ? -127 : 127);
        if (vt == MF_TYPE_Q8_K) {
            block_q8_K *q = &((block_q8_K *)row)[b];
            for (int j = 0; j < QK_K / 16; j++) {
                int s = 0;
                for (int i = 0; i < 16; i++) s += q->qs[16 * j + i];
                q->bsums[j] = (int16_t)s;
            }
        }
    }
}

/* ---------------- vec_dot ---------------- */

static int g_dot_checked[MF_TYPE_COUNT][N_LEVELS];

/* Runs every available level's vec_dot on (xq, yq) and compares bitwise with
 * the reference, also at misaligned copies. */
static void check_dot(int t, int64_t n, const uint8_t *xq, const uint8_t *yq, const char *what) {
    const mf_type_traits *ref = mf_type_traits_ref(t);
    const size_t xb = mf_row_size(t, n), yb = mf_row_size(ref->vec_dot_type, n);
    float want;
    ref->vec_dot((int)n, &want, xq, yq);
    /* copies off vector alignment but on the blocks' C alignment (4 covers
     * Q8_K's float and F32): odd addresses would be undefined even in C */
    uint8_t *xc = malloc(xb + 64), *yc = malloc(yb + 64);
    memcpy(xc + 4, xq, xb);
    memcpy(yc + 36, yq, yb);
    for (int li = 0; li < N_LEVELS; li++) {
        const mf_type_traits *ft = mf_cpu_traits_for_level(t, k_levels[li]);
        if (!ft) continue;
        float got = NAN, got2 = NAN;
        ft->vec_dot((int)n, &got, xq, yq);
        ft->vec_dot((int)n, &got2, xc + 4, yc + 36);
        CHECK(!memcmp(&got, &want, 4) && !memcmp(&got2, &want, 4),
              "%s %s n=%lld (%s): vec_dot %.9g (misaligned %.9g) != reference %.9g", mf_cpu_level_name(k_levels[li]),
              mf_type_name(t), (long long)n, what, got, got2, want);
        g_dot_checked[t][li]++;
    }
    free(xc);
    free(yc);
}

/* The float dots' error against a double dot of the same (already rounded)
 * inputs. F32/F16 sum in 64 float lanes (each lane gets ceil(n/64) fused
 * adds) and fold in 6 pairwise levels, so |s - exact| <= (ceil(n/64) + 6 + 1)
 * * eps/2 * sum|x*y| (the +1 is the final rounding). BF16 sums exact products
 * in double: only the final rounding to float, eps/2 * |exact|, plus a double
 * term that is negligible but allowed as (n + 5) * 2^-53 * sum|x*y|. */
static double g_float_worst[3];

static void float_accuracy(int t, int64_t n, const uint8_t *xq, const uint8_t *yq) {
    const mf_type_traits *ref = mf_type_traits_ref(t);
    float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
    ref->to_float(xq, x, n);
    ref->to_float(yq, y, n);
    double exact = 0, mag = 0;
    for (int64_t i = 0; i < n; i++) {
        exact += (double)x[i] * y[i];
        mag += fabs((double)x[i] * y[i]);
    }
    float s;
    ref->vec_dot((int)n, &s, xq, yq);
    double tol;
    if (t == MF_TYPE_BF16) tol = FLT_EPSILON / 2 * fabs(exact) + (double)(n + 5) * ldexp(1, -53) * mag;
    else tol = (double)((n + 63) / 64 + 7) * FLT_EPSILON / 2 * mag;
    /* the double reference itself is off by up to n * 2^-53 * mag */
    tol += (double)n * ldexp(1, -53) * mag;
    const double err = fabs((double)s - exact);
    CHECK(err <= tol, "%s n=%lld: float dot %.9g vs exact %.9g: error %.3g above %.3g", mf_type_name(t), (long long)n, s,
          exact, err, tol);
    const int k = t == MF_TYPE_F32 ? 0 : t == MF_TYPE_F16 ? 1 : 2;
    if (mag > 0) g_float_worst[k] = fmax(g_float_worst[k], err / (FLT_EPSILON * mag));
    free(x);
    free(y);
}

static void dot_cases(int t, qrand *r) {
    const mf_type_traits *ref = mf_type_traits_ref(t);
    const int vt = ref->vec_dot_type;
    const int blck = mf_type_geom_get(t)->blck;
    /* lengths in blocks: 1, partial and whole 8-block groups, odd counts, >= 4096 elements */
    static const int64_t nb32[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 128, 133, 344};
    static const int64_t nb256[] = {1, 2, 3, 5, 8, 9, 16, 17, 43};
    /* float rows: every residue class of the 64-lane step that matters (partial
     * 8- and 16-lane registers, whole registers, one past) */
    static const int64_t nfl[] = {1,  5,  8,  15, 16,  17,  31,  32,  33,  47,   48,   49,   63,   64,
                                  65, 96, 111, 112, 127, 128, 129, 1000, 4096, 4101, 4144, 11008, 11009};
    const int64_t *lens = blck == 32 ? nb32 : blck == 256 ? nb256 : nfl;
    const int nlens = blck == 32 ? 12 : blck == 256 ? 9 : (int)(sizeof nfl / sizeof nfl[0]);
    /* weight / activation scales: ordinary, tiny (subnormal f16 scales), huge */
    static const double sx[] = {1.0, 2e-6, 4e5, 1.0};
    static const double sy[] = {0.3, 1.0, 1e-5, 3e4};
    for (int li = 0; li < nlens; li++) {
        const int64_t n = lens[li] * (blck > 1 ? blck : 1);
        const size_t xb = mf_row_size(t, n), yb = mf_row_size(vt, n);
        uint8_t *xq = malloc(xb), *yq = malloc(yb);
        float *x = malloc((size_t)n * sizeof(float)), *y = malloc((size_t)n * sizeof(float));
        char what[64];
        for (int c = 0; c < 4; c++) {
            qrand_fill(r, x, n, (qdata)(c % QDATA_COUNT), sx[c]);
            qrand_fill(r, y, n, (qdata)((c + 1) % QDATA_COUNT), sy[c]);
            ref->from_float_ref(x, xq, n);
            mf_type_traits_ref(vt)->from_float(y, yq, n);
            snprintf(what, sizeof what, "quantized, scales %g / %g", sx[c], sy[c]);
            check_dot(t, n, xq, yq, what);
            if (is_float_type(t) && c == 0) float_accuracy(t, n, xq, yq);
        }
        for (int c = 0; c < 2; c++) {
            raw_weights(r, t, xq, n);
            raw_acts(r, vt, yq, n);
            check_dot(t, n, xq, yq, "random block bytes");
        }
        /* a zero activation row */
        memset(y, 0, (size_t)n * sizeof(float));
        mf_type_traits_ref(vt)->from_float(y, yq, n);
        check_dot(t, n, xq, yq, "zero activations");
        free(xq);
        free(yq);
        free(x);
        free(y);
    }
}

/* ---------------- from_float ---------------- */

/* Salts a row with the values that stress quantizers: NaN, +-inf, -0,
 * subnormals, huge values, and (for 8-bit) exact .5 ties of x / d. */
static void salt(qrand *r, float *x, int64_t n, int kind) {
    const float specials[] = {NAN, -NAN, INFINITY, -INFINITY, -0.0f, 1e-40f, -3e-39f, 3e38f, -3e38f, 65504.f, 65520.f, 6e-8f};
    if (kind == 0) { /* sparse specials */
        for (int64_t i = 0; i < n; i++)
            if (qrand_uniform(r) < 0.03) x[i] = specials[(int)(qrand_uniform(r) * 12)];
    } else { /* ties: a block max of 127 makes d = 1, so k + 0.5 rounds on a tie */
        for (int64_t i = 0; i < n; i++) {
            const int k = (int)(qrand_uniform(r) * 253) - 126;
            x[i] = (float)k + (qrand_uniform(r) < 0.5 ? 0.5f : 0.0f);
            if (i % 32 == 0) x[i] = qrand_uniform(r) < 0.5 ? 127.f : -127.f;
        }
    }
}

static int g_q_checked[MF_TYPE_COUNT][N_LEVELS];

static void check_quantize(int t, const float *x, int64_t n, const char *what) {
    const mf_type_traits *ref = mf_type_traits_ref(t);
    const size_t nbytes = mf_row_size(t, n);
    uint8_t *want = malloc(nbytes + 4), *got = malloc(nbytes + 4);
    float *xc = malloc((size_t)n * sizeof(float) + 8);
    memcpy((uint8_t *)xc + 4, x, (size_t)n * sizeof(float));
    ref->from_float(x, want, n);
    for (int li = 0; li < N_LEVELS; li++) {
        const mf_type_traits *ft = mf_cpu_traits_for_level(t, k_levels[li]);
        if (!ft) continue;
        memset(got, 0xa5, nbytes + 1);
        ft->from_float(x, got, n);
        size_t first = nbytes;
        for (size_t i = 0; i < nbytes && first == nbytes; i++)
            if (got[i] != want[i]) first = i;
        CHECK(first == nbytes && got[nbytes] == 0xa5, "%s from_float %s n=%lld (%s): bytes differ from byte %zu",
              mf_cpu_level_name(k_levels[li]), mf_type_name(t), (long long)n, what, first);
        /* source and destination off vector alignment */
        ft->from_float((const float *)((uint8_t *)xc + 4), got + 4, n);
        CHECK(!memcmp(got + 4, want, nbytes), "%s from_float %s n=%lld (%s): misaligned bytes differ",
              mf_cpu_level_name(k_levels[li]), mf_type_name(t), (long long)n, what);
        g_q_checked[t][li]++;
    }
    free(want);
    free(got);
    free(xc);
}

static void quantize_cases(int t, qrand *r) {
    const int blck = mf_type_geom_get(t)->blck;
    static const int64_t nb32[] = {1, 3, 8, 9, 128, 344};
    static const int64_t nb256[] = {1, 2, 16, 43};
    static const int64_t nfl[] = {1, 7, 8, 15, 16, 17, 33, 4096, 4101};
    const int64_t *lens = blck == 32 ? nb32 : blck == 256 ? nb256 : nfl;
    const int nlens = blck == 32 ? 6 : blck == 256 ? 4 : 9;
    static const double scales[] = {1.0, 1e-7, 3e5, 1e-30, 1e30};
    for (int li = 0; li < nlens; li++) {
        const int64_t n = lens[li] * blck;
        float *x = malloc((size_t)n * sizeof(float));
        char what[64];
        for (int c = 0; c < 5; c++) {
            qrand_fill(r, x, n, (qdata)(c % QDATA_COUNT), scales[c]);
            snprintf(what, sizeof what, "random, scale %g", scales[c]);
            check_quantize(t, x, n, what);
        }
        qrand_fill(r, x, n, QDATA_HEAVY, 1.0);
        salt(r, x, n, 0);
        check_quantize(t, x, n, "NaN/inf/-0/subnormal salted");
        salt(r, x, n, 1);
        check_quantize(t, x, n, "rounding ties");
        memset(x, 0, (size_t)n * sizeof(float));
        check_quantize(t, x, n, "zeros");
        free(x);
    }
}

/* ---------------- to_float ---------------- */

static int g_d_checked[MF_TYPE_COUNT][N_LEVELS];

static void check_dequant(int t, const uint8_t *q, int64_t n, const char *what) {
    const mf_type_traits *ref = mf_type_traits_ref(t);
    float *want = malloc((size_t)n * sizeof(float) + 4), *got = malloc((size_t)n * sizeof(float) + 4);
    ref->to_float(q, want, n);
    for (int li = 0; li < N_LEVELS; li++) {
        const mf_type_traits *ft = mf_cpu_traits_for_level(t, k_levels[li]);
        if (!ft) continue;
        memset(got, 0x5a, (size_t)n * sizeof(float) + 4);
        ft->to_float(q, got, n);
        int64_t first = n;
        for (int64_t i = 0; i < n && first == n; i++)
            if (memcmp(&got[i], &want[i], 4)) first = i;
        CHECK(first == n && ((uint8_t *)got)[n * 4] == 0x5a, "%s to_float %s n=%lld (%s): element %lld is %08x, reference %08x",
              mf_cpu_level_name(k_levels[li]), mf_type_name(t), (long long)n, what, (long long)first,
              first < n ? mf_f32_bits(got[first]) : 0, first < n ? mf_f32_bits(want[first]) : 0);
        g_d_checked[t][li]++;
    }
    free(want);
    free(got);
}

static void dequant_cases(int t, qrand *r) {
    const mf_type_traits *ref = mf_type_traits_ref(t);
    const int blck = mf_type_geom_get(t)->blck;
    if (t == MF_TYPE_F16 || t == MF_TYPE_BF16) { /* every bit pattern, plus a short tail */
        uint16_t *all = malloc(65536 * 2 + 2);
        for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
        check_dequant(t, (const uint8_t *)all, 65536, "all 65536 bit patterns");
        check_dequant(t, (const uint8_t *)(all + 65531), 5, "tail");
        free(all);
    }
    const int64_t n = (blck == 1 ? 1000 : 41 * blck);
    const size_t nbytes = mf_row_size(t, n);
    uint8_t *q = malloc(nbytes);
    float *x = malloc((size_t)n * sizeof(float));
    for (int c = 0; c < 3; c++) {
        rand_bytes(r, q, nbytes); /* scales may be inf / NaN: the results must still agree */
        check_dequant(t, q, n, "raw random bytes");
        raw_weights(r, t, q, n);
        check_dequant(t, q, n, "random bytes, finite scales");
        qrand_fill(r, x, n, (qdata)c, c == 1 ? 1e-6 : 1.0);
        ref->from_float_ref(x, q, n);
        check_dequant(t, q, n, "quantized");
    }
    free(q);
    free(x);
}

/* ---------------- dispatch ---------------- */

static void dispatch_checks(void) {
    const mf_cpu_level sup = mf_cpu_level_supported();
    /* levels up to the supported one exist; above it they are refused */
    for (int lv = 0; lv < MF_CPU_LEVELS; lv++) {
        const mf_type_traits *t = mf_cpu_traits_for_level(MF_TYPE_Q4_0, (mf_cpu_level)lv);
        CHECK((t != NULL) == (lv <= (int)sup), "level %s: traits %s but the CPU supports up to %s",
              mf_cpu_level_name((mf_cpu_level)lv), t ? "given" : "refused", mf_cpu_level_name(sup));
    }
    CHECK(mf_cpu_traits_for_level(MF_TYPE_IQ2_XXS, MF_CPU_SCALAR) == NULL, "unimplemented type got traits");
    /* scalar level = the references, pointer for pointer */
    for (size_t i = 0; i < sizeof k_dot_types / sizeof k_dot_types[0]; i++) {
        const mf_type_traits *a = mf_cpu_traits_for_level(k_dot_types[i], MF_CPU_SCALAR), *b = mf_type_traits_ref(k_dot_types[i]);
        CHECK(a && b && !memcmp(a, b, sizeof *a), "%s: scalar level is not the reference table", mf_type_name(k_dot_types[i]));
    }
    /* init chooses the level (no MINFER_NO_* set by ctest) and overwrites nothing: quant/'s table stays
     * the references, the level's table has every type */
    const mf_cpu_level lv = mf_cpu_init();
    CHECK(mf_cpu_init() == lv && lv == sup, "mf_cpu_init: level %s, the CPU supports %s", mf_cpu_level_name(lv),
          mf_cpu_level_name(sup));
    for (size_t i = 0; i < sizeof k_dot_types / sizeof k_dot_types[0]; i++) {
        const mf_type_traits *want = mf_cpu_traits_for_level(k_dot_types[i], lv), *live = mf_type_traits_get(k_dot_types[i]);
        CHECK(want && live == mf_type_traits_ref(k_dot_types[i]), "%s: the reference table was overwritten, or level %s has no kernels",
              mf_type_name(k_dot_types[i]), mf_cpu_level_name(lv));
    }
    fprintf(stderr, "cpu: supports %s; installed: %s\n", mf_cpu_level_name(sup), mf_cpu_kernels_note());
}

int main(void) {
    const mf_cpu_level sup = mf_cpu_level_supported();
    for (int li = 0; li < N_LEVELS; li++)
        if (k_levels[li] > sup)
            fprintf(stderr, "note: this CPU lacks %s; its kernels are not tested here\n", mf_cpu_level_name(k_levels[li]));
    dispatch_checks();

    qrand r = {0x9e3779b97f4a7c15ull};
    const size_t ntypes = sizeof k_dot_types / sizeof k_dot_types[0];
    for (size_t i = 0; i < ntypes; i++) dot_cases(k_dot_types[i], &r);
    for (size_t i = 0; i < sizeof k_act_types / sizeof k_act_types[0]; i++) quantize_cases(k_act_types[i], &r);
    for (size_t i = 0; i < ntypes; i++) dequant_cases(k_dot_types[i], &r);

    /* each level's kernels: its own (+) or inherited from the level below (.) */
    fprintf(stderr, "  type     vec_dot/from_float/to_float per level (+ own kernel, . inherited), bitwise comparisons\n");
    for (size_t i = 0; i < ntypes; i++) {
        const int t = k_dot_types[i];
        char line[256];
        int o = snprintf(line, sizeof line, "  %-7s", mf_type_name(t));
        const mf_type_traits *below = mf_type_traits_ref(t);
        for (int li = 0; li < N_LEVELS; li++) {
            const mf_type_traits *ft = mf_cpu_traits_for_level(t, k_levels[li]);
            if (!ft) continue;
            o += snprintf(line + o, sizeof line - (size_t)o, " | %s %c%c%c %3d/%2d/%d", mf_cpu_level_name(k_levels[li]),
                          ft->vec_dot != below->vec_dot ? '+' : '.', ft->from_float != below->from_float ? '+' : '.',
                          ft->to_float != below->to_float ? '+' : '.', g_dot_checked[t][li], g_q_checked[t][li],
                          g_d_checked[t][li]);
            below = ft;
        }
        fprintf(stderr, "%s\n", line);
    }
    fprintf(stderr, "  float dots, worst |dot - exact| / (FLT_EPSILON * sum|x*y|): f32 %.3f, f16 %.3f, bf16 %.3g\n",
            g_float_worst[0], g_float_worst[1], g_float_worst[2]);
    return test_summary("cpu_kernels");
}
