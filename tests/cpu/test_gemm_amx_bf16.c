/* test_gemm_amx_bf16.c - the AMX bf16 kinds (TDPBF16PS) of F16 and BF16
 * weights (gemm_amx.h):
 *   - the f16 -> bf16 hi + lo split is exact for every finite f16;
 *   - kernels over the C model of the tiles (MINFER_AMX_EMULATE's), driven
 *     directly: bitwise equal to a scalar model of the instruction written
 *     here from the SDM pseudo-code (two FMA chains per element, pair add,
 *     add into C; round to nearest even, DAZ, FTZ), and within the stated
 *     bound of the existing path (the type's reference vec_dot), for ragged
 *     column counts (not multiples of 32), rows (partial panels and
 *     groups) and tokens (partial tiles, more than one 8-tile block); the
 *     panels packed from the file's rows and from the x16 layout are
 *     bitwise equal;
 *   - the same kernels on the real instruction where the CPU has AMX-BF16:
 *     within the bound only (hardware may round differently in the last
 *     bits than the pseudo-code);
 *   - the matmul op on the emulated kinds (plain and x16 weights, several
 *     weights per call): bitwise the scalar model at 1 and 2 threads.
 * The bound (gemm_amx.h): |got - vec_dot| <= [F16: 2^-16 S] +
 * (17 + P ceil(k/32) + ceil(k/64) + 8) 2^-24 S + k 2^-125, S = sum |w x|,
 * P = 1 (BF16) or 3 (F16: hi.hi + hi.lo + lo.hi). It also prints the
 * largest error seen against S, and what plain bf16 rounding of F16 weights
 * and activations would give instead of the split (why F16 takes 3x the
 * tile work). Skipped with a note where the CPU has no AVX-512 VNNI (the
 * model's kernels need it). */
#include "testutil.h"
#include "../quant/qrand.h"

#include "cpu/kern/features.h"
#include "cpu/kern/gemm/gemm.h"
#include "cpu/kern/gemm/gemm_layout.h"
#include "engine/backend.h"
#include "cpu/cpu.h"
#include "quant/fp16.h"
#include "quant/interleave.h"
#include "quant/types.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const mf_type_traits *level_traits(int t) { return mf_cpu_traits_for_level(t, mf_cpu_init()); }

/* ---------------- the scalar model of TDPBF16PS ---------------- */

static float daz(float x) { return fabsf(x) < FLT_MIN ? copysignf(0.0f, x) : x; }
static float bfv(uint16_t h) { return daz(mf_bf16_to_fp32(h)); }

/* One output of the kernel: planes a[0..] (activation) and b[0..] (weight
 * row), bf16 over kp = 32 * steps columns (zero past k); P products per
 * step in the kernel's order (hi.hi, hi.lo, lo.hi). */
static float model_dot(uint16_t *const a[2], uint16_t *const b[2], int64_t kp, int P) {
    static const int pa[3] = {0, 0, 1}, pb[3] = {0, 1, 0};
    float c = 0.0f;
    for (int64_t s = 0; s < kp / 32; s++)
        for (int q = 0; q < P; q++) {
            float e = 0.0f, o = 0.0f;
            for (int j = 0; j < 16; j++) {
                const int64_t c0 = 32 * s + 2 * j;
                e = daz(fmaf(bfv(a[pa[q]][c0]), bfv(b[pb[q]][c0]), e));
                o = daz(fmaf(bfv(a[pa[q]][c0 + 1]), bfv(b[pb[q]][c0 + 1]), o));
            }
            c = daz(daz(c) + daz(e + o));
        }
    return c;
}

/* The values the kernel multiplies, from the converted row (bf16 or f16):
 * planes of kp values; F16 split (hi = nearest bf16, lo = the rest), or
 * with `plain` the f16 value rounded to bf16 alone (for comparison). */
