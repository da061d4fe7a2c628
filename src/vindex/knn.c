/* knn.c - gate KNN: every thread scans a fixed contiguous range of the
 * layer's gate rows in tiles of VX_TILE rows against up to VX_QROWS queries
 * at once (each row read from memory once per query group), keeping one
 * bounded heap per query; the heaps of all threads are then merged. The
 * heaps' total order (score, then lower feature) makes the answer
 * independent of the thread count and of the split. Scratch is sized at
 * open for k up to 4096 and grown once when a larger k is first asked for:
 * a query allocates nothing. */
#include "vindex/vindex.h"
#include "vindex/knn_kern.h"
#include "vindex/topk.h"
#include "core/error.h"
#include "cpu/kern/features.h"
#include "engine/context.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define VX_QROWS 8
#define VX_TILE 64

float vx_rank_key(vx_rank r, float g) {
    if (r == VX_RANK_SILU_ABS) return fabsf(g / (1.0f + expf(-g)));
    if (r == VX_RANK_GELU_ABS) return fabsf(0.5f * g * (1.0f + tanhf(0.797884560802865355f * g * (1.0f + 0.044715f * g * g))));
    return g;
}

/* The first heaps hold this many per query; a larger k grows them once (a
 * walk at K = 25% of 64k features asks for 16,384). */
#define VX_K0 4096

/* The threads' heaps for queries of up to kcap features (all nth of them). */
static mf_status alloc_heaps(mf_vindex *v, int nth, int kcap, float **hs, int32_t **hi) {
    /* per thread: VX_QROWS heaps of kcap, then VX_QROWS x VX_TILE scores */
    const size_t per = (size_t)VX_QROWS * kcap + (size_t)VX_QROWS * VX_TILE;
    *hs = malloc((size_t)nth * per * sizeof(float));
    *hi = malloc((size_t)nth * VX_QROWS * kcap * sizeof(int32_t));
    if (*hs && *hi) return MF_OK;
    free(*hs), free(*hi);
    *hs = NULL, *hi = NULL;
    return mf_err(MF_ERR_NOMEM, "out of memory for the KNN heaps of %d threads (top %d)", nth, kcap);
}

/* Makes p the vindex's pool (owned: freed with it or when replaced), the
 * heaps sized for its threads. */
static mf_status use_pool(mf_vindex *v, mf_pool *p, bool owned) {
    const int nth = mf_pool_size(p);
    int kcap = v->kcap;
    if (!kcap) kcap = v->ix.n_features < VX_K0 ? (v->ix.n_features > 0 ? v->ix.n_features : 1) : VX_K0;
    float *hs;
    int32_t *hi;
    mf_topk *hd = malloc((size_t)nth * VX_QROWS * sizeof *hd);
    mf_status s = hd ? alloc_heaps(v, nth, kcap, &hs, &hi) : mf_err(MF_ERR_NOMEM, "out of memory");
    if (s) {
        free(hd);
        if (owned) mf_pool_free(p);
        return s;
    }
    if (v->pool_owned) mf_pool_free(v->pool);
    free(v->heap_s), free(v->heap_i), free(v->heads);
    v->pool = p, v->pool_owned = owned, v->n_threads = nth, v->heap_s = hs, v->heap_i = hi, v->heads = hd, v->kcap = kcap;
    return MF_OK;
}

mf_status mf_vindex_set_threads(mf_vindex *v, int32_t n_threads) {
    mf_pool *p = mf_pool_new(n_threads);
    if (!p) return mf_err(MF_ERR_NOMEM, "cannot start %d threads", n_threads);
    return use_pool(v, p, true);
}

mf_status mf_vindex_set_threadpool(mf_vindex *v, mf_threadpool *tp) {
    if (!tp) return mf_vindex_set_threads(v, 0);
    return use_pool(v, tp->pool, false);
}

