/* hnsw.c - optional approximate gate KNN: per layer a hierarchical
 * navigable small-world graph (Malkov & Yashunin, 2016) over the gate rows,
 * searched instead of scanning every row.
 *
 * Gate top-K is a maximum inner product search (MIPS), not a nearest
 * neighbour one: rows differ in norm, and a row is not its own best match.
 * Two ways to build the graph are here. By default it is an ip-NSW graph
 * (Morozov & Babenko, 2018): the build links rows by their plain dot
 * g_i.g_j, the same similarity a query is scored by, and the search is the
 * usual best-first walk on that non-metric similarity. With
 * `mips_transform` it is built in the space of the MIPS-to-Euclidean
 * transform (Bachrach et al., 2014): g_i becomes [g_i, a_i],
 * a_i = sqrt(R^2 - |g_i|^2), R the largest row norm, a query [x, 0]; then
 * |[x,0] - [g_i,a_i]|^2 = |x|^2 + R^2 - 2 x.g_i, so a search still scores by
 * the plain gate dot, and only the build's similarity gains a_i a_j (one
 * float per row kept). Measured on random f16 rows with norms spread
 * +-50% (4,096 x 256, M 16, ef 64, 200 Gaussian queries): recall@10 0.86
 * plain, 0.09 transformed (the transform packs the many small-norm rows
 * around its extra axis and the links go there, away from the large-norm
 * rows a query wants), so plain IP is the default and the transform is kept
 * for the comparison.
 *
 * Determinism: node levels come from a hash of (seed, layer, feature); nodes
 * are inserted in feature order in batches whose sizes depend only on how
 * many nodes are in. A batch runs in three phases, each reading only what
 * the phase before left: every node's neighbour search on the graph as it
 * was at the batch start; every node's choice of its own links from those
 * candidates and its earlier batch mates; then the reverse links, grouped by
 * the node receiving them and added in feature order. Each phase splits over
 * threads in any way with the same result, so the graph, and every answer,
 * is the same for any thread count, and the same whether a layer is built on
 * its own (its phases spread over the threads) or with other layers (one
 * thread per layer).
 *
 * A query walks the upper levels greedily, then keeps the ef best at level 0
 * (ef raised to k); with ef >= the layer's feature count the search goes on
 * until nothing is left and then scores any node the graph did not reach,
 * so it is exact. Deleted features are walked through but never returned.
 * The walk FFN ranks by |act(score)|: the search is by score (the top
 * activations are the top scores, except negative scores whose |act| is
 * small: |silu| <= 0.28 there), then the ef found are re-ranked by the key;
 * a row whose k-th |act| is below what a negative score can reach is not a
 * MIPS any more and is scanned instead (counted in the stats' fallbacks).
 *
 * The graphs can be saved and mapped back instead of rebuilt (hnsw_file.c);
 * a mapped graph has no build state (similarities, transform term), so it
 * is only ever searched. */
#include "vindex/vindex.h"
#include "vindex/knn_kern.h"
#include "vindex/hnsw_int.h"
#include "vindex/topk.h"
#include "core/error.h"
#include "core/timer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HN_MAX_BATCH 64
#define HN_SEED 0x243f6a8885a308d3ull

/* per thread: visit stamps, the candidate max-heap, the result heap, buffers */
struct vx_hscratch {
    int32_t n, e;
    uint32_t *seen, epoch;
    float *cs;
    int32_t *ci;
    int cn;
    float *ws;
    int32_t *wi;
    float *q, *tmp;
    uint64_t evals, fallbacks;
};

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void vx_hnsw_free(vx_hnsw *g) {
    if (!g) return;
    if (g->mapped) {
        free(g);
        return;
    }
    free(g->level), free(g->link0), free(g->sim0), free(g->up_off), free(g->up), free(g->up_sim), free(g->aug);
    free(g);
}

static void scratch_free(vx_hscratch *s) {
    if (!s) return;
    free(s->seen), free(s->cs), free(s->ci), free(s->ws), free(s->wi), free(s->q), free(s->tmp);
}

void vx_hnsw_release(mf_vindex *v) {
    if (v->hnsw)
        for (int l = 0; l < v->ix.n_layer; l++) vx_hnsw_free(v->hnsw[l]);
    free(v->hnsw);
    v->hnsw = NULL;
    for (int t = 0; v->hscr && t < v->n_hscr; t++) scratch_free(&v->hscr[t]);
    free(v->hscr);
    v->hscr = NULL, v->n_hscr = 0;
    /* after the graphs: loaded ones point into it */
    mf_mapfile_close(&v->hnsw_map);
    free(v->hnsw_file);
    v->hnsw_file = NULL;
}