static void planes_of(mf_type t, const void *row, int64_t k, int64_t kp, int plain, uint16_t *hi, uint16_t *lo) {
    memset(hi, 0, sizeof(uint16_t) * (size_t)kp);
    memset(lo, 0, sizeof(uint16_t) * (size_t)kp);
    const uint16_t *h = row;
    for (int64_t c = 0; c < k; c++) {
        if (t == MF_TYPE_BF16) {
            hi[c] = h[c];
            continue;
        }
        const float v = mf_fp16_to_fp32(h[c]);
        hi[c] = mf_fp32_to_bf16(v);
        if (!plain) lo[c] = (uint16_t)(mf_f32_bits(v - mf_bf16_to_fp32(hi[c])) >> 16);
    }
}

static double elem(mf_type t, const void *row, int64_t c) {
    const uint16_t h = ((const uint16_t *)row)[c];
    return t == MF_TYPE_BF16 ? mf_bf16_to_fp32(h) : mf_fp16_to_fp32(h);
}

static double bound(mf_type t, int64_t k, double S) {
    const int P = t == MF_TYPE_F16 ? 3 : 1;
    const double n = 17.0 + P * (double)((k + 31) / 32) + (double)((k + 63) / 64) + 8;
    return (t == MF_TYPE_F16 ? ldexp(S, -16) : 0) + n * ldexp(S, -24) + (double)k * ldexp(1.0, -125);
}

/* ---------------- data ---------------- */

static void make_weights(qrand *r, mf_type t, int64_t k, int n_out, int wide, uint8_t *w) {
    uint16_t *h = (uint16_t *)w;
    for (int64_t i = 0; i < k * n_out; i++) {
        float v = (float)qrand_gauss(r) * 0.05f;
        /* wide: exponents over f16's whole range, subnormals included */
        if (wide && i % 3 == 0) v = (float)ldexp(1.0 + qrand_uniform(r), (int)(qrand_uniform(r) * 40) - 25) * (i % 2 ? -1 : 1);
        h[i] = t == MF_TYPE_BF16 ? mf_fp32_to_bf16(v) : mf_fp32_to_fp16(v);
    }
}

static void make_acts(qrand *r, int64_t k, int ntok, float *x) {
    for (int t = 0; t < ntok; t++) qrand_fill(r, x + (size_t)t * (size_t)k, k, t % 3 ? QDATA_GAUSS : QDATA_HEAVY, 1.0 + t % 4);
}

/* ---------------- the split ---------------- */

static void split_test(void) {
    int bad = 0, n = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        const float v = mf_fp16_to_fp32((mf_fp16)h);
        if (!isfinite(v)) continue;
        uint16_t hi, lo;
        mf_bf16_split(v, &hi, &lo);
        const float s = mf_bf16_to_fp32(hi) + mf_bf16_to_fp32(lo);
        bad += memcmp(&s, &v, 4) != 0 && !(v == 0.0f && s == 0.0f);
        n++;
    }
    CHECK(!bad, "bf16 hi + lo differs from the f16 value for %d of %d finite f16", bad, n);
    printf("bf16 hi + lo == f16 exactly for all %d finite f16 values\n", n);
}

/* ---------------- kernels ---------------- */

typedef struct stats {
    double max_rel;       /* largest |got - vec_dot| / S */
    double max_rel_plain; /* the same for plain bf16 rounding (F16 only) */
    int cases;
    long outputs, off_model; /* real tiles: outputs, and how many differ from the model (information) */
} stats;
static stats g_st[2][2]; /* [F16, BF16][emulated, real] */

