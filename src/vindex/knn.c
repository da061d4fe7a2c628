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

mf_status mf_vindex_set_threads(mf_vindex *v, int32_t n_threads) {
    mf_pool *p = mf_pool_new(n_threads);
    if (!p) return mf_err(MF_ERR_NOMEM, "cannot start %d threads", n_threads);
    const int nth = mf_pool_size(p);
    int kcap = v->kcap;
    if (!kcap) kcap = v->ix.n_features < VX_K0 ? (v->ix.n_features > 0 ? v->ix.n_features : 1) : VX_K0;
    float *hs;
    int32_t *hi;
    mf_topk *hd = malloc((size_t)nth * VX_QROWS * sizeof *hd);
    mf_status s = hd ? alloc_heaps(v, nth, kcap, &hs, &hi) : mf_err(MF_ERR_NOMEM, "out of memory");
    if (s) {
        free(hd);
        mf_pool_free(p);
        return s;
    }
    mf_pool_free(v->pool);
    free(v->heap_s), free(v->heap_i), free(v->heads);
    v->pool = p, v->n_threads = nth, v->heap_s = hs, v->heap_i = hi, v->heads = hd, v->kcap = kcap;
    return MF_OK;
}

typedef struct knn_job {
    const mf_vindex *v;
    vx_rank rank;
    int layer;
    const float *bias;
    vx_dot_fn dot;
    const uint8_t *rows;
    const float *x;
    int nx, k;
} knn_job;

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
    const int E = v->ix.n_embd;
    for (long r = r0; r < r1; r += VX_TILE) {
        const int nr = r1 - r < VX_TILE ? (int)(r1 - r) : VX_TILE;
        j->dot(j->rows + (size_t)r * v->row_bytes, v->row_bytes, nr, j->x, (size_t)E, j->nx, E, sc, VX_TILE);
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
    for (int q0 = 0; q0 < n_rows; q0 += VX_QROWS) {
        j.nx = n_rows - q0 < VX_QROWS ? n_rows - q0 : VX_QROWS;
        j.x = x + (size_t)q0 * E;
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
    return MF_OK;
}
