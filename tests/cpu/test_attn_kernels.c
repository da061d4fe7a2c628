/* test_attn_kernels.c - attention inner loops: the AVX2 and AVX-512 sets equal
 * the scalar set bitwise (dot, scores, accum, exp_sum, axpy, scale, and the f16/q8_0 row
 * loads) on random data and odd lengths; mf_attn_expf is within 2e-7 relative
 * of exp() over the range softmax uses; and the attention op (any KV type)
 * matches a double-precision softmax(q.k) v reference. */
#include "testutil.h"
#include "cpu/kern/attn/attn_kernels.h"
#include "quant/types.h"
#include "engine/backend.h"
#include "cpu/kern/features.h"
#include "cpu/cpu.h"
#include "step_util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the kernels a CPU backend made now would use */
static inline const mf_type_traits *level_traits(int t) { return mf_cpu_traits_for_level(t, mf_cpu_init()); }

static uint64_t g_s = 88172645463325252ull;
static float frand(void) {
    g_s ^= g_s << 13;
    g_s ^= g_s >> 7;
    g_s ^= g_s << 17;
    return (float)((double)(g_s >> 11) * 0x1.0p-53 * 2.0 - 1.0);
}

static void compare_sets(mf_kv_type kv, const mf_attn_kernels *a, const mf_attn_kernels *b) {
    enum { NQ = 7, NK = 37 };
    const int dims[] = {8, 16, 32, 64, 80, 96, 128, 13, 256, 200, 140};
    for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const int d = dims[di];
        static float qs[NQ][256], ks[NK][256], vs[NK][256], w[NQ * 64], acc1[NQ * 256], acc2[NQ * 256], s1[NQ * 64], s2[NQ * 64];
        const float *q[NQ], *k[NK], *v[NK];
        for (int j = 0; j < NQ; j++) {
            for (int e = 0; e < d; e++) qs[j][e] = frand() * 3;
            q[j] = qs[j];
        }
        for (int i = 0; i < NK; i++) {
            for (int e = 0; e < d; e++) ks[i][e] = frand(), vs[i][e] = frand();
            k[i] = ks[i];
            v[i] = vs[i];
        }
        float da = a->dot(q[0], k[0], d), db = b->dot(q[0], k[0], d);
        CHECK(!memcmp(&da, &db, 4), "%s vs %s dot d=%d", a->name, b->name, d);
        a->scores(q, NQ, k, NK, d, 0.125f, s1, 64);
        b->scores(q, NQ, k, NK, d, 0.125f, s2, 64);
        bool same = true;
        for (int j = 0; j < NQ; j++) same &= !memcmp(s1 + j * 64, s2 + j * 64, sizeof(float) * NK);
        CHECK(same, "%s vs %s scores d=%d", a->name, b->name, d);
        for (int j = 0; j < NQ; j++) {
            float sa = a->exp_sum(s1 + j * 64, NK - j, 0.5f), sb = b->exp_sum(s2 + j * 64, NK - j, 0.5f);
            CHECK(!memcmp(&sa, &sb, 4) && !memcmp(s1 + j * 64, s2 + j * 64, sizeof(float) * (size_t)(NK - j)),
                  "%s vs %s exp_sum n=%d", a->name, b->name, NK - j);
        }
        for (int j = 0; j < NQ * 64; j++) w[j] = (j % 5 == 0) ? 0.0f : frand();
        memset(acc1, 0, sizeof acc1);
        memset(acc2, 0, sizeof acc2);
        a->accum(w, 64, NQ, v, NK, d, acc1);
        b->accum(w, 64, NQ, v, NK, d, acc2);
        CHECK(!memcmp(acc1, acc2, sizeof(float) * NQ * (size_t)d), "%s vs %s accum d=%d", a->name, b->name, d);
        a->scale(acc1, 0.3f, d);
        b->scale(acc2, 0.3f, d);
        a->axpy(acc1, 0.7f, v[3], d);
        b->axpy(acc2, 0.7f, v[3], d);
        CHECK(!memcmp(acc1, acc2, sizeof(float) * (size_t)d), "%s vs %s scale/axpy d=%d", a->name, b->name, d);
    }
    /* row loads of the cache type: slices at every head offset */
    const mf_type t = kv == MF_KV_F16 ? MF_TYPE_F16 : kv == MF_KV_Q8_0 ? MF_TYPE_Q8_0 : MF_TYPE_F32;
    static float src[256], b1[256], b2[256];
    static uint8_t row[2048];
    for (int e = 0; e < 256; e++) src[e] = frand() * 4;
    mf_type_traits_ref(t)->from_float_ref(src, row, 256);
    for (int off = 0; off < 256; off += 8)
        for (int n = 1; off + n <= 256; n += 13) {
            const float *x = a->load_k(row, (size_t)off, n, b1), *y = b->load_k(row, (size_t)off, n, b2);
            CHECK(!memcmp(x, y, sizeof(float) * (size_t)n), "%s vs %s load off=%d n=%d", a->name, b->name, off, n);
        }
}