/* one scratch per pool thread, sized for a layer */
static mf_status need_scratch(mf_vindex *v) {
    if (v->hscr && v->n_hscr == v->n_threads) return MF_OK;
    for (int t = 0; v->hscr && t < v->n_hscr; t++) scratch_free(&v->hscr[t]);
    free(v->hscr);
    v->n_hscr = 0;
    const int n = v->ix.n_features, E = v->ix.n_embd;
    v->hscr = calloc((size_t)v->n_threads, sizeof *v->hscr);
    if (!v->hscr) return mf_err(MF_ERR_NOMEM, "out of memory for the HNSW scratch");
    v->n_hscr = v->n_threads;
    for (int t = 0; t < v->n_threads; t++) {
        vx_hscratch *s = &v->hscr[t];
        s->n = n, s->e = E;
        s->seen = calloc((size_t)n, sizeof *s->seen);
        s->cs = malloc((size_t)n * sizeof *s->cs), s->ci = malloc((size_t)n * sizeof *s->ci);
        s->ws = malloc((size_t)n * sizeof *s->ws), s->wi = malloc((size_t)n * sizeof *s->wi);
        s->q = malloc((size_t)E * sizeof *s->q), s->tmp = malloc((size_t)E * sizeof *s->tmp);
        if (!s->seen || !s->cs || !s->ci || !s->ws || !s->wi || !s->q || !s->tmp)
            return mf_err(MF_ERR_NOMEM, "out of memory for the HNSW scratch (%d features)", n);
    }
    return MF_OK;
}

/* ---- candidate max-heap (best first, ties to the lower id) ---- */

static void cand_push(vx_hscratch *s, float sc, int32_t id) {
    int i = s->cn++;
    s->cs[i] = sc, s->ci[i] = id;
    while (i > 0) {
        int p = (i - 1) / 2;
        if (!mf_topk_better(s->cs[i], s->ci[i], s->cs[p], s->ci[p])) break;
        float ts = s->cs[i]; s->cs[i] = s->cs[p]; s->cs[p] = ts;
        int32_t ti = s->ci[i]; s->ci[i] = s->ci[p]; s->ci[p] = ti;
        i = p;
    }
}

static void cand_pop(vx_hscratch *s, float *sc, int32_t *id) {
    *sc = s->cs[0], *id = s->ci[0];
    const int n = --s->cn;
    s->cs[0] = s->cs[n], s->ci[0] = s->ci[n];
    for (int i = 0;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && mf_topk_better(s->cs[l], s->ci[l], s->cs[w], s->ci[w])) w = l;
        if (r < n && mf_topk_better(s->cs[r], s->ci[r], s->cs[w], s->ci[w])) w = r;
        if (w == i) break;
        float ts = s->cs[i]; s->cs[i] = s->cs[w]; s->cs[w] = ts;
        int32_t ti = s->ci[i]; s->ci[i] = s->ci[w]; s->ci[w] = ti;
        i = w;
    }
}

static void new_epoch(vx_hscratch *s) {
    if (++s->epoch == 0) {
        memset(s->seen, 0, (size_t)s->n * sizeof *s->seen);
        s->epoch = 1;
    }
}

/* What a search scores node j by: the gate dot with q, plus qa * a_j (the
 * build's transform term) and bias_j (non-gated walk). */
typedef struct hn_query {
    const uint8_t *rows;
    size_t rb;
    vx_dot_fn dot;
    const float *q, *aug, *bias;
    float qa;
    const uint8_t *skip; /* deleted: walked, never returned */
} hn_query;

static float score(const hn_query *hq, int e, int32_t j) {
    float s;
    hq->dot(hq->rows + (size_t)j * hq->rb, hq->rb, 1, hq->q, (size_t)e, 1, e, &s, 1);
    if (hq->qa != 0.0f) s += hq->qa * hq->aug[j];
    if (hq->bias) s += hq->bias[j];
    return s;
}

static const int32_t *links(const vx_hnsw *g, int32_t j, int level) {
    if (level == 0) return g->link0 + (size_t)j * (1 + g->m0);
    return g->up + g->up_off[j] + (size_t)(level - 1) * (1 + g->m);
}

/* The ef best nodes of `level` reachable from the entries in the result heap
 * W (s->ws/wi, w->n of them, already marked seen): best-first expansion
 * until the best unexpanded candidate is worse than the ef-th found. */