/* kind g on n_out rows x ntok tokens of k columns */
static void kernel_case(const mf_gemm_kind *g, mf_type t, int emulated, int64_t k, int n_out, int ntok, int wide, qrand *r) {
    const mf_type at = mf_gemm_act_type(g->act);
    const mf_type_traits *live = level_traits(at);
    const size_t wrb = mf_row_size(t, k), arb = mf_row_size(at, k);
    const int64_t kp = mf_gemm_bf_steps(k) * 32;
    const int P = t == MF_TYPE_F16 ? 3 : 1;
    uint8_t *w = malloc(wrb * (size_t)n_out), *xq = malloc(arb * (size_t)ntok);
    float *x = malloc(sizeof(float) * (size_t)k * (size_t)ntok);
    make_weights(r, t, k, n_out, wide, w);
    make_acts(r, k, ntok, x);
    for (int j = 0; j < ntok; j++) live->from_float(x + (size_t)j * (size_t)k, xq + (size_t)j * arb, k);

    /* tiles, then panels from the file's rows and (where the shape has one)
     * from the x16 layout */
    const int ntiles = (ntok + g->nt - 1) / g->nt;
    const size_t tb = mf_gemm_tile_bytes(g->act, g->nt, k), pb = g->panel_bytes(k);
    uint8_t *tiles = malloc(tb * (size_t)ntiles), *tmp = malloc(mf_gemm_tile_tmp_bytes(g->act, g->nt, k));
    for (int i = 0; i < ntiles; i++) {
        const int n = ntok - i * g->nt < g->nt ? ntok - i * g->nt : g->nt;
        mf_gemm_tile_build(g->act, g->nt, x + (size_t)i * g->nt * (size_t)k, (size_t)k, n, k, live->from_float, tmp,
                           tiles + (size_t)i * tb);
    }
    const int ngroups = (n_out + 31) / 32;
    uint8_t *panels = malloc(pb * 2 * (size_t)ngroups), *px = malloc(pb * 2);
    uint8_t *x16 = NULL;
    if (n_out % 16 == 0 && mf_x16_layout(t, k)) {
        x16 = malloc(wrb * (size_t)n_out);
        for (int i = 0; i < n_out / 16; i++) mf_x16_pack(t, w + (size_t)i * 16 * wrb, wrb, k, x16 + (size_t)i * 16 * wrb);
    }
    int bad_pack = 0;
    for (int gi = 0; gi < ngroups; gi++)
        for (int p = 0; p < 2; p++) {
            const int r0 = 32 * gi + 16 * p;
            int n = n_out - r0;
            n = n < 0 ? 0 : n > 16 ? 16 : n;
            uint8_t *dst = panels + ((size_t)gi * 2 + (size_t)p) * pb;
            g->pack(n ? w + (size_t)r0 * wrb : w, wrb, n, k, dst);
            if (x16) {
                g->pack_x16(x16, r0, n, k, px);
                bad_pack += memcmp(px, dst, pb) != 0;
            }
        }
    CHECK(!bad_pack, "%s: k %lld, %d rows: %d panels packed from x16 differ from the file layout's", g->name,
          (long long)k, n_out, bad_pack);

    /* one tile per call, and all tiles in one call */
    const size_t ldo = (size_t)n_out + 3;
    const float sentinel = -12345.5f;
    float *got[2];
    for (int v = 0; v < 2; v++) {
        got[v] = malloc(sizeof(float) * ldo * (size_t)ntok);
        for (size_t i = 0; i < ldo * (size_t)ntok; i++) got[v][i] = sentinel;
    }
    for (int gi = 0; gi < ngroups; gi++) {
        const int r0 = 32 * gi, nrows = n_out - r0 < 32 ? n_out - r0 : 32;
        const uint8_t *pg = panels + (size_t)gi * 2 * pb;
        for (int i = 0; i < ntiles; i++) {
            const int n = ntok - i * 16 < 16 ? ntok - i * 16 : 16;
            g->kernel(pg, pb, tiles + (size_t)i * tb, k, got[0] + (size_t)i * 16 * ldo + r0, ldo, nrows, n);
        }
        g->kernel_tiles(pg, pb, tiles, tb, ntiles, k, got[1] + r0, ldo, nrows, ntok);
    }

    /* the model, vec_dot and the bound per output */
    uint16_t *ap[2], *bp[2], *app[2], *bpp[2];
    for (int i = 0; i < 2; i++) {
        ap[i] = malloc(2 * (size_t)kp), bp[i] = malloc(2 * (size_t)kp);
        app[i] = malloc(2 * (size_t)kp), bpp[i] = malloc(2 * (size_t)kp);
    }
    int bad_model = 0, bad_bound = 0, bad_guard = 0;
    stats *st = &g_st[t == MF_TYPE_BF16][!emulated];
    for (int j = 0; j < ntok; j++) {
        const uint8_t *xr = xq + (size_t)j * arb;
        planes_of(t, xr, k, kp, 0, ap[0], ap[1]);
        if (t == MF_TYPE_F16) planes_of(t, xr, k, kp, 1, app[0], app[1]);
        for (int i = 0; i < n_out; i++) {
            const uint8_t *wr = w + (size_t)i * wrb;
            float want;
            mf_type_traits_ref(t)->vec_dot((int)k, &want, wr, xr);
            double S = 0;
            for (int64_t c = 0; c < k; c++) S += fabs(elem(t, wr, c) * elem(t, xr, c));
            planes_of(t, wr, k, kp, 0, bp[0], bp[1]);
            const float m = model_dot(ap, bp, kp, P);
            for (int v = 0; v < 2; v++) {
                const float gv = got[v][(size_t)j * ldo + i];
                st->outputs++;
                st->off_model += memcmp(&gv, &m, 4) != 0;
                if (emulated && memcmp(&gv, &m, 4)) {
                    if (bad_model < 3)
                        fprintf(stderr, "  %s%s: k %lld, %d x %d: row %d token %d: kernel %.9g, model %.9g\n", g->name,
                                v ? " (all tiles per call)" : "", (long long)k, n_out, ntok, i, j, gv, m);
                    bad_model++;
                }
                const double err = fabs((double)gv - (double)want);
                if (!(err <= bound(t, k, S))) {
                    if (bad_bound < 3)
                        fprintf(stderr, "  %s: k %lld: row %d token %d: kernel %.9g, vec_dot %.9g, |err| %.3g > bound %.3g\n",
                                g->name, (long long)k, i, j, gv, want, err, bound(t, k, S));
                    bad_bound++;
                }
                if (S > 0 && err / S > st->max_rel) st->max_rel = err / S;
            }
            if (t == MF_TYPE_F16 && S > 0) {
                /* plain bf16 rounding of both sides, one multiply per step */
                planes_of(t, wr, k, kp, 1, bpp[0], bpp[1]);
                const double e = fabs((double)model_dot(app, bpp, kp, 1) - (double)want) / S;
                if (e > st->max_rel_plain) st->max_rel_plain = e;
            }
        }
        for (size_t i = (size_t)n_out; i < ldo; i++)
            bad_guard += got[0][(size_t)j * ldo + i] != sentinel || got[1][(size_t)j * ldo + i] != sentinel;
    }
    CHECK(!bad_model, "%s: k %lld, %d rows x %d tokens: %d outputs differ from the scalar model", g->name, (long long)k,
          n_out, ntok, bad_model);
    CHECK(!bad_bound, "%s: k %lld, %d rows x %d tokens: %d outputs outside the bound", g->name, (long long)k, n_out, ntok,
          bad_bound);
    CHECK(!bad_guard, "%s: k %lld, %d rows x %d tokens: %d writes past the rows", g->name, (long long)k, n_out, ntok,
          bad_guard);
    st->cases++;
    for (int i = 0; i < 2; i++) free(ap[i]), free(bp[i]), free(app[i]), free(bpp[i]), free(got[i]);
    free(w), free(xq), free(x), free(tiles), free(tmp), free(panels), free(px), free(x16);
}