/* The attention op against softmax(q.k * scale) v in double: GQA, prefill
 * then decode, a sliding window, soft-capping, every KV type (rounding the
 * reference's K and V the way the cache stores them). */
static void op_vs_reference(mf_kv_type kv, int window, float softcap) {
    enum { NH = 6, NKV = 2, D = 32, NT = 150, L = 1 };
    mf_backend *be = mf_cpu_backend_new(2, NT, NH * D, 256, false);
    mf_kv_desc kd = test_kv_desc(kv, 256, L, NKV * D, NKV * D, D, D);
    CHECK(be && be->ops->kv_init(be, &kd) == MF_OK, "kv_init: %s", mf_last_error());
    static float q[NT][NH * D], k[NT][NKV * D], v[NT][NKV * D], out[NT][NH * D], kr[NT][NKV * D], vr[NT][NKV * D];
    for (int t = 0; t < NT; t++) {
        for (int e = 0; e < NH * D; e++) q[t][e] = frand();
        for (int e = 0; e < NKV * D; e++) k[t][e] = frand(), v[t][e] = frand();
    }
    /* what the cache will hold */
    const mf_type ty = kv == MF_KV_F16 ? MF_TYPE_F16 : kv == MF_KV_Q8_0 ? MF_TYPE_Q8_0 : MF_TYPE_F32;
    static uint8_t tmp[4096];
    for (int t = 0; t < NT; t++) {
        level_traits(ty)->from_float(k[t], tmp, NKV * D);
        level_traits(ty)->to_float(tmp, kr[t], NKV * D);
        level_traits(ty)->from_float(v[t], tmp, NKV * D);
        level_traits(ty)->to_float(tmp, vr[t], NKV * D);
    }
    const mf_attn_params ap = {NH, NKV, D, D, 0.17f, softcap, window};
    /* prefill 100 tokens, then 50 one at a time */
    kv_store_at(be, 0, &k[0][0], &v[0][0], 100, 0);
    attention_at(be, 0, &q[0][0], 100, 0, &ap, &out[0][0]);
    for (int t = 100; t < NT; t++) {
        kv_store_at(be, 0, k[t], v[t], 1, (uint32_t)t);
        attention_at(be, 0, q[t], 1, (uint32_t)t, &ap, out[t]);
    }
    double md = 0;
    for (int t = 0; t < NT; t++)
        for (int h = 0; h < NH; h++) {
            const int hk = h / (NH / NKV);
            double sc[NT], mx = -1e300, sum = 0;
            int lo = window > 0 && t >= window ? t - window + 1 : 0;
            for (int s = lo; s <= t; s++) {
                double d = 0;
                for (int e = 0; e < D; e++) d += (double)q[t][h * D + e] * kr[s][hk * D + e];
                d *= 0.17;
                if (softcap > 0) d = softcap * tanh(d / softcap);
                sc[s] = d;
                if (d > mx) mx = d;
            }
            for (int s = lo; s <= t; s++) sum += sc[s] = exp(sc[s] - mx);
            for (int e = 0; e < D; e++) {
                double o = 0;
                for (int s = lo; s <= t; s++) o += sc[s] / sum * vr[s][hk * D + e];
                md = fmax(md, fabs(o - out[t][h * D + e]));
            }
        }
    CHECK(md < 2e-5, "attention op kv %d window %d softcap %g: max diff %.3g vs double reference", (int)kv, window, softcap, md);
    be->ops->destroy(be);
}

/* kv_read gives, for each position, the row the cache type stores for the
 * full kv width (K rows, then V rows) whatever the internal slab layout, and
 * kv_write of those bytes into another cache reads back the same; the
 * attention of both caches agrees bitwise. Head sizes where a q8_0 slab
 * spans several heads (8: four heads per 32-block; 80: two heads per 160). */