static void search_level(const vx_hnsw *g, const hn_query *hq, vx_hscratch *s, mf_topk *w, int level) {
    s->cn = 0;
    for (int i = 0; i < w->n; i++) cand_push(s, w->score[i], w->id[i]);
    while (s->cn) {
        float cs;
        int32_t c;
        cand_pop(s, &cs, &c);
        if (w->n == w->k && mf_topk_better(w->score[0], w->id[0], cs, c)) break;
        const int32_t *lk = links(g, c, level);
        /* the unseen neighbours' rows are scattered: ask for all of them before scoring any */
        int32_t todo[1 + 2 * 128];
        int nt = 0;
        for (int i = 1; i <= lk[0]; i++) {
            const int32_t j = lk[i];
            if (s->seen[j] == s->epoch) continue;
            s->seen[j] = s->epoch;
            todo[nt++] = j;
            const char *r = (const char *)hq->rows + (size_t)j * hq->rb;
            for (size_t o = 0; o < hq->rb; o += 64) __builtin_prefetch(r + o);
        }
        for (int t = 0; t < nt; t++) {
            const int32_t j = todo[t];
            const float sj = score(hq, s->e, j);
            s->evals++;
            if (w->n < w->k || mf_topk_better(sj, j, w->score[0], w->id[0])) {
                cand_push(s, sj, j);
                if (!(level == 0 && hq->skip && hq->skip[j])) mf_topk_push(w, sj, j);
            }
        }
    }
}

/* From the entry down to level `to`, greedily (ef 1); returns the node. */
static int32_t descend(const vx_hnsw *g, const hn_query *hq, vx_hscratch *s, int32_t ep, int from, int to) {
    float es = score(hq, s->e, ep);
    for (int l = from; l > to; l--) {
        for (bool moved = true; moved;) {
            moved = false;
            const int32_t *lk = links(g, ep, l);
            for (int i = 1; i <= lk[0]; i++) {
                const float sj = score(hq, s->e, lk[i]);
                s->evals++;
                if (mf_topk_better(sj, lk[i], es, ep)) es = sj, ep = lk[i], moved = true;
            }
        }
    }
    return ep;
}

/* ---- build ---- */

typedef struct hn_build {
    mf_vindex *v;
    vx_hnsw *g;
    int layer, efc;
    hn_query base;         /* rows, rb, dot, aug */
    int32_t b0, nb;        /* the batch */
    int32_t *cid;          /* [HN_MAX_BATCH][HN_MAX_LEVEL + 1][efc] candidates, best first */
    float *csc;
    int32_t *cnum;         /* [HN_MAX_BATCH][HN_MAX_LEVEL + 1] */
} hn_build;

static void decode(const hn_build *b, int32_t j, float *out) {
    mf_type_traits_ref(b->v->ix.ftype)->to_float(b->base.rows + (size_t)j * b->base.rb, out, b->v->ix.n_embd);
}

/* build similarity of nodes i (decoded in qi) and j */
static float bsim(const hn_build *b, const float *qi, int32_t i, int32_t j) {
    hn_query hq = b->base;
    hq.q = qi, hq.qa = b->g->aug[i];
    return score(&hq, b->v->ix.n_embd, j);
}

/* phase 1 for batch slot t: node i's candidates at each of its levels, from
 * the graph as it was at the batch start */
static void find_candidates(hn_build *b, vx_hscratch *s, int t) {
    vx_hnsw *g = b->g;
    const int32_t i = b->b0 + t;
    const int top = g->level[i] < g->max_level ? g->level[i] : g->max_level;
    decode(b, i, s->q);
    hn_query hq = b->base;
    hq.q = s->q, hq.qa = g->aug[i];
    const int32_t ep = descend(g, &hq, s, g->entry, g->max_level, top);
    mf_topk w;
    mf_topk_reset(&w, b->efc, s->ws, s->wi);
    new_epoch(s);
    s->seen[ep] = s->epoch;
    mf_topk_push(&w, score(&hq, s->e, ep), ep);
    for (int l = top; l >= 0; l--) {
        search_level(g, &hq, s, &w, l);
        /* sorted copy out; the heap itself is the next level's entry set */
        int32_t *ci = b->cid + ((size_t)t * (HN_MAX_LEVEL + 1) + l) * b->efc;
        float *cs = b->csc + ((size_t)t * (HN_MAX_LEVEL + 1) + l) * b->efc;
        mf_topk tmp;
        memcpy(cs, w.score, (size_t)w.n * sizeof *cs), memcpy(ci, w.id, (size_t)w.n * sizeof *ci);
        mf_topk_reset(&tmp, w.n, cs, ci);
        tmp.n = w.n;
        mf_topk_sort(&tmp);
        b->cnum[t * (HN_MAX_LEVEL + 1) + l] = w.n;
    }
}

/* The HNSW neighbour heuristic: from candidates sorted best first (by
 * similarity to the base), keep one only if it is more similar to the base
 * than to every one kept, up to mmax; writes ids and sims, returns the count.
 * Each kept row is decoded once (kdec: mmax rows) and the candidates' stored
 * rows are scored against it. */