static void kernel_tests(int emulated) {
    static const mf_type types[] = {MF_TYPE_F16, MF_TYPE_BF16};
    /* columns: under one step, one step, ragged steps, odd (no BF16 x16),
     * a long row; shapes: partial panels / groups / tiles, one and two
     * 8-tile blocks of tokens */
    static const int64_t ks[] = {1, 31, 32, 33, 200, 511, 1000, 2048};
    static const int shapes[][2] = {{1, 1}, {17, 5}, {16, 16}, {33, 17}, {48, 33}, {5, 150}, {32, 31}};
    qrand r = {0x5eedull + (uint64_t)emulated};
    for (int ti = 0; ti < 2; ti++) {
        const mf_gemm_kind *g = mf_gemm_get_amx_bf16(types[ti], emulated);
        CHECK(g != NULL, "no %s AMX bf16 kind (%s)", mf_type_name(types[ti]), emulated ? "emulated" : "real");
        if (!g) continue;
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                if (ks[ki] >= 1000 && si != 4) continue; /* long rows: one shape */
                kernel_case(g, types[ti], emulated, ks[ki], shapes[si][0], shapes[si][1], (ki + si) % 2, &r);
            }
        const stats *st = &g_st[ti][!emulated];
        printf("%-5s %-24s %3d kernel cases: %swithin the bound; largest |err| / sum|w x| %.3g", mf_type_name(types[ti]),
               g->name, st->cases, emulated ? "bitwise the scalar model, " : "", st->max_rel);
        if (types[ti] == MF_TYPE_F16) printf(" (plain bf16 rounding instead of hi + lo: %.3g)", st->max_rel_plain);
        if (!emulated) printf("; %ld of %ld outputs differ from the SDM model's bits", st->off_model, st->outputs);
        printf("\n");
    }
}