typedef struct knn_job {
    const mf_vindex *v;
    vx_rank rank;
    int layer;
    const float *bias;
    vx_dot_fn dot;
    const uint8_t *rows;
    const float *x;
    float *g;        /* the group's raw gate scores [nx][n_features] (vx_knn_g), or NULL */
    int nx, k;
    vx_q8pre_fn pre; /* the q8_0 integer pre-scan for this query group, or NULL */
    vx_q8q q8[VX_QROWS];
} knn_job;

/* ---- the q8_0 integer pre-scan ----
 *
 * For a q8_0 gate and plain dot scores, a query group first runs the
 * integer pre-scan (knn_kern.h): per row an approximate score s and a bound
 * e with |twin score - s| <= e, so [s - e, s + e] holds the score the float
 * kernel would give. Each thread keeps the k best lower bounds of its rows;
 * with T the k-th of them, a row whose upper bound is below T has a score
 * below k others' and cannot be in the thread's top k. The rows left (the
 * top k and those within the bounds' width of the threshold) are scored by
 * the float kernel itself and go into the usual heaps, so the answer is the
 * float scan's, bit for bit, with any thread count.
 *
 * The bound. With the query quantized per 32-block b as x_j = dx_b q_j +
 * r_j, the exact dot D = sum_b d_b sum_j w_j x_j, the pre-scan's exact value
 * S = sum_b d_b dx_b I_b (I_b = sum_j w_j q_j) and |w_j| <= 127:
 *   |D - S| <= sum_b |d_b| 127 R1_b,                R1_b = sum_j |r_j|
 *   |twin - D| <= g1 sum_b |d_b| 127 X1_b,          X1_b = sum_j |x_j|,
 *     g1 = (nb + 16) 2^-24: the twin's products, the block's 3 adds and its
 *     scale, nb lane adds and 3 reduction levels are each one rounding
 *   |s - S| <= g2 sum_b |d_b| dx_b 127 Q1_b,       Q1_b = sum_j |q_j|,
 *     g2 = (nb / 2 + 16) 2^-24: the scale product, nb / 2 fmas per lane and
 *     4 reduction levels
 * so e = sum_b |d_b| c_b with c_b = 127 (R1_b + g1 X1_b + g2 dx_b Q1_b),
 * computed in double and rounded up; the float sum of e is then widened by
 * 2^-10 of itself (its own roundings are ~(nb/2 + 4) 2^-24), 2^-20 of |s|
 * (the roundings of s - e and s + e) and 1e-30 (underflow). Queries with a
 * value beyond 1e20 or not finite take the float scan (no overflow can then
 * occur in either path); rows whose s or e is not finite (an inf or NaN
 * scale) are always rescored.
 *
 * It is opt-in (MINFER_KNN_INT8=1): the kernel alone is 1.4x the float q8_0
 * kernel's rate in L2, but once both prefetch, a query from memory was no
 * faster on the one AVX-512 VNNI machine measured (docs/PERFORMANCE.md). */

int vx_q8_prep(const float *x, int n, uint8_t *u, float *dx16, float *c16) {
    const int nb = n / 32, np = (nb + 1) / 2;
    const double g1 = (nb + 16) * 0x1p-24, g2 = (nb / 2 + 16) * 0x1p-24;
    memset(u, 128, (size_t)np * 64);
    memset(dx16, 0, (size_t)np * 16 * sizeof(float));
    memset(c16, 0, (size_t)np * 16 * sizeof(float));
    for (int b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        double mx = 0;
        for (int j = 0; j < 32; j++) {
            if (!(fabsf(xb[j]) <= 1e20f)) return 0; /* also NaN */
            if (fabs((double)xb[j]) > mx) mx = fabs((double)xb[j]);
        }
        const float dx = (float)(mx / 127.0);
        double r1 = 0, x1 = 0, q1 = 0;
        for (int j = 0; j < 32; j++) {
            long qj = dx > 0 ? lrint((double)xb[j] / dx) : 0;
            qj = qj > 127 ? 127 : qj < -127 ? -127 : qj;
            u[32 * b + j] = (uint8_t)(qj + 128);
            r1 += fabs((double)xb[j] - (double)dx * (double)qj);
            x1 += fabs((double)xb[j]);
            q1 += (double)labs(qj);
        }
        const double c8 = 127.0 * (r1 + g1 * x1 + g2 * (double)dx * q1) * (1.0 + 0x1p-10) / 8.0;
        float cf = (float)c8;
        if ((double)cf < c8) cf = nextafterf(cf, INFINITY);
        for (int l = 0; l < 8; l++) dx16[16 * (b / 2) + 8 * (b % 2) + l] = dx, c16[16 * (b / 2) + 8 * (b % 2) + l] = cf;
    }
    return 1;
}