static int select_links(const hn_build *b, float *kdec, const int32_t *cid, const float *csc, int nc, int mmax,
                        int32_t *out, float *osim) {
    const int E = b->v->ix.n_embd;
    int n = 0;
    for (int c = 0; c < nc && n < mmax; c++) {
        bool keep = true;
        for (int r = 0; r < n && keep; r++)
            if (bsim(b, kdec + (size_t)r * E, out[r], cid[c]) > csc[c]) keep = false;
        if (!keep) continue;
        out[n] = cid[c], osim[n] = csc[c];
        if (n + 1 < mmax) decode(b, cid[c], kdec + (size_t)n * E);
        n++;
    }
    return n;
}

/* sorts (sim, id) pairs best first: insertion sort, lists are short */
static void sort_pairs(int32_t *id, float *sc, int n) {
    for (int i = 1; i < n; i++) {
        const float s = sc[i];
        const int32_t d = id[i];
        int j = i - 1;
        while (j >= 0 && mf_topk_better(s, d, sc[j], id[j])) sc[j + 1] = sc[j], id[j + 1] = id[j], j--;
        sc[j + 1] = s, id[j + 1] = d;
    }
}

static void link_slots(vx_hnsw *g, int32_t j, int l, int32_t **lk, float **ls, int *mmax) {
    if (l == 0) {
        *lk = g->link0 + (size_t)j * (1 + g->m0), *ls = g->sim0 + (size_t)j * g->m0, *mmax = g->m0;
    } else {
        /* up_sim is laid out as up: slot 0 (the count's) unused */
        const int64_t o = g->up_off[j] + (int64_t)(l - 1) * (1 + g->m);
        *lk = g->up + o, *ls = g->up_sim + o + 1, *mmax = g->m;
    }
}

/* a reverse link to add: j gets i at level l */
typedef struct hn_rev {
    int32_t l, j, i;
    float sim;
} hn_rev;

static int rev_cmp(const void *pa, const void *pb) {
    const hn_rev *a = pa, *b = pb;
    if (a->l != b->l) return a->l < b->l ? -1 : 1;
    if (a->j != b->j) return a->j < b->j ? -1 : 1;
    return (a->i > b->i) - (a->i < b->i);
}

typedef struct hn_tbuf {
    int32_t *pid, *sel;
    float *psc, *ssel, *kdec;
} hn_tbuf;

typedef struct hn_batch_job {
    hn_build *b;
    vx_hscratch *scr;
    hn_tbuf *tb;
    int phase;
    hn_rev *rev;
    int32_t *grp, ngrp;
} hn_batch_job;

/* phase 2a for batch slot t: node i picks its own links at each level from
 * phase 1's candidates (if the level existed then) and its earlier batch
 * mates; only i's lists are written */
static void own_links(hn_build *b, vx_hscratch *s, hn_tbuf *tb, int t) {
    vx_hnsw *g = b->g;
    const int32_t i = b->b0 + t;
    decode(b, i, s->q);
    for (int l = g->level[i]; l >= 0; l--) {
        int nc = b->cnum[t * (HN_MAX_LEVEL + 1) + l];
        memcpy(tb->pid, b->cid + ((size_t)t * (HN_MAX_LEVEL + 1) + l) * b->efc, (size_t)nc * sizeof *tb->pid);
        memcpy(tb->psc, b->csc + ((size_t)t * (HN_MAX_LEVEL + 1) + l) * b->efc, (size_t)nc * sizeof *tb->psc);
        for (int32_t p = b->b0; p < i; p++)
            if (g->level[p] >= l) tb->pid[nc] = p, tb->psc[nc] = bsim(b, s->q, i, p), nc++;
        sort_pairs(tb->pid, tb->psc, nc);
        int32_t *lk;
        float *ls;
        int mmax;
        link_slots(g, i, l, &lk, &ls, &mmax);
        lk[0] = select_links(b, tb->kdec, tb->pid, tb->psc, nc, g->m, lk + 1, ls);
    }
}

/* phase 2b: node j gets its new reverse links (in the order of i) at one
 * level; a full list is re-selected by the heuristic */
static void add_reverse(hn_build *b, vx_hscratch *s, hn_tbuf *tb, const hn_rev *r, int n) {
    int32_t *jl;
    float *js;
    int jmax;
    link_slots(b->g, r[0].j, r[0].l, &jl, &js, &jmax);
    for (int k = 0; k < n; k++) {
        if (jl[0] < jmax) {
            js[jl[0]] = r[k].sim, jl[1 + jl[0]] = r[k].i, jl[0]++;
            continue;
        }
        int nj = jl[0];
        memcpy(tb->sel, jl + 1, (size_t)nj * sizeof *tb->sel), memcpy(tb->ssel, js, (size_t)nj * sizeof *tb->ssel);
        tb->sel[nj] = r[k].i, tb->ssel[nj] = r[k].sim, nj++;
        sort_pairs(tb->sel, tb->ssel, nj);
        jl[0] = select_links(b, tb->kdec, tb->sel, tb->ssel, nj, jmax, jl + 1, js);
    }
}