/* ---------------- the matmul op ---------------- */

typedef struct {
    mf_tensor t;
    uint8_t *data, *x16;
} wbuf;

static void make_tensor(wbuf *b, qrand *r, mf_type type, int64_t k, int n_out, int x16) {
    memset(b, 0, sizeof *b);
    const size_t rb = mf_row_size(type, k);
    b->data = malloc(rb * (size_t)n_out);
    make_weights(r, type, k, n_out, 1, b->data);
    b->t.name = "w";
    b->t.n_dims = 2;
    b->t.ne[0] = k, b->t.ne[1] = n_out, b->t.ne[2] = b->t.ne[3] = 1;
    b->t.type = type;
    b->t.nbytes = rb * (size_t)n_out;
    b->t.data = b->data;
    if (x16 && n_out % 16 == 0 && mf_x16_layout(type, k)) {
        /* the x16 copy as the handle, the file's bytes out of reach */
        b->x16 = malloc(rb * (size_t)n_out);
        for (int i = 0; i < n_out / 16; i++) mf_x16_pack(type, b->data + (size_t)i * 16 * rb, rb, k, b->x16 + (size_t)i * 16 * rb);
        b->t.handle = b->x16;
        b->t.data = NULL;
    }
}

/* nw weights reading one input of `rows` tokens, at 1 and 2 threads and on
 * a shared pool of 5 (a backend built for 1 thread, then given the pool, as
 * contexts on a shared pool are: its scratch must grow rather than fall back
 * to vec_dot, whose bits differ): bitwise each other and the scalar model */
static void matmul_case(const mf_type *types, const int *x16, int nw, int64_t k, const int *n_out, int rows, qrand *r) {
    wbuf wb[4];
    mf_weight w[4];
    float *out[3][4];
    float *x = malloc(sizeof(float) * (size_t)k * (size_t)rows);
    make_acts(r, k, rows, x);
    for (int i = 0; i < nw; i++) {
        make_tensor(&wb[i], r, types[i], k, n_out[i], x16[i]);
        w[i] = &wb[i].t;
        for (int v = 0; v < 3; v++) out[v][i] = malloc(sizeof(float) * (size_t)n_out[i] * (size_t)rows);
    }
    for (int nth = 1; nth <= 2; nth++) {
        mf_backend *be = mf_cpu_backend_new(nth, rows, (int)k, 64, false);
        be->ops->matmul_n(be, w, NULL, nw, x, rows, out[nth - 1], NULL);
        be->ops->destroy(be);
    }
    mf_pool *pool = mf_pool_new(5);
    mf_backend *bs = mf_cpu_backend_new(1, rows, (int)k, 64, false);
    mf_cpu_share_pool(bs, pool);
    bs->ops->matmul_n(bs, w, NULL, nw, x, rows, out[2], NULL);
    bs->ops->destroy(bs);
    mf_pool_free(pool);
    const int64_t kp = mf_gemm_bf_steps(k) * 32;
    int bad_thr = 0, bad_model = 0;
    uint16_t *ap[2], *bp[2];
    for (int i = 0; i < 2; i++) ap[i] = malloc(2 * (size_t)kp), bp[i] = malloc(2 * (size_t)kp);
    for (int i = 0; i < nw; i++) {
        const mf_type t = types[i];
        bad_thr += memcmp(out[0][i], out[1][i], sizeof(float) * (size_t)n_out[i] * (size_t)rows) != 0;
        bad_thr += memcmp(out[0][i], out[2][i], sizeof(float) * (size_t)n_out[i] * (size_t)rows) != 0;
        const size_t arb = mf_row_size(t, k), wrb = mf_row_size(t, k);
        uint8_t *xr = malloc(arb);
        for (int j = 0; j < rows; j++) {
            level_traits(t)->from_float(x + (size_t)j * (size_t)k, xr, k);
            planes_of(t, xr, k, kp, 0, ap[0], ap[1]);
            for (int o = 0; o < n_out[i]; o++) {
                planes_of(t, wb[i].data + (size_t)o * wrb, k, kp, 0, bp[0], bp[1]);
                const float m = model_dot(ap, bp, kp, t == MF_TYPE_F16 ? 3 : 1);
                bad_model += memcmp(&m, &out[0][i][(size_t)j * n_out[i] + o], 4) != 0;
            }
        }
        free(xr);
    }
    CHECK(!bad_thr, "matmul_n %s x%d, k %lld, %d tokens: 1 thread, 2 threads and a shared pool of 5 differ", mf_type_name(types[0]), nw,
          (long long)k, rows);
    CHECK(!bad_model, "matmul_n %s x%d, k %lld, %d tokens: %d outputs differ from the scalar model",
          mf_type_name(types[0]), nw, (long long)k, rows, bad_model);
    for (int i = 0; i < 2; i++) free(ap[i]), free(bp[i]);
    for (int i = 0; i < nw; i++) free(wb[i].data), free(wb[i].x16), free(out[0][i]), free(out[1][i]), free(out[2][i]);
    free(x);
    printf("matmul_n %-5s x%d, k %4lld, %3d tokens (emulated tiles): 1 thread == 2 threads == shared pool of 5 == scalar model\n",
           mf_type_name(types[0]), nw, (long long)k, rows);
}