/* The pre-scan's scratch for the current threads and heap size. */
static mf_status pre_alloc(mf_vindex *v) {
    if (v->pre_lb && v->pre_nth == v->n_threads && v->pre_kcap == v->kcap) return MF_OK;
    free(v->pre_lb), free(v->pre_e), free(v->pre_ub), free(v->pre_dx), free(v->pre_c), free(v->pre_lbi), free(v->pre_u);
    const size_t nth = (size_t)v->n_threads, kc = (size_t)v->kcap, F = (size_t)v->ix.n_features;
    const size_t np = ((size_t)v->ix.n_embd / 32 + 1) / 2;
    v->pre_lb = malloc(nth * VX_QROWS * kc * sizeof(float));
    v->pre_lbi = malloc(nth * VX_QROWS * kc * sizeof(int32_t));
    v->pre_e = malloc(nth * VX_QROWS * VX_TILE * sizeof(float));
    v->pre_ub = malloc(VX_QROWS * F * sizeof(float));
    v->pre_dx = malloc(VX_QROWS * np * 16 * sizeof(float));
    v->pre_c = malloc(VX_QROWS * np * 16 * sizeof(float));
    v->pre_u = malloc(VX_QROWS * np * 64);
    v->pre_nth = v->n_threads, v->pre_kcap = v->kcap;
    if (v->pre_lb && v->pre_lbi && v->pre_e && v->pre_ub && v->pre_dx && v->pre_c && v->pre_u) return MF_OK;
    free(v->pre_lb), free(v->pre_e), free(v->pre_ub), free(v->pre_dx), free(v->pre_c), free(v->pre_lbi), free(v->pre_u);
    v->pre_lb = v->pre_e = v->pre_ub = v->pre_dx = v->pre_c = NULL, v->pre_lbi = NULL, v->pre_u = NULL;
    return mf_err(MF_ERR_NOMEM, "out of memory for the KNN pre-scan");
}

/* knn_task's pre-scan path: the rows r0..r1 of thread ith into its heaps h. */
static void pre_task(knn_job *j, int ith, long r0, long r1, mf_topk *h) {
    const mf_vindex *v = j->v;
    const size_t kc = (size_t)v->kcap, F = (size_t)v->ix.n_features;
    const int E = v->ix.n_embd;
    const float *base_s = v->heap_s + (size_t)ith * (VX_QROWS * kc + (size_t)VX_QROWS * VX_TILE);
    float *sc = (float *)base_s + VX_QROWS * kc, *et = v->pre_e + (size_t)ith * VX_QROWS * VX_TILE;
    mf_topk hl[VX_QROWS];
    for (int q = 0; q < j->nx; q++)
        mf_topk_reset(&hl[q], j->k, v->pre_lb + ((size_t)ith * VX_QROWS + q) * kc, v->pre_lbi + ((size_t)ith * VX_QROWS + q) * kc);
    const uint8_t *del = v->deleted ? v->deleted + (size_t)j->layer * F : NULL;
    for (long r = r0; r < r1; r += VX_TILE) {
        const int nr = r1 - r < VX_TILE ? (int)(r1 - r) : VX_TILE;
        for (int q = 0; q < j->nx; q++) {
            j->pre(j->rows + (size_t)r * v->row_bytes, v->row_bytes, nr, &j->q8[q], E, sc, et);
            float *ub = v->pre_ub + (size_t)q * F + r;
            for (int i = 0; i < nr; i++) {
                const float s = sc[i], e = vx_q8_widen(s, et[i]);
                if (del && del[r + i]) {
                    ub[i] = -INFINITY; /* never a candidate (checked again below) */
                } else if (isfinite(s) && isfinite(e)) {
                    ub[i] = s + e;
                    mf_topk_push(&hl[q], s - e, (int32_t)(r + i));
                } else {
                    ub[i] = INFINITY;
                }
            }
        }
    }
    for (int q = 0; q < j->nx; q++) {
        const float T = hl[q].n < j->k ? -INFINITY : hl[q].score[0];
        const float *ub = v->pre_ub + (size_t)q * F, *x = j->x + (size_t)q * E;
        for (long r = r0; r < r1; r++) {
            if (ub[r] < T || (del && del[r])) continue;
            float g;
            j->dot(j->rows + (size_t)r * v->row_bytes, v->row_bytes, 1, x, (size_t)E, 1, E, &g, 1);
            mf_topk_push(&h[q], g, (int32_t)r);
        }
    }
}