static void batch_task(void *arg, int ith, int nth) {
    hn_batch_job *j = arg;
    long t0, t1;
    if (j->phase == 2) {
        mf_split(j->ngrp, ith, nth, &t0, &t1);
        for (long k = t0; k < t1; k++)
            add_reverse(j->b, &j->scr[ith], &j->tb[ith], j->rev + j->grp[k], j->grp[k + 1] - j->grp[k]);
        return;
    }
    mf_split(j->b->nb, ith, nth, &t0, &t1);
    for (long t = t0; t < t1; t++) {
        if (j->phase == 0) find_candidates(j->b, &j->scr[ith], (int)t);
        else own_links(j->b, &j->scr[ith], &j->tb[ith], (int)t);
    }
}

static void run_phase(mf_pool *pool, hn_batch_job *job, int phase) {
    job->phase = phase;
    if (pool) mf_pool_run(pool, batch_task, job);
    else batch_task(job, 0, 1);
}

/* Builds the graph of one layer; pool NULL: on scratch scr[0] alone. Every
 * phase of a batch depends only on the graph as the phase before left it,
 * so the split over threads changes nothing. */
static mf_status build_layer(mf_vindex *v, int layer, mf_pool *pool, vx_hscratch *scr, vx_hnsw **out) {
    const double t0 = mf_now();
    const int n = v->ix.n_features, E = v->ix.n_embd, M = v->hnsw_p.m, nthr = pool ? mf_pool_size(pool) : 1;
    vx_hnsw *g = calloc(1, sizeof *g);
    hn_build b = {0};
    hn_tbuf *tb = calloc((size_t)nthr, sizeof *tb);
    hn_rev *rev = NULL;
    int32_t *grp = NULL;
    mf_status st = MF_OK;
    if (!g || !tb) goto oom;
    g->n = n, g->m = M, g->m0 = 2 * M, g->entry = 0;
    g->level = malloc((size_t)n);
    g->link0 = malloc((size_t)n * (1 + g->m0) * sizeof *g->link0);
    g->sim0 = malloc((size_t)n * g->m0 * sizeof *g->sim0);
    g->up_off = malloc((size_t)n * sizeof *g->up_off);
    g->aug = malloc((size_t)n * sizeof *g->aug);
    if (!g->level || !g->link0 || !g->sim0 || !g->up_off || !g->aug) goto oom;
    /* levels: P(level >= l) = M^-l */
    const double ml = 1.0 / log((double)M);
    int64_t up = 0;
    for (int32_t j = 0; j < n; j++) {
        const uint64_t h = splitmix(HN_SEED ^ splitmix(((uint64_t)layer << 32) | (uint32_t)j));
        const double u = ((double)(h >> 11) + 0.5) / 9007199254740992.0;
        int lv = (int)(-log(u) * ml);
        if (lv > HN_MAX_LEVEL) lv = HN_MAX_LEVEL;
        g->level[j] = (uint8_t)lv;
        g->up_off[j] = lv ? up : -1;
        up += (int64_t)lv * (1 + M);
        g->link0[(size_t)j * (1 + g->m0)] = 0;
    }
    g->n_up = up;
    g->up = malloc((size_t)(up ? up : 1) * sizeof *g->up);
    g->up_sim = malloc((size_t)(up ? up : 1) * sizeof *g->up_sim);
    if (!g->up || !g->up_sim) goto oom;
    for (int32_t j = 0; j < n; j++)
        for (int l = 0; l < g->level[j]; l++) g->up[g->up_off[j] + (int64_t)l * (1 + M)] = 0;
    g->max_level = g->level[0];
    b.v = v, b.g = g, b.layer = layer, b.efc = v->hnsw_p.ef_construction;
    b.base.rows = vx_layer_rows(v, VX_GATE, layer);
    b.base.rb = v->row_bytes;
    b.base.dot = vx_dot_best(v->ix.ftype);
    b.base.aug = g->aug;
    /* the transform's extra coordinate: a_i = sqrt(R^2 - |g_i|^2) */
    {
        double r2 = 0, *n2 = malloc((size_t)n * sizeof *n2);
        if (!n2) goto oom;
        for (int32_t j = 0; j < n; j++) {
            decode(&b, j, scr[0].q);
            double s2 = 0;
            for (int e = 0; e < E; e++) s2 += (double)scr[0].q[e] * scr[0].q[e];
            n2[j] = s2;
            if (s2 > r2) r2 = s2;
        }
        for (int32_t j = 0; j < n; j++) g->aug[j] = v->hnsw_p.mips_transform ? (float)sqrt(r2 - n2[j]) : 0.0f;
        free(n2);
    }
    const size_t slots = (size_t)HN_MAX_BATCH * (HN_MAX_LEVEL + 1) * b.efc;
    const size_t nrev = (size_t)HN_MAX_BATCH * (HN_MAX_LEVEL + 1) * M;
    b.cid = malloc(slots * sizeof *b.cid), b.csc = malloc(slots * sizeof *b.csc);
    b.cnum = malloc((size_t)HN_MAX_BATCH * (HN_MAX_LEVEL + 1) * sizeof *b.cnum);
    rev = malloc(nrev * sizeof *rev), grp = malloc((nrev + 1) * sizeof *grp);
    if (!b.cid || !b.csc || !b.cnum || !rev || !grp) goto oom;
    for (int t = 0; t < nthr; t++) {
        tb[t].pid = malloc((size_t)(b.efc + HN_MAX_BATCH) * sizeof *tb[t].pid);
        tb[t].psc = malloc((size_t)(b.efc + HN_MAX_BATCH) * sizeof *tb[t].psc);
        tb[t].sel = malloc((size_t)(g->m0 + 1) * sizeof *tb[t].sel);
        tb[t].ssel = malloc((size_t)(g->m0 + 1) * sizeof *tb[t].ssel);
        tb[t].kdec = malloc((size_t)g->m0 * E * sizeof *tb[t].kdec);
        if (!tb[t].pid || !tb[t].psc || !tb[t].sel || !tb[t].ssel || !tb[t].kdec) goto oom;
    }
    hn_batch_job job = {&b, scr, tb, 0, rev, grp, 0};
    for (int32_t done = 1; done < n;) {
        /* batch sizes depend only on the count inserted: small while the graph is small */
        int nb = done / 32;
        nb = nb < 1 ? 1 : nb > HN_MAX_BATCH ? HN_MAX_BATCH : nb;
        if (nb > n - done) nb = n - done;
        b.b0 = done, b.nb = nb;
        memset(b.cnum, 0, (size_t)HN_MAX_BATCH * (HN_MAX_LEVEL + 1) * sizeof *b.cnum);
        mf_pool *pp = nb > 1 ? pool : NULL;
        run_phase(pp, &job, 0);
        run_phase(pp, &job, 1);
        /* the reverse links, grouped by (level, target), each group in the order of i */
        size_t nr = 0;
        for (int t = 0; t < nb; t++) {
            const int32_t i = done + t;
            for (int l = 0; l <= g->level[i]; l++) {
                int32_t *lk;
                float *ls;
                int mmax;
                link_slots(g, i, l, &lk, &ls, &mmax);
                for (int r = 0; r < lk[0]; r++) rev[nr++] = (hn_rev){l, lk[1 + r], i, ls[r]};
            }
        }
        qsort(rev, nr, sizeof *rev, rev_cmp);
        job.ngrp = 0;
        for (size_t r = 0; r < nr; r++)
            if (!r || rev[r].l != rev[r - 1].l || rev[r].j != rev[r - 1].j) grp[job.ngrp++] = (int32_t)r;
        grp[job.ngrp] = (int32_t)nr;
        run_phase(job.ngrp > 1 ? pp : NULL, &job, 2);
        for (int t = 0; t < nb; t++)
            if (g->level[done + t] > g->max_level) g->max_level = g->level[done + t], g->entry = done + t;
        done += nb;
    }
    goto done;
oom:
    st = mf_err(MF_ERR_NOMEM, "out of memory for the HNSW graph of layer %d (%d features)", layer, n);
done:
    free(b.cid), free(b.csc), free(b.cnum), free(rev), free(grp);
    for (int t = 0; tb && t < nthr; t++) free(tb[t].pid), free(tb[t].psc), free(tb[t].sel), free(tb[t].ssel), free(tb[t].kdec);
    free(tb);
    if (st) {
        vx_hnsw_free(g);
        return st;
    }
    g->build_ms = (mf_now() - t0) * 1e3;
    *out = g;
    return MF_OK;
}

