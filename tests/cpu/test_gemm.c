/* test_gemm.c - the prefill GEMM against vec_dot, bitwise (memcmp):
 *   - every GEMM kernel of every SIMD level the CPU has, driven directly
 *     (panels, tiles, kernel), against the scalar reference vec_dot of each
 *     (weight row, token) on the same converted activations: odd row and
 *     token counts (partial panels, partial tiles), super-block / block /
 *     lane counts that leave partial 8-block lane groups and ragged F16
 *     lanes; weights quantized from random data, raw random block bytes, and
 *     all-maximum / all-zero levels against all-+-127 activations (the int16
 *     bounds in gemm_kern.h); outputs outside the tile must stay untouched;
 *   - the matmul op end to end (mf_cpu_matmul_n with Q/K/V-style weight
 *     groups of mixed types) at 1, 2 and 3 threads against the same rows
 *     computed one token at a time (the decode path).
 * A level the CPU lacks, or a type a level has no GEMM for, is noted and
 * skipped. */
#include "testutil.h"
#include "../quant/qrand.h"

#include "cpu/kern/features.h"
#include "cpu/kern/gemm/gemm.h"
#include "engine/backend.h"
#include "cpu/cpu.h"
#include "quant/blocks.h"
#include "quant/interleave.h"
#include "quant/types.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* the kernels a CPU backend made now would use */
static inline const mf_type_traits *level_traits(int t) { return mf_cpu_traits_for_level(t, mf_cpu_init()); }

static const mf_type k_types[] = {MF_TYPE_Q4_K, MF_TYPE_Q5_K,   MF_TYPE_Q6_K,   MF_TYPE_Q3_K, MF_TYPE_Q2_K, MF_TYPE_IQ4_XS,
                                  MF_TYPE_Q4_0, MF_TYPE_Q5_0,   MF_TYPE_Q8_0,   MF_TYPE_IQ4_NL, MF_TYPE_F16,
                                  MF_TYPE_BF16};
#define N_TYPES (int)(sizeof k_types / sizeof k_types[0])
static const mf_cpu_level k_levels[] = {MF_CPU_AVX2, MF_CPU_AVX512, MF_CPU_AVX512_VNNI};

enum { W_QUANT, W_RAW, W_MAX, W_ZERO, W_MODES };
enum { A_GAUSS, A_ONES, A_ALT, A_HEAVY, A_MODES };

static mf_fp16 rand_f16(qrand *r, int lo, int hi) {
    const double e = lo + qrand_uniform(r) * (hi - lo);
    const double v = ldexp(1.0 + qrand_uniform(r), (int)floor(e)) * (qrand_uniform(r) < 0.5 ? -1 : 1);
    return mf_fp32_to_fp16((float)v);
}