static void matmul_tests(void) {
    qrand r = {99};
    const mf_gemm_kind *gb = mf_gemm_get(MF_TYPE_BF16), *gf = mf_gemm_get(MF_TYPE_F16);
    printf("matmul kinds: %s, %s\n", gb ? gb->name : "-", gf ? gf->name : "-");
    CHECK(gb && gb->act == MF_GEMM_ACT_BF16_AMX && gf && gf->act == MF_GEMM_ACT_F16HL_AMX,
          "MINFER_AMX_EMULATE=1: the matmul does not use the AMX bf16 kinds");
    /* q/k/v-like: x16 and plain weights of both types in one call */
    const mf_type mix[] = {MF_TYPE_BF16, MF_TYPE_F16, MF_TYPE_BF16, MF_TYPE_F16};
    const int x16a[] = {1, 1, 0, 0}, na[] = {48, 32, 21, 40};
    matmul_case(mix, x16a, 4, 520, na, 37, &r);
    const mf_type one[] = {MF_TYPE_BF16};
    const int x16b[] = {1}, nb[] = {64};
    matmul_case(one, x16b, 1, 256, nb, 150, &r);
    /* many output rows against few tokens: each thread's panels outgrow the
     * scratch sized for rows x k, which must grow, not fall back */
    const int nbig[] = {4096};
    matmul_case(one, x16b, 1, 1024, nbig, 32, &r);
    const mf_type f16[] = {MF_TYPE_F16};
    const int nf[] = {33};
    matmul_case(f16, x16b, 1, 96, nf, 16, &r);
}

int main(void) {
    /* the matmul part drives the emulated kinds (read once, at the first
     * GEMM look-up) */
    setenv("MINFER_AMX_EMULATE", "1", 1);
    unsetenv("MINFER_AMX_BF16");
    mf_cpu_init();
    split_test();
    if (mf_cpu_level_supported() < MF_CPU_AVX512_VNNI) {
        printf("note: the AMX model needs AVX-512 VNNI: kernels skipped\n");
        return test_summary("cpu_gemm_amx_bf16");
    }
    kernel_tests(1);
    if (mf_amx_bf16_init()) kernel_tests(0);
    else printf("note: real AMX bf16 kernels not run (%s)\n", mf_amx_bf16_note());
    matmul_tests();
    return test_summary("cpu_gemm_amx_bf16");
}