/* ---- public ---- */

mf_vindex_hnsw_params mf_vindex_default_hnsw_params(void) {
    mf_vindex_hnsw_params p = {0};
    p.m = 16, p.ef = 64, p.ef_construction = 128;
    return p;
}

mf_status mf_vindex_set_hnsw(mf_vindex *v, const mf_vindex_hnsw_params *p) {
    if (!p) {
        vx_hnsw_release(v);
        v->hnsw_on = false;
        return MF_OK;
    }
    if (p->m < 2 || p->m > 128) return mf_err(MF_ERR_INVALID_ARG, "HNSW M = %d is out of range (2..128)", p->m);
    if (p->ef < 1 || p->ef > (1 << 24)) return mf_err(MF_ERR_INVALID_ARG, "HNSW ef = %d is out of range (1..16777216)", p->ef);
    if (p->ef_construction < p->m || p->ef_construction > 4096)
        return mf_err(MF_ERR_INVALID_ARG, "HNSW ef_construction = %d is out of range (M = %d..4096)", p->ef_construction, p->m);
    if (v->ix.n_features < 1) return mf_err(MF_ERR_INVALID_ARG, "HNSW: the vindex has no features");
    /* graphs already built stay valid when only the search beam changes */
    if (v->hnsw_on && (p->m != v->hnsw_p.m || p->ef_construction != v->hnsw_p.ef_construction ||
                       p->mips_transform != v->hnsw_p.mips_transform))
        vx_hnsw_release(v);
    v->hnsw_p = *p;
    v->hnsw_on = true;
    return MF_OK;
}