static void kv_rows_case(mf_kv_type kv, int nkv, int d) {
    enum { NT = 40 };
    const int w = nkv * d, nh = 2 * nkv;
    mf_kv_desc kd = test_kv_desc(kv, 64, 2, (uint32_t)w, (uint32_t)w, (uint32_t)d, (uint32_t)d);
    mf_backend *a = mf_cpu_backend_new(2, NT, nh * d, 64, false), *b = mf_cpu_backend_new(1, NT, nh * d, 64, false);
    CHECK(a && b && a->ops->kv_init(a, &kd) == MF_OK && b->ops->kv_init(b, &kd) == MF_OK, "kv_init: %s", mf_last_error());
    float *k = malloc(sizeof(float) * NT * (size_t)w), *v = malloc(sizeof(float) * NT * (size_t)w);
    float *q = malloc(sizeof(float) * (size_t)nh * d), *oa = malloc(sizeof(float) * (size_t)nh * d), *ob = malloc(sizeof(float) * (size_t)nh * d);
    for (int i = 0; i < NT * w; i++) k[i] = frand(), v[i] = frand();
    for (int i = 0; i < nh * d; i++) q[i] = frand();
    const mf_type ty = kv == MF_KV_F16 ? MF_TYPE_F16 : kv == MF_KV_Q8_0 ? MF_TYPE_Q8_0 : MF_TYPE_F32;
    const size_t row = mf_row_size(ty, w);
    uint8_t *want = malloc(2 * NT * row), *got = malloc(2 * NT * row), *back = malloc(2 * NT * row);
    for (int t = 0; t < NT; t++) {
        level_traits(ty)->from_float(k + (size_t)t * w, want + (size_t)t * row, w);
        level_traits(ty)->from_float(v + (size_t)t * w, want + (size_t)(NT + t) * row, w);
    }
    kv_store_at(a, 1, k, v, NT - 1, 0);
    kv_store_at(a, 1, k + (size_t)(NT - 1) * w, v + (size_t)(NT - 1) * w, 1, NT - 1);
    CHECK(kv_read_at(a, 1, 0, NT, NULL) == 2 * NT * row, "kv_read size, kv %d heads %d x %d", (int)kv, nkv, d);
    kv_read_at(a, 1, 0, NT, got);
    CHECK(!memcmp(got, want, 2 * NT * row), "kv_read rows differ from the type's rows, kv %d heads %d x %d", (int)kv, nkv, d);
    kv_write_at(b, 1, 0, NT, got);
    kv_read_at(b, 1, 0, NT, back);
    CHECK(!memcmp(back, want, 2 * NT * row), "kv_write/kv_read round trip, kv %d heads %d x %d", (int)kv, nkv, d);
    const mf_attn_params ap = {nh, nkv, d, d, 0.2f, 0, 0};
    attention_at(a, 1, q, 1, NT - 1, &ap, oa);
    attention_at(b, 1, q, 1, NT - 1, &ap, ob);
    CHECK(!memcmp(oa, ob, sizeof(float) * (size_t)nh * d), "attention over a written cache differs, kv %d heads %d x %d",
          (int)kv, nkv, d);
    a->ops->destroy(a);
    b->ops->destroy(b);
    free(k), free(v), free(q), free(oa), free(ob), free(want), free(got), free(back);
}

int main(void) {
    /* exp accuracy over [-87, 0] */
    double worst = 0;
    for (int i = 0; i <= 200000; i++) {
        const float x = -87.0f * (float)i / 200000.0f;
        const double e = exp((double)x), r = fabs(mf_attn_expf(x) - e) / e;
        if (r > worst) worst = r;
    }
    CHECK(worst < 3e-7, "mf_attn_expf relative error %.3g", worst);
    CHECK(mf_attn_expf(-INFINITY) == 0.0f && mf_attn_expf(-100.0f) == 0.0f && mf_attn_expf(0.0f) == 1.0f,
          "mf_attn_expf edge values");
    fprintf(stderr, "mf_attn_expf max relative error %.3g\n", worst);

    for (int kv = 0; kv < 3; kv++) {
        kv_rows_case((mf_kv_type)kv, 2, 64);
        kv_rows_case((mf_kv_type)kv, 8, 8);
        kv_rows_case((mf_kv_type)kv, 4, 80);
    }
    fprintf(stderr, "kv_read/kv_write: full-width rows for every type and slab shape\n");

    for (int kv = 0; kv < 3; kv++) {
        const mf_attn_kernels *s = mf_attn_kernels_scalar((mf_kv_type)kv), *v = mf_attn_kernels_avx2((mf_kv_type)kv);
        if (!v || !__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !__builtin_cpu_supports("f16c")) {
            fprintf(stderr, "no AVX2+FMA+F16C here: AVX2 attention kernels not compared\n");
            break;
        }
        compare_sets((mf_kv_type)kv, s, v);
    }
    if (mf_cpu_init() >= MF_CPU_AVX512) {
        for (int kv = 0; kv < 3; kv++)
            compare_sets((mf_kv_type)kv, mf_attn_kernels_scalar((mf_kv_type)kv), mf_attn_kernels_avx512((mf_kv_type)kv));
        fprintf(stderr, "AVX-512 attention kernels compared with the scalar set\n");
    } else {
        fprintf(stderr, "no AVX-512 here: the AVX-512 attention kernels not compared\n");
    }
    for (int kv = 0; kv < 3; kv++) op_vs_reference((mf_kv_type)kv, 0, 0);
    op_vs_reference(MF_KV_F32, 37, 0);
    op_vs_reference(MF_KV_F16, 8, 20.0f);
    return test_summary("test_attn_kernels");
}