/* n_out rows of k columns of type t */
static void make_weights(qrand *r, mf_type t, int wmode, int64_t k, int n_out, uint8_t *w) {
    const size_t rb = mf_row_size(t, k);
    const mf_type_geom *g = mf_type_geom_get(t);
    if (wmode == W_QUANT) {
        float *x = malloc(sizeof(float) * (size_t)k);
        for (int i = 0; i < n_out; i++) {
            qrand_fill(r, x, k, (qdata)(i % QDATA_COUNT), 0.5 + i % 3);
            mf_type_traits_ref(t)->from_float_ref(x, w + (size_t)i * rb, k);
        }
        free(x);
        return;
    }
    for (size_t i = 0; i < rb * (size_t)n_out; i++)
        w[i] = wmode == W_MAX ? 0xff : wmode == W_ZERO ? 0 : (uint8_t)(qrand_uniform(r) * 256);
    const int64_t nb = (int64_t)n_out * (k / g->blck);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = w + (size_t)b * (size_t)g->size;
        /* finite scales (raw f16 bytes are often inf / NaN) */
        switch (t) {
        case MF_TYPE_F16: *(mf_fp16 *)p = wmode == W_RAW ? rand_f16(r, -8, 8) : mf_fp32_to_fp16(wmode == W_MAX ? 3.0f : 0.0f); break;
        case MF_TYPE_BF16: /* finite: raw bytes are often NaN; a wider exponent range than f16's */
            *(uint16_t *)p = mf_fp32_to_bf16(wmode == W_RAW ? ldexpf(mf_fp16_to_fp32(rand_f16(r, -8, 8)), (int)(qrand_uniform(r) * 40) - 20)
                                                            : wmode == W_MAX ? 3.0f : 0.0f);
            break;
        case MF_TYPE_Q4_0: ((block_q4_0 *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q5_0: ((block_q5_0 *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q8_0: ((block_q8_0 *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_IQ4_NL: ((block_iq4_nl *)p)->d = rand_f16(r, -14, 4); break;
        case MF_TYPE_Q4_K: ((block_q4_K *)p)->d = rand_f16(r, -14, 0), ((block_q4_K *)p)->dmin = rand_f16(r, -14, 0); break;
        case MF_TYPE_Q5_K: ((block_q5_K *)p)->d = rand_f16(r, -14, 0), ((block_q5_K *)p)->dmin = rand_f16(r, -14, 0); break;
        case MF_TYPE_Q6_K: ((block_q6_K *)p)->d = rand_f16(r, -14, 0); break;
        case MF_TYPE_Q3_K: ((block_q3_K *)p)->d = rand_f16(r, -14, 0); break;
        case MF_TYPE_IQ4_XS: ((block_iq4_xs *)p)->d = rand_f16(r, -14, 0); break;
        case MF_TYPE_Q2_K: ((block_q2_K *)p)->d = rand_f16(r, -14, 0), ((block_q2_K *)p)->dmin = rand_f16(r, -14, 0); break;
        default: break;
        }
    }
}

static void make_acts(qrand *r, int amode, int64_t k, int ntok, float *x) {
    for (int t = 0; t < ntok; t++) {
        float *row = x + (size_t)t * (size_t)k;
        switch (amode) {
        case A_ONES: /* every quant -127 (Q8_K) or +127 (Q8_0) */
            for (int64_t i = 0; i < k; i++) row[i] = 1.0f;
            break;
        case A_ALT:
            for (int64_t i = 0; i < k; i++) row[i] = (i + t) % 2 ? -2.0f : 2.0f;
            break;
        default: qrand_fill(r, row, k, amode == A_HEAVY ? QDATA_HEAVY : QDATA_GAUSS, 1.0 + t % 4); break;
        }
    }
}

/* columns of g_checked: the three levels, then the AMX kernels over the C
 * model of the tile instructions, then on the tile instructions, then the
 * tile-mins variants (mins as a third tile plane) the same two ways */
#define N_KINDS 7
static int g_checked[N_TYPES][N_KINDS];
static const char *const k_kind_names[N_KINDS] = {"AVX2", "AVX-512", "AVX-512 VNNI", "AMX (emulated)", "AMX",
                                                  "AMX tmin (emu)", "AMX tmin"};
static int is_amx(int li) { return li >= 3; }
static int is_emulated(int li) { return li == 3 || li == 5; }

static const mf_gemm_kind *kind_of(mf_type t, int li) {
    if (li < 3) return mf_gemm_get_level(t, k_levels[li]);
    return li < 5 ? mf_gemm_get_amx(t, is_emulated(li)) : mf_gemm_get_amx_mt(t, is_emulated(li));
}

/* The kernel of (type, level) on n_out rows x ntok tokens against the
 * reference vec_dot; returns the number of mismatching outputs. */
static int kernel_case(int ti, int li, int64_t k, int n_out, int ntok, int wmode, int amode, qrand *r) {
    const mf_type t = k_types[ti];
    const mf_gemm_kind *g = kind_of(t, li);
    if (!g || k % g->k_multiple) return 0;
    const mf_type at = mf_gemm_act_type(g->act);
    const mf_type_traits *live_act = level_traits(at);
    const size_t wrb = mf_row_size(t, k), arb = mf_row_size(at, k);
    uint8_t *w = malloc(wrb * (size_t)n_out);
    float *x = malloc(sizeof(float) * (size_t)k * (size_t)ntok);
    make_weights(r, t, wmode, k, n_out, w);
    make_acts(r, amode, k, ntok, x);

    /* expected: reference vec_dot on the conversion the matmul makes */
    uint8_t *xq = malloc(arb * (size_t)ntok);
    float *want = malloc(sizeof(float) * (size_t)n_out * (size_t)ntok);
    for (int j = 0; j < ntok; j++) live_act->from_float(x + (size_t)j * (size_t)k, xq + (size_t)j * arb, k);
    for (int j = 0; j < ntok; j++)
        for (int i = 0; i < n_out; i++)
            mf_type_traits_ref(t)->vec_dot((int)k, &want[(size_t)j * n_out + i], w + (size_t)i * wrb, xq + (size_t)j * arb);

    /* the GEMM, with 3 guard columns after each output row */
    const size_t ldo = (size_t)n_out + 3;
    float *got = malloc(sizeof(float) * ldo * (size_t)ntok);
    const float sentinel = -12345.5f;
    for (size_t i = 0; i < ldo * (size_t)ntok; i++) got[i] = sentinel;
    const int ntiles = (ntok + g->nt - 1) / g->nt;
    const size_t tb = mf_gemm_tile_bytes(g->act, g->nt, k);
    uint8_t *tiles = malloc(tb * (size_t)ntiles), *tmp = malloc(mf_gemm_tile_tmp_bytes(g->act, g->nt, k));
    for (int i = 0; i < ntiles; i++) {
        const int n = ntok - i * g->nt < g->nt ? ntok - i * g->nt : g->nt;
        mf_gemm_tile_build(g->act, g->nt, x + (size_t)i * g->nt * (size_t)k, (size_t)k, n, k, live_act->from_float, tmp,
                           tiles + (size_t)i * tb);
    }
    const size_t pb = g->panel_bytes(k);
    const int npan = g->rows_per_call / g->panel_rows;
    uint8_t *panels = malloc(pb * (size_t)npan);
    for (int r0 = 0; r0 < n_out; r0 += g->rows_per_call) {
        const int nrows = n_out - r0 < g->rows_per_call ? n_out - r0 : g->rows_per_call;
        for (int p = 0; p < npan; p++) {
            int n = nrows - p * g->panel_rows;
            n = n < 0 ? 0 : n > g->panel_rows ? g->panel_rows : n;
            g->pack(n ? w + (size_t)(r0 + p * g->panel_rows) * wrb : w, wrb, n, k, panels + (size_t)p * pb);
        }
        for (int i = 0; i < ntiles; i++) {
            const int n = ntok - i * g->nt < g->nt ? ntok - i * g->nt : g->nt;
            g->kernel(panels, pb, tiles + (size_t)i * tb, k, got + (size_t)i * g->nt * ldo + r0, ldo, nrows, n);
        }
    }
    /* kinds that take several token tiles per call: all of them in one call
     * (the kernel splits them into blocks of its own), into a second buffer */
    float *got2 = NULL;
    if (g->kernel_tiles) {
        got2 = malloc(sizeof(float) * ldo * (size_t)ntok);
        for (size_t i = 0; i < ldo * (size_t)ntok; i++) got2[i] = sentinel;
        for (int r0 = 0; r0 < n_out; r0 += g->rows_per_call) {
            const int nrows = n_out - r0 < g->rows_per_call ? n_out - r0 : g->rows_per_call;
            for (int p = 0; p < npan; p++) {
                int n = nrows - p * g->panel_rows;
                n = n < 0 ? 0 : n > g->panel_rows ? g->panel_rows : n;
                g->pack(n ? w + (size_t)(r0 + p * g->panel_rows) * wrb : w, wrb, n, k, panels + (size_t)p * pb);
            }
            g->kernel_tiles(panels, pb, tiles, tb, ntiles, k, got2 + r0, ldo, nrows, ntok);
        }
    }
    int bad = 0;
    for (int j = 0; j < ntok; j++) {
        for (int i = 0; i < n_out; i++) {
            const float a = want[(size_t)j * n_out + i], b = got[(size_t)j * ldo + i];
            if (got2 && memcmp(&got2[(size_t)j * ldo + i], &a, 4)) {
                if (bad < 3)
                    fprintf(stderr, "  %s (%d tiles per call): k %lld, %d x %d: row %d token %d: gemm %.9g, vec_dot %.9g\n",
                            g->name, ntiles, (long long)k, n_out, ntok, i, j, got2[(size_t)j * ldo + i], a);
                bad++;
            }
            if (memcmp(&a, &b, 4)) {
                if (bad < 3)
                    fprintf(stderr, "  %s: k %lld, %d x %d, w%d a%d: row %d token %d: gemm %.9g, vec_dot %.9g\n", g->name,
                            (long long)k, n_out, ntok, wmode, amode, i, j, b, a);
                bad++;
            }
        }
        for (size_t i = (size_t)n_out; i < ldo; i++)
            bad += got[(size_t)j * ldo + i] != sentinel || (got2 && got2[(size_t)j * ldo + i] != sentinel);
    }
    CHECK(!bad, "%s: k %lld, %d rows x %d tokens, weights %d, acts %d: %d outputs differ", g->name, (long long)k, n_out,
          ntok, wmode, amode, bad);
    g_checked[ti][li]++;
    free(w), free(x), free(xq), free(want), free(got), free(got2), free(tiles), free(tmp), free(panels);
    return bad;
}

static void kernel_tests(void) {
    qrand r = {0x9e3779b97f4a7c15ull};
    for (int ti = 0; ti < N_TYPES; ti++) {
        const mf_type t = k_types[ti];
        const int blk = mf_type_geom_get(t)->blck;
        /* column counts: blocks/super-blocks 1, 2, 3, 9 (partial 8-block lane
         * groups), and a long row; F16 ragged lanes */
        int64_t ks[6];
        int nk;
        if (blk == QK_K) ks[0] = 256, ks[1] = 768, ks[2] = 2304, ks[3] = 4096, nk = 4;
        else if (blk == 32) ks[0] = 32, ks[1] = 96, ks[2] = 288, ks[3] = 800, ks[4] = 4096, nk = 5;
        else ks[0] = 1, ks[1] = 33, ks[2] = 64, ks[3] = 200, ks[4] = 896, ks[5] = 1000, nk = 6;
        static const int shapes[][2] = {{1, 1}, {17, 5}, {16, 6}, {33, 7}, {40, 13}, {77, 49}, {5, 50}};
        for (int li = 0; li < N_KINDS; li++) {
            if (li < 3 && k_levels[li] > mf_cpu_level_supported()) continue;
            for (int ki = 0; ki < nk; ki++)
                for (int si = 0; si < 7; si++) {
                    if (ks[ki] >= 2304 && si != 4) continue; /* long rows: one shape is enough */
                    kernel_case(ti, li, ks[ki], shapes[si][0], shapes[si][1], (ki + si) % 2 ? W_RAW : W_QUANT,
                                (ki + si) % 3 ? A_GAUSS : A_HEAVY, &r);
                }
            /* the AMX kinds take up to 8 token tiles per call: token counts
             * past one block and not multiples of 16, one and several
             * panel groups (rows 16, 32, 48, 72), short and long rows */
            if (is_amx(li) && blk == QK_K) {
                static const int ashapes[][2] = {{16, 16}, {32, 31}, {48, 129}, {72, 140}, {5, 100}};
                for (int ki = 0; ki < 3; ki++)
                    for (int si = 0; si < 5; si++)
                        kernel_case(ti, li, ks[ki], ashapes[si][0], ashapes[si][1], (ki + si) % 2 ? W_RAW : W_QUANT,
                                    (ki + si) % 3 ? A_GAUSS : A_HEAVY, &r);
            }
            /* extremes of levels and activations */
            const int64_t k = blk == QK_K ? 512 : blk == 32 ? 288 : 256;
            for (int wm = W_MAX; wm <= W_ZERO; wm++)
                for (int am = A_ONES; am <= A_ALT; am++) kernel_case(ti, li, k, 20, 9, wm, am, &r);
        }
    }
    for (int ti = 0; ti < N_TYPES; ti++)
        for (int li = 0; li < N_KINDS; li++) {
            if (li < 3 && k_levels[li] > mf_cpu_level_supported()) printf("note: %s level absent on this CPU, skipped\n", k_kind_names[li]);
            else if (is_emulated(li) && mf_cpu_level_supported() < MF_CPU_AVX512_VNNI)
                printf("note: AMX model needs AVX-512 VNNI, skipped\n");
            else if (is_amx(li) && !is_emulated(li) && !mf_amx_init())
                printf("note: %s kernels not run (%s)\n", k_kind_names[li], mf_amx_note());
            else if (!g_checked[ti][li])
                printf("note: no %s GEMM at %s (vec_dot)\n", mf_type_name(k_types[ti]), k_kind_names[li]);
            else printf("%-7s %-14s %3d kernel cases bitwise equal\n", mf_type_name(k_types[ti]), k_kind_names[li],
                        g_checked[ti][li]);
        }
}

/* ---------------- the matmul op ---------------- */

typedef struct {
    mf_tensor t;
    uint8_t *data;
} wbuf;

static void make_tensor(wbuf *b, qrand *r, mf_type type, int64_t k, int n_out) {
    memset(b, 0, sizeof *b);
    b->data = malloc(mf_row_size(type, k) * (size_t)n_out);
    make_weights(r, type, W_QUANT, k, n_out, b->data);
    b->t.name = "w";
    b->t.n_dims = 2;
    b->t.ne[0] = k, b->t.ne[1] = n_out, b->t.ne[2] = b->t.ne[3] = 1;
    b->t.type = type;
    b->t.nbytes = mf_row_size(type, k) * (size_t)n_out;
    b->t.data = b->data;
}

/* An interleaved copy of b's matrix as a tensor whose data pointer is NULL
 * (so any read of the file layout crashes); returns the copy's buffer, or
 * NULL (xt untouched) where the type or shape has no x16 layout. */
static uint8_t *make_x16(const wbuf *b, mf_tensor *xt) {
    const mf_type type = b->t.type;
    const int64_t k = b->t.ne[0], n_out = b->t.ne[1];
    if (!mf_x16_layout(type, k) || n_out % MF_X16 || !level_traits(type)->vec_dot_x16) return NULL;
    const size_t row = mf_row_size(type, k);
    uint8_t *xd = malloc(row * (size_t)n_out);
    for (int64_t g = 0; g < n_out / MF_X16; g++)
        mf_x16_pack(type, b->data + (size_t)g * MF_X16 * row, row, k, xd + (size_t)g * MF_X16 * row);
    *xt = b->t;
    xt->data = NULL;
    xt->handle = xd;
    return xd;
}

/* nw weights of the given types reading one input of `rows` tokens */
static void matmul_case(const mf_type *types, int nw, int64_t k, const int *n_out, int rows, qrand *r) {
    wbuf wb[4];
    mf_weight w[4];
    float *out[4], *one[4];
    float *x = malloc(sizeof(float) * (size_t)k * (size_t)rows);
    make_acts(r, A_GAUSS, k, rows, x);
    for (int i = 0; i < nw; i++) {
        make_tensor(&wb[i], r, types[i], k, n_out[i]);
        w[i] = &wb[i].t;
        out[i] = malloc(sizeof(float) * (size_t)n_out[i] * (size_t)rows);
        one[i] = malloc(sizeof(float) * (size_t)n_out[i] * (size_t)rows);
    }
    /* the decode path: one token per call, one thread */
    mf_backend *be1 = mf_cpu_backend_new(1, rows, (int)k, 64, false);
    for (int j = 0; j < rows; j++) {
        float *o[4];
        for (int i = 0; i < nw; i++) o[i] = one[i] + (size_t)j * n_out[i];
        be1->ops->matmul_n(be1, w, NULL, nw, x + (size_t)j * (size_t)k, 1, o, NULL);
    }
    be1->ops->destroy(be1);
    for (int nth = 1; nth <= 3; nth++) {
        mf_backend *be = mf_cpu_backend_new(nth, rows, (int)k, 64, false);
        be->ops->matmul_n(be, w, NULL, nw, x, rows, out, NULL);
        be->ops->destroy(be);
        for (int i = 0; i < nw; i++) {
            const size_t n = (size_t)n_out[i] * (size_t)rows;
            CHECK(!memcmp(out[i], one[i], n * sizeof(float)),
                  "matmul_n %s (weight %d of %d), k %lld, %d rows x %d tokens, %d threads: batch differs from one token "
                  "at a time", mf_type_name(types[i]), i, nw, (long long)k, n_out[i], rows, nth);
        }
    }
    for (int i = 0; i < nw; i++) free(wb[i].data), free(out[i]), free(one[i]);
    free(x);
    printf("matmul_n %-7s x%d, k %5lld, %3d tokens: batch == one token at a time at 1, 2, 3 threads\n",
           mf_type_name(types[0]), nw, (long long)k, rows);
}

/* The fused epilogue: out[i] = x.w[i]^T + b[i], and res += out[0], bitwise
 * the matmul followed by a bias add and an add, in a batch
 * (GEMM where the kind has one) and token by token, at 1-3 threads. */
static void epilogue_case(const mf_type *types, int nw, int64_t k, const int *n_out, int rows, bool x16, qrand *r) {
    wbuf wb[4];
    mf_tensor bt[4], xt[4];
    uint8_t *xd[4] = {0};
    mf_weight w[4], bw[4], wf[4];
    float *plain[4], *out[4], *bias[4];
    float *x = malloc(sizeof(float) * (size_t)k * (size_t)rows);
    make_acts(r, A_GAUSS, k, rows, x);
    for (int i = 0; i < nw; i++) {
        make_tensor(&wb[i], r, types[i], k, n_out[i]);
        w[i] = wf[i] = &wb[i].t;
        if (x16 && (xd[i] = make_x16(&wb[i], &xt[i]))) wf[i] = &xt[i];
        plain[i] = malloc(sizeof(float) * (size_t)n_out[i] * (size_t)rows);
        out[i] = malloc(sizeof(float) * (size_t)n_out[i] * (size_t)rows);
        bias[i] = malloc(sizeof(float) * (size_t)n_out[i]);
        make_acts(r, A_GAUSS, n_out[i], 1, bias[i]);
        memset(&bt[i], 0, sizeof bt[i]);
        bt[i].type = MF_TYPE_F32;
        bt[i].ne[0] = n_out[i], bt[i].ne[1] = bt[i].ne[2] = bt[i].ne[3] = 1;
        bt[i].data = bias[i];
        /* the middle weight of three has no bias (Qwen2's q/k/v all have one;
         * an ffn up bias comes without a gate bias) */
        bw[i] = nw == 3 && i == 1 ? NULL : &bt[i];
    }
    const size_t n0 = (size_t)n_out[0] * (size_t)rows;
    float *res0 = malloc(sizeof(float) * n0), *res = malloc(sizeof(float) * n0), *want = malloc(sizeof(float) * n0);
    make_acts(r, A_GAUSS, n_out[0], rows, res0);
    mf_backend *ref = mf_cpu_backend_new(1, rows, (int)k, 64, false);
    ref->ops->matmul_n(ref, w, NULL, nw, x, rows, plain, NULL);
    ref->ops->destroy(ref);
    for (int i = 0; i < nw; i++)
        if (bw[i])
            for (int t = 0; t < rows; t++)
                for (int j = 0; j < n_out[i]; j++) plain[i][(size_t)t * n_out[i] + j] += bias[i][j];
    for (size_t j = 0; j < n0; j++) want[j] = res0[j] + plain[0][j];
    int bad = 0;
    for (int nth = 1; nth <= 3; nth++)
        for (int by_token = 0; by_token < 2; by_token++) {
            mf_backend *be = mf_cpu_backend_new(nth, rows, (int)k, 64, false);
            memcpy(res, res0, sizeof(float) * n0);
            for (int t0 = 0; t0 < rows; t0 += by_token ? 1 : rows) {
                const int nt = by_token ? 1 : rows;
                float *o[4];
                for (int i = 0; i < nw; i++) o[i] = out[i] + (size_t)t0 * n_out[i];
                be->ops->matmul_n(be, wf, bw, nw, x + (size_t)t0 * (size_t)k, nt, o, res + (size_t)t0 * n_out[0]);
            }
            be->ops->destroy(be);
            for (int i = 0; i < nw; i++)
                bad += memcmp(out[i], plain[i], sizeof(float) * (size_t)n_out[i] * (size_t)rows) != 0;
            bad += memcmp(res, want, sizeof(float) * n0) != 0;
        }
    CHECK(!bad, "epilogue %s x%d%s, k %lld, %d tokens: %d outputs differ from matmul + bias add + add", mf_type_name(types[0]),
          nw, x16 ? " x16" : "", (long long)k, rows, bad);
    for (int i = 0; i < nw; i++) free(wb[i].data), free(xd[i]), free(plain[i]), free(out[i]), free(bias[i]);
    free(res0), free(res), free(want), free(x);
    printf("epilogue %-7s x%d%s, k %5lld, %3d tokens: bias and residual add fused == separate, batch and by token, 1-3 threads\n",
           mf_type_name(types[0]), nw, x16 ? " (x16)" : "", (long long)k, rows);
}

static void matmul_tests(void) {
    qrand r = {12345};
    /* Qwen2-style Q4_K_M fallbacks: q/k in Q5_0, v in Q8_0 */
    const mf_type qkv[] = {MF_TYPE_Q5_0, MF_TYPE_Q5_0, MF_TYPE_Q8_0};
    const int nqkv[] = {96, 32, 32};
    matmul_case(qkv, 3, 896, nqkv, 37, &r);
    /* K-quants and F16 of one input, odd sizes */
    const mf_type kq[] = {MF_TYPE_Q4_K, MF_TYPE_Q6_K, MF_TYPE_Q5_K};
    const int nkq[] = {70, 33, 17};
    matmul_case(kq, 3, 512, nkq, 23, &r);
    const mf_type k23[] = {MF_TYPE_Q3_K, MF_TYPE_Q2_K, MF_TYPE_IQ4_XS};
    const int nk23[] = {48, 21, 35};
    matmul_case(k23, 3, 768, nk23, 19, &r);
    const mf_type f[] = {MF_TYPE_F16, MF_TYPE_Q4_0, MF_TYPE_IQ4_NL, MF_TYPE_Q4_1};
    const int nf[] = {45, 20, 19, 9};
    matmul_case(f, 4, 256, nf, 50, &r);
    /* BF16: ragged lanes and a partial run of 8 in the last block */
    const mf_type bf[] = {MF_TYPE_BF16, MF_TYPE_Q8_0};
    const int nbf[] = {45, 32};
    matmul_case(bf, 2, 296, nbf, 50, &r);
    /* at the live kind's threshold and just below it (vec_dot) */
    const mf_type single[] = {MF_TYPE_Q6_K};
    const int ns[] = {200};
    const mf_gemm_kind *g = mf_gemm_get(MF_TYPE_Q6_K);
    const int at = g ? g->min_rows : 4;
    matmul_case(single, 1, 1024, ns, at, &r);
    matmul_case(single, 1, 1024, ns, at - 1 > 1 ? at - 1 : 2, &r);
    epilogue_case(qkv, 3, 896, nqkv, 37, false, &r);
    epilogue_case(qkv, 3, 896, nqkv, 37, true, &r);
    epilogue_case(single, 1, 1024, ns, at, false, &r);
    epilogue_case(single, 1, 1024, ns, 3, false, &r);
    const int n16[] = {208};
    epilogue_case(single, 1, 1024, n16, at, true, &r);
    const mf_type f16[] = {MF_TYPE_F16};
    epilogue_case(f16, 1, 256, ns, 40, false, &r);
}

/* ---------------- interleaved (x16) weights through the ops ---------------- */

/* The same matrices as interleaved copies (the tensor handle, data NULL so any read
 * of the file layout crashes) and as plain ones, mixed with a plain weight of
 * another type in one matmul_n: decode (1 token), a short batch on the
 * vec_dot path, a GEMM-sized batch (panels unpacked from x16) at 1-3
 * threads, and get_rows of the interleaved matrix, all bitwise equal. */
static void x16_case(const mf_type *types, int nw, int64_t k, const int *n_out, qrand *r) {
    wbuf wb[4];
    mf_tensor xt[4];
    uint8_t *xd[4] = {0};
    mf_weight plain[4], mixed[4];
    int n_x16 = 0;
    for (int i = 0; i < nw; i++) {
        make_tensor(&wb[i], r, types[i], k, n_out[i]);
        plain[i] = mixed[i] = &wb[i].t;
        if (!(xd[i] = make_x16(&wb[i], &xt[i]))) continue;
        mixed[i] = &xt[i];
        n_x16++;
    }
    const mf_gemm_kind *gk = mf_gemm_get(types[0]);
    const int batches[] = {1, 3, gk ? gk->min_rows + 5 : 21};
    for (int bi = 0; bi < 3; bi++) {
        const int rows = batches[bi];
        float *x = malloc(sizeof(float) * (size_t)k * (size_t)rows);
        make_acts(r, A_GAUSS, k, rows, x);
        for (int nth = 1; nth <= 3; nth++) {
            mf_backend *be = mf_cpu_backend_new(nth, rows, (int)k, 64, false);
            float *a[4], *b[4];
            for (int i = 0; i < nw; i++) {
                a[i] = malloc(sizeof(float) * (size_t)n_out[i] * (size_t)rows);
                b[i] = malloc(sizeof(float) * (size_t)n_out[i] * (size_t)rows);
            }
            be->ops->matmul_n(be, plain, NULL, nw, x, rows, a, NULL);
            be->ops->matmul_n(be, mixed, NULL, nw, x, rows, b, NULL);
            for (int i = 0; i < nw; i++) {
                CHECK(!memcmp(a[i], b[i], sizeof(float) * (size_t)n_out[i] * (size_t)rows),
                      "x16 %s (weight %d of %d), k %lld, %d rows, %d tokens, %d threads: differs from the plain layout",
                      mf_type_name(types[i]), i, nw, (long long)k, n_out[i], rows, nth);
                free(a[i]);
                free(b[i]);
            }
            if (bi == 0)
                for (int i = 0; i < nw; i++) {
                    if (!xd[i]) continue;
                    const mf_token ids[] = {0, 15 % n_out[i], 16 % n_out[i], n_out[i] - 1, 17 % n_out[i]};
                    float *ga = malloc(sizeof(float) * (size_t)k * 5), *gb = malloc(sizeof(float) * (size_t)k * 5);
                    mf_cpu_get_rows(be, plain[i], ids, 5, ga);
                    mf_cpu_get_rows(be, mixed[i], ids, 5, gb);
                    CHECK(!memcmp(ga, gb, sizeof(float) * (size_t)k * 5), "x16 %s get_rows, %d threads: differs",
                          mf_type_name(types[i]), nth);
                    free(ga);
                    free(gb);
                }
            be->ops->destroy(be);
        }
        free(x);
    }
    for (int i = 0; i < nw; i++) free(wb[i].data), free(xd[i]);
    printf("x16 %-7s x%d (%d interleaved), k %5lld: decode, batch, GEMM batch and get_rows equal the plain layout\n",
           mf_type_name(types[0]), nw, n_x16, (long long)k);
}

static void x16_tests(void) {
    qrand r = {777};
    const mf_type kq[] = {MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K};
    const int nkq[] = {80, 17, 48};
    x16_case(kq, 3, 512, nkq, &r);
    const mf_type k6[] = {MF_TYPE_Q6_K, MF_TYPE_Q4_K};
    const int n6[] = {16, 96};
    x16_case(k6, 2, 2048, n6, &r);
    const mf_type k23[] = {MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_Q5_K};
    const int n23[] = {32, 48, 16};
    x16_case(k23, 3, 768, n23, &r);
    const mf_type leg[] = {MF_TYPE_Q8_0, MF_TYPE_Q5_0, MF_TYPE_Q4_0};
    const int nleg[] = {64, 48, 32};
    x16_case(leg, 3, 896, nleg, &r);
    /* F16 panels are 14 rows: they straddle the 16-row groups */
    const mf_type f16[] = {MF_TYPE_F16, MF_TYPE_Q8_0};
    const int nf16[] = {80, 32};
    x16_case(f16, 2, 200, nf16, &r);
    const int nf16b[] = {32, 16};
    x16_case(f16, 2, 896, nf16b, &r);
    /* BF16 panels too (8 or 4 rows from the groups' column pairs) */
    const mf_type bf16[] = {MF_TYPE_BF16, MF_TYPE_Q8_0};
    x16_case(bf16, 2, 200, nf16, &r);
    x16_case(bf16, 2, 896, nf16b, &r);
    /* rows longer than get_rows' 4 KiB unpack buffer: looked up in chunks */
    const mf_type big[] = {MF_TYPE_F16, MF_TYPE_Q8_0};
    const int nbig[] = {16, 16};
    x16_case(big, 2, 4864, nbig, &r);
}

/* With the AMX kinds in the matmul (MINFER_AMX_EMULATE: the C model of the
 * tiles where the CPU has none): batches of several token-tile blocks per
 * call (> 128 tokens), partial tiles and groups, at 1-3 threads. */
static void amx_matmul_tests(void) {
    qrand r = {4242};
    const mf_type kq[] = {MF_TYPE_Q4_K, MF_TYPE_Q2_K, MF_TYPE_Q6_K};
    const int nkq[] = {70, 33, 48};
    matmul_case(kq, 3, 512, nkq, 150, &r);
    const mf_type k5[] = {MF_TYPE_Q5_K, MF_TYPE_Q3_K, MF_TYPE_IQ4_XS};
    const int nk5[] = {40, 17, 32};
    matmul_case(k5, 3, 768, nk5, 33, &r);
    const mf_type b32[] = {MF_TYPE_Q8_0, MF_TYPE_Q4_0};
    const int nb32[] = {48, 20};
    matmul_case(b32, 2, 256, nb32, 40, &r);
}

/* argument amx-emu: only the matmul op, on the emulated AMX kinds (with
 * tile-mins: amx-emu-tmin); the kernel cases cover the kinds themselves */
int main(int argc, char **argv) {
    const int emu = argc > 1 && !strncmp(argv[1], "amx-emu", 7);
    /* everything here is bitwise vec_dot's: not the AMX bf16 kinds of F16
     * weights, which test_gemm_amx_bf16.c checks against their bound */
    setenv("MINFER_AMX_BF16", "0", 1);
    if (emu) {
        setenv("MINFER_AMX_EMULATE", "1", 1);
        if (!strcmp(argv[1], "amx-emu-tmin")) setenv("MINFER_AMX_MINS", "tile", 1);
    }
    mf_cpu_init();
    if (emu) {
        if (mf_cpu_level_supported() < MF_CPU_AVX512_VNNI) {
            printf("note: AMX model needs AVX-512 VNNI, skipped\n");
            return test_summary("cpu_gemm");
        }
        const mf_gemm_kind *g = mf_gemm_get(MF_TYPE_Q4_K);
        printf("matmul kinds: %s, %s\n", g ? g->name : "-", mf_gemm_get(MF_TYPE_Q2_K) ? mf_gemm_get(MF_TYPE_Q2_K)->name : "-");
        CHECK(g && g->act == MF_GEMM_ACT_Q8K_AMX, "MINFER_AMX_EMULATE=1: the matmul does not use the AMX kind");
        matmul_tests();
        amx_matmul_tests();
        return test_summary("cpu_gemm");
    }
    kernel_tests();
    matmul_tests();
    x16_tests();
    return test_summary("cpu_gemm");
}