static void knn_task(void *arg, int ith, int nth) {
    knn_job *j = arg;
    const mf_vindex *v = j->v;
    const size_t kc = (size_t)v->kcap, per = VX_QROWS * kc + (size_t)VX_QROWS * VX_TILE;
    float *hs = v->heap_s + (size_t)ith * per, *sc = hs + VX_QROWS * kc;
    int32_t *hi = v->heap_i + (size_t)ith * VX_QROWS * kc;
    mf_topk *h = v->heads + (size_t)ith * VX_QROWS;
    for (int q = 0; q < j->nx; q++) mf_topk_reset(&h[q], j->k, hs + (size_t)q * kc, hi + (size_t)q * kc);
    long r0, r1;
    mf_split(v->ix.n_features, ith, nth, &r0, &r1);
    if (j->pre) {
        pre_task(j, ith, r0, r1, h);
        return;
    }
    const int E = v->ix.n_embd;
    for (long r = r0; r < r1; r += VX_TILE) {
        const int nr = r1 - r < VX_TILE ? (int)(r1 - r) : VX_TILE;
        j->dot(j->rows + (size_t)r * v->row_bytes, v->row_bytes, nr, j->x, (size_t)E, j->nx, E, sc, VX_TILE);
        if (j->g)
            for (int q = 0; q < j->nx; q++)
                memcpy(j->g + (size_t)q * v->ix.n_features + r, sc + (size_t)q * VX_TILE, (size_t)nr * sizeof(float));
        if (j->rank != VX_RANK_DOT)
            for (int q = 0; q < j->nx; q++)
                for (int i = 0; i < nr; i++) {
                    float *g = &sc[(size_t)q * VX_TILE + i];
                    *g = vx_rank_key(j->rank, *g + (j->bias ? j->bias[r + i] : 0.0f));
                }
        const uint8_t *del = v->deleted ? v->deleted + (size_t)j->layer * v->ix.n_features + r : NULL;
        for (int q = 0; q < j->nx; q++)
            for (int i = 0; i < nr; i++)
                if (!del || !del[i]) mf_topk_push(&h[q], sc[(size_t)q * VX_TILE + i], (int32_t)(r + i));
    }
}

mf_status mf_vindex_knn(mf_vindex *v, int32_t layer, const float *x, int32_t n_rows, int32_t k, int32_t *feat,
                        float *score) {
    return vx_knn(v, layer, x, n_rows, k, VX_RANK_DOT, NULL, feat, score);
}

mf_status vx_knn(mf_vindex *v, int layer, const float *x, int n_rows, int k, vx_rank rank, const float *bias,
                 int32_t *feat, float *score) {
    return vx_knn_g(v, layer, x, n_rows, k, rank, bias, feat, score, NULL, NULL);
}