mf_status vx_hnsw_need_graphs(mf_vindex *v) {
    if (!v->hnsw && !(v->hnsw = calloc((size_t)v->ix.n_layer, sizeof *v->hnsw)))
        return mf_err(MF_ERR_NOMEM, "out of memory");
    return need_scratch(v);
}

typedef struct hn_layers_job {
    mf_vindex *v;
    int l0, l1;
    mf_status *st;
} hn_layers_job;

static void layers_task(void *arg, int ith, int nth) {
    hn_layers_job *j = arg;
    for (int l = j->l0 + ith; l <= j->l1; l += nth)
        if (!j->v->hnsw[l]) j->st[l - j->l0] = build_layer(j->v, l, NULL, &j->v->hscr[ith], &j->v->hnsw[l]);
}

mf_status mf_vindex_hnsw_build(mf_vindex *v, int32_t l0, int32_t l1) {
    if (!v->hnsw_on) return mf_err(MF_ERR_INVALID_ARG, "HNSW is not enabled on this vindex");
    if (l0 < 0 || l1 >= v->ix.n_layer || l0 > l1)
        return mf_err(MF_ERR_INVALID_ARG, "layers %d-%d are out of range (0..%d)", l0, l1, v->ix.n_layer - 1);
    mf_status s = vx_hnsw_need_graphs(v);
    if (s) return s;
    if (l0 == l1 || v->n_threads == 1) {
        for (int l = l0; !s && l <= l1; l++)
            if (!v->hnsw[l]) s = build_layer(v, l, v->pool, v->hscr, &v->hnsw[l]);
        return s;
    }
    /* several layers: one thread each, the same graphs as built alone */
    mf_status *st = calloc((size_t)(l1 - l0 + 1), sizeof *st);
    if (!st) return mf_err(MF_ERR_NOMEM, "out of memory");
    hn_layers_job j = {v, l0, l1, st};
    mf_pool_run(v->pool, layers_task, &j);
    int bad = -1;
    for (int l = 0; bad < 0 && l <= l1 - l0; l++)
        if (st[l]) bad = l;
    free(st);
    /* a worker's message is its thread's: say it again here */
    return bad < 0 ? MF_OK : mf_err(MF_ERR_NOMEM, "out of memory for the HNSW graph of layer %d", l0 + bad);
}

mf_status mf_vindex_hnsw_get_stats(mf_vindex *v, int32_t layer, mf_vindex_hnsw_stats *out) {
    memset(out, 0, sizeof *out);
    mf_status s = mf_vindex_hnsw_build(v, layer, layer);
    if (s) return s;
    const vx_hnsw *g = v->hnsw[layer];
    out->n_levels = g->max_level + 1;
    out->build_ms = g->build_ms;
    for (int32_t j = 0; j < g->n; j++) {
        out->n_links += g->link0[(size_t)j * (1 + g->m0)];
        for (int l = 1; l <= g->level[j]; l++) out->n_links += links(g, j, l)[0];
    }
    out->loaded = g->mapped;
    /* a mapped graph has only what a search reads: no build similarities, no transform term */
    out->bytes = g->mapped ? (size_t)g->n * (1 + 8 + (1 + g->m0) * 4) + (size_t)g->n_up * 4
                           : (size_t)g->n * (1 + 4 + 8 + 4 + (1 + g->m0) * 4 + g->m0 * 4) + (size_t)g->n_up * 8;
    /* nodes level 0 does not reach from the entry (breadth first) */
    vx_hscratch *sc = &v->hscr[0];
    new_epoch(sc);
    int32_t *queue = sc->ci, head = 0, tail = 0;
    queue[tail++] = g->entry, sc->seen[g->entry] = sc->epoch;
    while (head < tail) {
        const int32_t *lk = links(g, queue[head++], 0);
        for (int i = 1; i <= lk[0]; i++)
            if (sc->seen[lk[i]] != sc->epoch) sc->seen[lk[i]] = sc->epoch, queue[tail++] = lk[i];
    }
    out->unreachable = g->n - tail;
    for (int t = 0; t < v->n_hscr; t++) out->evals += v->hscr[t].evals, out->fallbacks += v->hscr[t].fallbacks;
    return MF_OK;
}

