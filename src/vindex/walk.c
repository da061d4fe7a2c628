/* walk.c - the walk FFN: a layer's FFN evaluated over only the top-k
 * features of each row (exact KNN over the vindex's gate rows, or its HNSW
 * graphs when set: hnsw.c), with the up rows and the down vectors read
 * feature-major from the vindex: out = sum over the selected f of
 * act(g_f) * (up_f . x) * down_f (gated), or act(g_f + b_f) * down_f
 * (non-gated, the "gate" being the up row), plus the down bias. It plugs in
 * as the context's ffn_cb, so the rest of the forward pass is the model's.
 *
 * The gather runs on the vindex's threads. The selected features, in rank
 * order, are cut into chunks whose size depends on k alone (walk_chunk);
 * each chunk sums its features' down vectors in rank order into its own
 * buffer, and the buffers are then added in chunk order. Which thread takes
 * which chunk changes nothing, so the output does not depend on the thread
 * count. */
#include "vindex/vindex.h"
#include "vindex/knn_kern.h"
#include "vindex/walk_kern.h"
#include "core/error.h"
#include "cpu/cpu.h"
#include "model/model.h"
#include "quant/fp16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct mf_walk {
    mf_vindex *v;
    const mf_model *m;
    int k, first;
    bool dense;        /* the model's FFN plus the overlay's changes (mf_walk_new_overlay) */
    vx_dot_fn dot;
    vx_dot2_fn dot2;
    vx_axpy_fn axpy, axpy_f32; /* a down row in the vindex's type; an f32 one (UPDATE's) */
    int cap_rows;      /* scratch below holds this many rows */
    int32_t *feat;
    float *score;
    float *gs;         /* [gs_rows][n_features] the KNN's raw gate scores (brute force only) */
    int gs_rows;
    float *row;        /* one decoded down row */
    float *bias;       /* [n_layer][n_features] up bias (non-gated), or NULL */
    int chunk, n_chunk; /* the gather's chunks for k features: features each, how many */
    float *part;       /* [n_chunk][n_embd] the chunks' sums */
};

void mf_walk_free(mf_walk *w) {
    if (!w) return;
    free(w->feat), free(w->score), free(w->gs), free(w->row), free(w->bias), free(w->part);
    free(w);
}

/* Features per chunk for a walk over k: at least 16 (a chunk's reduction
 * add per element is then small next to its 16 rows), at most 64 chunks
 * (bounds the buffers and the reduction for large k). */
static int walk_chunk(int k) {
    const int c = (k + 63) / 64;
    return c < 16 ? 16 : c;
}

void mf_walk_set_first_layer(mf_walk *w, int32_t from) { w->first = from; }

mf_status mf_walk_new_overlay(mf_vindex *v, const mf_model *m, mf_walk **out) {
    mf_status s = mf_walk_new(v, m, 1, out);
    if (!s) (*out)->dense = true;
    return s;
}