mf_status vx_knn_g(mf_vindex *v, int layer, const float *x, int n_rows, int k, vx_rank rank, const float *bias,
                   int32_t *feat, float *score, float *g, bool *g_set) {
    if (g_set) *g_set = false;
    if (layer < 0 || layer >= v->ix.n_layer)
        return mf_err(MF_ERR_INVALID_ARG, "layer %d is out of range (0..%d)", layer, v->ix.n_layer - 1);
    if (k < 1 || k > v->ix.n_features)
        return mf_err(MF_ERR_INVALID_ARG, "top-k %d is out of range (1..%d)", k, v->ix.n_features);
    if (n_rows < 0) return mf_err(MF_ERR_INVALID_ARG, "n_rows %d", n_rows);
    if (v->hnsw_on) return vx_hnsw_knn(v, layer, x, n_rows, k, rank, bias, feat, score);
    if (k > v->kcap) {
        /* once per larger k, not per query: the heaps of every thread regrown */
        float *hs;
        int32_t *hi;
        mf_status s = alloc_heaps(v, v->n_threads, k, &hs, &hi);
        if (s) return s;
        free(v->heap_s), free(v->heap_i);
        v->heap_s = hs, v->heap_i = hi, v->kcap = k;
    }
    knn_job j;
    j.v = v;
    j.rank = rank;
    j.layer = layer;
    j.bias = bias;
    j.dot = vx_dot_best(v->ix.ftype);
    j.rows = vx_layer_rows(v, VX_GATE, layer);
    j.k = k;
    const int E = v->ix.n_embd, nth = v->n_threads;
    /* the integer pre-scan, when asked for: q8_0 gates, plain dot scores, a
     * k small next to the features (else most rows are rescored), and VNNI
     * (or a test's forcing, with the scalar twin) */
    vx_q8pre_fn pre = NULL;
    if (v->ix.ftype == MF_TYPE_Q8_0 && rank == VX_RANK_DOT && !bias && E % 32 == 0 && v->q8pre_mode != 1 &&
        (v->q8pre_mode == 2 || (size_t)k * 16 <= (size_t)v->ix.n_features)) {
        pre = mf_cpu_init() >= MF_CPU_AVX512_VNNI ? vx_q8pre_vnni() : v->q8pre_mode == 2 ? vx_q8pre_scalar() : NULL;
        if (pre) {
            const mf_status st = pre_alloc(v);
            if (st) return st;
        }
    }
    const size_t np = ((size_t)E / 32 + 1) / 2;
    for (int q0 = 0; q0 < n_rows; q0 += VX_QROWS) {
        j.nx = n_rows - q0 < VX_QROWS ? n_rows - q0 : VX_QROWS;
        j.x = x + (size_t)q0 * E;
        j.pre = pre;
        j.g = NULL;
        for (int q = 0; pre && q < j.nx; q++) {
            uint8_t *u = v->pre_u + (size_t)q * np * 64;
            float *dx = v->pre_dx + (size_t)q * np * 16, *c = v->pre_c + (size_t)q * np * 16;
            if (!vx_q8_prep(j.x + (size_t)q * E, E, u, dx, c)) j.pre = NULL; /* the float scan for this group */
            j.q8[q].u = u, j.q8[q].dx16 = dx, j.q8[q].c16 = c;
        }
        /* the raw scores come from the float scan only (the pre-scan rescores some rows) */
        if (g && !j.pre) j.g = g + (size_t)q0 * v->ix.n_features;
        else g = NULL;
        mf_pool_run(v->pool, knn_task, &j);
        for (int q = 0; q < j.nx; q++) {
            /* merge: the best k of the threads' k each */
            mf_topk out;
            mf_topk_reset(&out, k, score + (size_t)(q0 + q) * k, feat + (size_t)(q0 + q) * k);
            for (int t = 0; t < nth; t++) {
                const mf_topk *h = &v->heads[(size_t)t * VX_QROWS + q];
                for (int i = 0; i < h->n; i++) mf_topk_push(&out, h->score[i], h->id[i]);
            }
            mf_topk_sort(&out);
            for (int i = out.n; i < k; i++) out.score[i] = -INFINITY, out.id[i] = -1; /* deleted features */
        }
    }
    if (g && g_set) *g_set = true;
    return MF_OK;
}