typedef struct hn_search_job {
    mf_vindex *v;
    const vx_hnsw *g;
    int layer, k, ef, nx;
    vx_rank rank;
    const float *x, *bias;
    int32_t *feat;
    float *score;
} hn_search_job;

static void search_task(void *arg, int ith, int nth) {
    hn_search_job *j = arg;
    mf_vindex *v = j->v;
    const vx_hnsw *g = j->g;
    vx_hscratch *s = &v->hscr[ith];
    const int E = v->ix.n_embd, F = v->ix.n_features;
    hn_query hq = {0};
    hq.rows = vx_layer_rows(v, VX_GATE, j->layer);
    hq.rb = v->row_bytes;
    hq.dot = vx_dot_best(v->ix.ftype);
    hq.bias = j->bias;
    hq.skip = v->deleted ? v->deleted + (size_t)j->layer * F : NULL;
    long q0, q1;
    mf_split(j->nx, ith, nth, &q0, &q1);
    for (long q = q0; q < q1; q++) {
        hq.q = j->x + (size_t)q * E;
        const int32_t ep = descend(g, &hq, s, g->entry, g->max_level, 0);
        mf_topk w;
        mf_topk_reset(&w, j->ef, s->ws, s->wi);
        new_epoch(s);
        s->seen[ep] = s->epoch;
        const float es = score(&hq, E, ep);
        /* the entry seeds the search even if deleted; it is then dropped from the answer */
        mf_topk_push(&w, es, ep);
        search_level(g, &hq, s, &w, 0);
        if (j->ef >= F)
            for (int32_t f = 0; f < F; f++)
                if (s->seen[f] != s->epoch) {
                    s->seen[f] = s->epoch;
                    mf_topk_push(&w, score(&hq, E, f), f);
                    s->evals++;
                }
        mf_topk out;
        mf_topk_reset(&out, j->k, j->score + (size_t)q * j->k, j->feat + (size_t)q * j->k);
        for (int i = 0; i < w.n; i++) {
            if (hq.skip && hq.skip[w.id[i]]) continue;
            mf_topk_push(&out, j->rank == VX_RANK_DOT ? w.score[i] : vx_rank_key(j->rank, w.score[i]), w.id[i]);
        }
        /* |act| of a negative score is at most neg (|silu| 0.2785 at -1.28,
         * |gelu| 0.1701 at -0.75) and the graph only finds large scores:
         * when the k-th key is below that, a negative score could belong,
         * so this row is scanned in full instead */
        const float neg = j->rank == VX_RANK_SILU_ABS ? 0.2785f : 0.1701f;
        if (j->rank != VX_RANK_DOT && (out.n < j->k || out.score[0] < neg)) {
            s->fallbacks++;
            mf_topk_reset(&out, j->k, j->score + (size_t)q * j->k, j->feat + (size_t)q * j->k);
            for (int32_t f = 0; f < F; f++)
                if (!(hq.skip && hq.skip[f])) mf_topk_push(&out, vx_rank_key(j->rank, score(&hq, E, f)), f);
            s->evals += (uint64_t)F;
        }
        mf_topk_sort(&out);
        for (int i = out.n; i < j->k; i++) out.score[i] = -INFINITY, out.id[i] = -1;
    }
}

mf_status vx_hnsw_knn(mf_vindex *v, int layer, const float *x, int n_rows, int k, vx_rank rank, const float *bias,
                      int32_t *feat, float *score) {
    mf_status s = mf_vindex_hnsw_build(v, layer, layer);
    if (s) return s;
    hn_search_job j = {0};
    j.v = v, j.g = v->hnsw[layer], j.layer = layer, j.k = k, j.rank = rank, j.x = x, j.bias = bias;
    j.feat = feat, j.score = score, j.nx = n_rows;
    const int F = v->ix.n_features;
    j.ef = v->hnsw_p.ef < k ? k : v->hnsw_p.ef;
    if (j.ef > F) j.ef = F;
    /* the deleted entry seed can take a slot: one more keeps ef live ones */
    if (v->n_deleted && j.ef < F) j.ef++;
    if (n_rows > 1) mf_pool_run(v->pool, search_task, &j);
    else if (n_rows == 1) search_task(&j, 0, 1);
    return MF_OK;
}