mf_status mf_walk_new(mf_vindex *v, const mf_model *m, int32_t k, mf_walk **out) {
    *out = NULL;
    const vx_index *ix = &v->ix;
    const mf_hparams *hp = &m->hp;
    if (hp->n_expert)
        return mf_err(MF_ERR_UNSUPPORTED, "walk FFN: %s has a mixture of experts; only dense FFNs walk so far", ix->arch);
    if (strcmp(ix->arch, m->arch->name) || (uint32_t)ix->n_layer != hp->n_layer || (uint32_t)ix->n_embd != hp->n_embd ||
        (uint32_t)ix->n_features != hp->n_ff)
        return mf_err(MF_ERR_INVALID_ARG,
                      "walk FFN: the vindex (%s, %d layers, %d x %d features) is not of this model (%s, %u layers, %u x %u)",
                      ix->arch, ix->n_layer, ix->n_features, ix->n_embd, m->arch->name, hp->n_layer, hp->n_ff, hp->n_embd);
    if (ix->gated && !ix->files[VX_UP].present)
        return mf_err(MF_ERR_UNSUPPORTED, "walk FFN: the vindex has no up rows (build it with --level inference)");
    if (k < 0) return mf_err(MF_ERR_INVALID_ARG, "walk FFN: k = %d", k);
    mf_walk *w = calloc(1, sizeof *w);
    if (!w) return mf_err(MF_ERR_NOMEM, "out of memory");
    w->v = v, w->m = m;
    w->k = k == 0 || k > ix->n_features ? ix->n_features : k;
    w->dot = vx_dot_best(ix->ftype);
    w->dot2 = vx_dot2_best(ix->ftype);
    w->axpy = vx_axpy_best(ix->ftype), w->axpy_f32 = vx_axpy_best(MF_TYPE_F32);
    w->chunk = walk_chunk(w->k), w->n_chunk = (w->k + w->chunk - 1) / w->chunk;
    w->row = malloc((size_t)ix->n_embd * sizeof(float));
    w->part = malloc((size_t)w->n_chunk * ix->n_embd * sizeof(float));
    if (!w->dot || !w->dot2 || !w->axpy) {
        mf_walk_free(w);
        return mf_err(MF_ERR_UNSUPPORTED, "walk FFN: features of type %s", mf_type_name(ix->ftype));
    }
    if (!w->row || !w->part) {
        mf_walk_free(w);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    if (!ix->gated) {
        w->bias = calloc((size_t)ix->n_layer * ix->n_features, sizeof(float));
        if (!w->bias) {
            mf_walk_free(w);
            return mf_err(MF_ERR_NOMEM, "out of memory");
        }
        for (int l = 0; l < ix->n_layer; l++) {
            const mf_tensor *b = m->layers[l].ffn_up_b;
            if (b) mf_type_traits_ref(b->type)->to_float(b->data, w->bias + (size_t)l * ix->n_features, ix->n_features);
        }
    }
    *out = w;
    return MF_OK;
}

/* GELU (tanh form) as the engine evaluates it, after llama.cpp: the input
 * rounded to f16, the result rounded to f16, exact outside (-10, 10). */
static float gelu(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    const float h = mf_fp16_to_fp32(mf_fp32_to_fp16(x)), c = 0.797884560802865355f;
    return mf_fp16_to_fp32(mf_fp32_to_fp16(0.5f * h * (1.0f + tanhf(c * h * (1.0f + 0.044715f * h * h)))));
}

/* The activation a base feature f feeds its down vector with, on row x. */
static float base_act(const mf_walk *w, int layer, int f, const float *x) {
    const mf_vindex *v = w->v;
    const int E = v->ix.n_embd;
    const uint8_t *gate = vx_layer_rows(v, VX_GATE, layer), *up = vx_layer_rows(v, VX_UP, layer);
    float g;
    w->dot(gate + (size_t)f * v->row_bytes, v->row_bytes, 1, x, (size_t)E, 1, E, &g, 1);
    if (!v->ix.gated) return gelu(g + w->bias[(size_t)layer * v->ix.n_features + f]);
    float u;
    w->dot(up + (size_t)f * v->row_bytes, v->row_bytes, 1, x, (size_t)E, 1, E, &u, 1);
    return (w->m->arch->ffn == MF_FFN_GEGLU ? gelu(g) : mf_silu_ref(g)) * u;
}

static float dotf(const float *a, const float *b, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

float vx_feat_act(const mf_vindex *v, mf_ffn_type act, const vx_feat *f, const float *x) {
    const int E = v->ix.n_embd;
    const float g = dotf(f->gate, x, E);
    if (!v->ix.gated) return gelu(g + f->bias);
    return (act == MF_FFN_GEGLU ? gelu(g) : mf_silu_ref(g)) * dotf(f->up, x, E);
}

static void axpy(float *o, float a, const float *d, int n) {
    for (int e = 0; e < n; e++) o[e] += a * d[e];
}

/* Adds the overlay's inserted features to one output row; in dense mode also
 * takes out the deleted features and swaps rewritten down vectors (the
 * model's FFN already holds their old contribution). */
static void overlay_row(mf_walk *w, int layer, const float *x, float *o) {
    mf_vindex *v = w->v;
    const vx_overlay *ov = &v->ov;
    const int E = v->ix.n_embd, F = v->ix.n_features;
    for (int i = 0; i < ov->n_ins[layer]; i++) {
        const vx_feat *f = &ov->ins[layer][i];
        if (!f->dead) axpy(o, vx_feat_act(v, w->m->arch->ffn, f, x), f->down, E);
    }
    if (!w->dense) return;
    const uint8_t *del = v->deleted + (size_t)layer * F;
    float *const *upd = ov->upd ? ov->upd + (size_t)layer * F : NULL;
    const uint8_t *down = vx_layer_rows(v, VX_DOWN, layer);
    const mf_type_traits *tr = mf_type_traits_ref(v->ix.ftype);
    for (int f = 0; f < F; f++) {
        if (!del[f] && !(upd && upd[f])) continue;
        const float a = base_act(w, layer, f, x);
        tr->to_float(down + (size_t)f * v->row_bytes, w->row, E);
        if (del[f]) axpy(o, -a, w->row, E);
        else
            for (int e = 0; e < E; e++) o[e] += a * upd[f][e] - a * w->row[e];
    }
}

int32_t vx_layer_contrib(mf_walk *w, int layer, const float *x, const float *dir, float *act, float *contrib) {
    mf_vindex *v = w->v;
    const int E = v->ix.n_embd, F = v->ix.n_features;
    const uint8_t *down = vx_layer_rows(v, VX_DOWN, layer);
    const mf_type_traits *tr = mf_type_traits_ref(v->ix.ftype);
    for (int f = 0; f < F; f++) {
        if (mf_vindex_is_deleted(v, layer, f)) {
            act[f] = contrib[f] = 0;
            continue;
        }
        const float *d = vx_overlay_down(v, layer, f);
        if (!d) {
            tr->to_float(down + (size_t)f * v->row_bytes, w->row, E);
            d = w->row;
        }
        act[f] = base_act(w, layer, f, x);
        contrib[f] = act[f] * dotf(d, dir, E);
    }
    const int ni = v->ov.n_ins ? v->ov.n_ins[layer] : 0;
    for (int i = 0; i < ni; i++) {
        const vx_feat *f = &v->ov.ins[layer][i];
        act[F + i] = f->dead ? 0 : vx_feat_act(v, w->m->arch->ffn, f, x);
        contrib[F + i] = f->dead ? 0 : act[F + i] * dotf(f->down, dir, E);
    }
    return F + ni;
}

/* One row's gather: the chunks' sums (gather_task), then their sum in chunk
 * order (reduce_task), both split over the vindex's threads. */
typedef struct walk_job {
    mf_walk *w;
    int layer, n_feat;
    const int32_t *feat;
    const float *x;
    const float *g; /* the KNN's gate scores of this row (all features), or NULL */
    float *o;
} walk_job;

/* The activation of base feature f from its gate score g and up score u. */
static inline float feat_act(const mf_walk *w, int layer, int f, float g, float u) {
    if (!w->v->ix.gated) return gelu(g + w->bias[(size_t)layer * w->v->ix.n_features + f]);
    return (w->m->arch->ffn == MF_FFN_GEGLU ? gelu(g) : mf_silu_ref(g)) * u;
}

/* Asks for a whole row ahead of its use: the rows are scattered, so the
 * hardware prefetchers only catch on a few lines into each. */
static inline void prefetch_row(const uint8_t *row, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(row + off, 0, 3);
}

static void gather_task(void *arg, int ith, int nth) {
    const walk_job *j = arg;
    mf_walk *w = j->w;
    const mf_vindex *v = w->v;
    const bool gated = v->ix.gated;
    const int E = v->ix.n_embd, cs = w->chunk, L = j->layer;
    const int n_chunk = (j->n_feat + cs - 1) / cs;
    const size_t rb = v->row_bytes;
    const uint8_t *gate = vx_layer_rows(v, VX_GATE, L), *up = vx_layer_rows(v, VX_UP, L), *down = vx_layer_rows(v, VX_DOWN, L);
    long c0, c1;
    mf_split(n_chunk, ith, nth, &c0, &c1);
    for (long c = c0; c < c1; c++) {
        float *p = w->part + (size_t)c * E;
        memset(p, 0, (size_t)E * sizeof(float));
        const int i1 = (int)(c + 1) * cs < j->n_feat ? (int)(c + 1) * cs : j->n_feat;
        /* features two at a time: each dot2 reads two rows in one pass (the
         * scores are each row's own, so the pairing changes no bits) */
        for (int i = (int)c * cs; i < i1; i += 2) {
            const int nf = i + 1 < i1 ? 2 : 1;
            const int32_t f[2] = {j->feat[i], j->feat[i + nf - 1]};
            for (int n = i + 2; n < i + 4 && n < j->n_feat; n++) {
                /* the next pair's rows (past the chunk too: the next chunk is most often this thread's) */
                const size_t at = (size_t)j->feat[n] * rb;
                if (!j->g) prefetch_row(gate + at, rb);
                if (gated) prefetch_row(up + at, rb);
                prefetch_row(down + at, rb);
            }
            float g[2], u[2] = {0, 0}, t[2];
            if (j->g) {
                g[0] = j->g[f[0]], g[1] = j->g[f[1]];
                if (gated) w->dot2(up + (size_t)f[0] * rb, up + (size_t)f[1] * rb, j->x, E, u);
            } else if (gated) {
                for (int k = 0; k < nf; k++) {
                    w->dot2(gate + (size_t)f[k] * rb, up + (size_t)f[k] * rb, j->x, E, t);
                    g[k] = t[0], u[k] = t[1];
                }
            } else {
                w->dot2(gate + (size_t)f[0] * rb, gate + (size_t)f[1] * rb, j->x, E, g);
            }
            for (int k = 0; k < nf; k++) {
                const float a = feat_act(w, L, f[k], g[k], u[k]);
                if (a == 0.0f) continue;
                const float *d = vx_overlay_down(v, L, f[k]); /* rewritten by an UPDATE */
                if (d) w->axpy_f32(a, d, E, p);
                else w->axpy(a, down + (size_t)f[k] * rb, E, p);
            }
        }
    }
}

static void reduce_task(void *arg, int ith, int nth) {
    const walk_job *j = arg;
    const mf_walk *w = j->w;
    const int E = w->v->ix.n_embd, n_chunk = (j->n_feat + w->chunk - 1) / w->chunk;
    long e0, e1;
    mf_split((E + 15) / 16, ith, nth, &e0, &e1); /* whole 64-byte lines per thread */
    e0 *= 16, e1 = e1 * 16 < E ? e1 * 16 : E;
    float *o = j->o;
    if (!n_chunk) {
        if (e1 > e0) memset(o + e0, 0, (size_t)(e1 - e0) * sizeof(float));
        return;
    }
    const float *p = w->part;
    for (long e = e0; e < e1; e++) o[e] = p[e];
    for (int c = 1; c < n_chunk; c++) {
        const float *pc = p + (size_t)c * E;
        for (long e = e0; e < e1; e++) o[e] += pc[e];
    }
}

int mf_walk_ffn(int layer, const float *xn, float *out, int n_rows, int n_embd, const int32_t *seq, const int32_t *pos,
                void *ud) {
    mf_walk *w = ud;
    const bool edited = w->v->ov.n_edit && w->v->ov.n_edit[layer];
    if (w->dense) {
        /* the model's own FFN where nothing changed, else it plus the changes */
        if (!edited) return 0;
        for (int r = 0; r < n_rows; r++) {
            memset(out + (size_t)r * n_embd, 0, (size_t)n_embd * sizeof(float));
            overlay_row(w, layer, xn + (size_t)r * n_embd, out + (size_t)r * n_embd);
        }
        return 2;
    }
    if (layer < w->first) return 0;
    mf_vindex *v = w->v;
    const vx_index *ix = &v->ix;
    const int K = w->k, E = n_embd;
    if (n_rows > w->cap_rows) {
        int32_t *f = realloc(w->feat, (size_t)n_rows * K * sizeof *f);
        if (f) w->feat = f;
        float *s = realloc(w->score, (size_t)n_rows * K * sizeof *s);
        if (s) w->score = s;
        if (!f || !s) return -1;
        w->cap_rows = n_rows;
    }
    /* the raw gate scores come from the brute-force scan only: no buffer
     * (rows x features floats) while an HNSW search picks the features */
    if (!v->hnsw_on && n_rows > w->gs_rows) {
        float *g = realloc(w->gs, (size_t)n_rows * ix->n_features * sizeof *g);
        if (!g) return -1;
        w->gs = g, w->gs_rows = n_rows;
    }
    const float *bias = w->bias ? w->bias + (size_t)layer * ix->n_features : NULL;
    const vx_rank rank = w->m->arch->ffn == MF_FFN_SWIGLU ? VX_RANK_SILU_ABS : VX_RANK_GELU_ABS;
    bool g_set;
    if (vx_knn_g(v, layer, xn, n_rows, K, rank, bias, w->feat, w->score, v->hnsw_on ? NULL : w->gs, &g_set)) return -1;
    const mf_layer *L = &w->m->layers[layer];
    for (int r = 0; r < n_rows; r++) {
        const float *x = xn + (size_t)r * E;
        float *o = out + (size_t)r * E;
        walk_job j = {.w = w, .layer = layer, .feat = w->feat + (size_t)r * K, .x = x, .o = o,
                      .g = g_set ? w->gs + (size_t)r * ix->n_features : NULL};
        /* fewer live features than k when a patch deleted some: -1 after them */
        while (j.n_feat < K && j.feat[j.n_feat] >= 0) j.n_feat++;
        mf_pool_run(v->pool, gather_task, &j);
        mf_pool_run(v->pool, reduce_task, &j);
        if (edited) overlay_row(w, layer, x, o);
        if (L->ffn_down_b) {
            /* decoded per row: biases are tiny next to the rows */
            mf_type_traits_ref(L->ffn_down_b->type)->to_float(L->ffn_down_b->data, w->row, E);
            for (int e = 0; e < E; e++) o[e] += w->row[e];
        }
    }
    return 1;
}
