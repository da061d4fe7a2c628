/* attention.c - KV cache storage and causal multi-head attention on the CPU.
 *
 * Cache layout: per layer, pages of page_size positions (the engine decides
 * which sequence holds which page, engine/kv.c). Inside a page the kv heads
 * are grouped into slabs (one head, or for q8_0 the fewest heads that fill
 * whole blocks of 32), and each slab holds its rows for the page's positions
 * contiguously: [page][slab][slot][slab width] in the cache type (f32, f16 or
 * q8_0). A head's keys within a page are then one sequential stream. With every head of a position in one row, a head's slice was read
 * at a stride of the whole row: 45-50 ns per cold row against 10-15 ns for a
 * contiguous one (f16, 64-wide heads, two heads per row), which made decode
 * attention at depth several times slower than its arithmetic.
 *
 * Attention is flash-style: one pass over the keys with an online softmax
 * (running max and sum, rescaling the accumulator when the max grows), so K
 * and V are each read once and no score buffer scales with the context. A task
 * is one kv head and a block of query tokens, covering every query head of the
 * GQA group: each K/V row loaded serves group x block queries. Tasks are fixed
 * by shape, not by thread count, so results are identical for any -t. */
#include "cpu/cpu.h"
#include "cpu/kern/attn/attn_kernels.h"
#include "core/alloc.h"
#include "core/error.h"
#include "quant/blocks.h"
#include "quant/fp16.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* query tokens per task: K/V reuse across the block vs parallelism */
#define Q_BLOCK 8
/* most queries a task holds: Q_BLOCK tokens x the largest GQA group handled in one go */
#define MAX_Q 256
/* keys per chunk: K/V rows converted once per chunk, scores exponentiated as
 * a vector. Chunks start at multiples of KC of the key position, so a query's
 * chunks (and its order of reduction) depend only on its own position, never
 * on the other queries of its task: batch invariance. Pages hold a multiple
 * of KC positions, so a chunk never straddles two pages. */
#define KC 64

static mf_type kv_mf_type(mf_kv_type t) {
    return t == MF_KV_F16 ? MF_TYPE_F16 : t == MF_KV_Q8_0 ? MF_TYPE_Q8_0 : MF_TYPE_F32;
}

/* Elements per slab: the fewest whole heads that are also whole cache-type
 * blocks (q8_0: 32), or the whole row when no such split divides it. */
static uint32_t slab_width(mf_kv_type type, uint32_t head_dim, uint32_t width) {
    uint32_t s = head_dim;
    if (!s) return width;
    if (type == MF_KV_Q8_0)
        while (s % QK8_0) s += head_dim;
    return width % s == 0 ? s : width;
}

mf_status mf_cpu_kv_init(mf_backend *be, const mf_kv_desc *d) {
    mf_cpu *cpu = (mf_cpu *)be;
    mf_type t = kv_mf_type(d->type);
    if (d->type == MF_KV_Q8_0 && (d->k_width % QK8_0 || d->v_width % QK8_0))
        return mf_err(MF_ERR_UNSUPPORTED, "q8_0 KV cache needs kv rows that are multiples of 32 (this model's are %u and %u); use f16",
                      d->k_width, d->v_width);
    if (!d->page_size || d->page_size % KC)
        return mf_err(MF_ERR_INVALID_ARG, "KV page of %u positions: the CPU backend needs a multiple of %d", d->page_size, KC);
    cpu->kv = *d;
    cpu->k_slab = slab_width(d->type, d->head_dim_k, d->k_width);
    cpu->v_slab = slab_width(d->type, d->head_dim_v, d->v_width);
    cpu->k_slab_bytes = mf_row_size(t, cpu->k_slab);
    cpu->v_slab_bytes = mf_row_size(t, cpu->v_slab);
    cpu->k_page_bytes = (size_t)d->page_size * mf_row_size(t, d->k_width);
    cpu->v_page_bytes = (size_t)d->page_size * mf_row_size(t, d->v_width);
    cpu->k = calloc(d->n_layer, sizeof *cpu->k);
    cpu->v = calloc(d->n_layer, sizeof *cpu->v);
    if (!cpu->k || !cpu->v) return mf_err(MF_ERR_NOMEM, "out of memory for the KV cache");
    for (uint32_t l = 0; l < d->n_layer; l++) {
        cpu->k[l] = mf_alloc_aligned(mf_mul_size(d->n_pages, cpu->k_page_bytes));
        cpu->v[l] = mf_alloc_aligned(mf_mul_size(d->n_pages, cpu->v_page_bytes));
        if (!cpu->k[l] || !cpu->v[l])
            return mf_err(MF_ERR_NOMEM, "out of memory for the KV cache (%u pages of %u positions x %u layers)",
                          d->n_pages, d->page_size, d->n_layer);
    }
    cpu->attn = cpu->ref ? mf_attn_kernels_scalar(d->type) : mf_attn_kernels_get(d->type);
    cpu->att_scratch_per_thread = mf_cpu_attn_scratch_floats((int)d->head_dim_k, (int)d->head_dim_v);
    cpu->att_scratch = mf_alloc_aligned(mf_mul_size(mf_mul_size(cpu->att_scratch_per_thread, (size_t)cpu->n_threads), sizeof(float)));
    if (!cpu->att_scratch) return mf_err(MF_ERR_NOMEM, "out of memory for attention scratch");
    return MF_OK;
}

/* Slab j of a cell (page * page_size + slot) in one layer's K or V pages. */
static inline uint8_t *slab_at(uint8_t *base, size_t page_bytes, uint32_t page_size, size_t slab_bytes, uint32_t j,
                               uint32_t cell) {
    const uint32_t page = cell / page_size, slot = cell % page_size;
    return base + (size_t)page * page_bytes + ((size_t)j * page_size + slot) * slab_bytes;
}

void mf_cpu_kv_store(mf_backend *be, int layer, const float *k, const float *v) {
    mf_cpu *cpu = (mf_cpu *)be;
    const mf_kv_desc *d = &cpu->kv;
    const mf_step *st = cpu->step;
    const mf_type_traits *tr = mf_cpu_traits(cpu, kv_mf_type(d->type));
    for (int i = 0; i < st->n_tok; i++) {
        const uint32_t cell = (uint32_t)st->cell[i];
        for (uint32_t j = 0; j < d->k_width / cpu->k_slab; j++)
            tr->from_float(k + (size_t)i * d->k_width + (size_t)j * cpu->k_slab,
                           slab_at(cpu->k[layer], cpu->k_page_bytes, d->page_size, cpu->k_slab_bytes, j, cell), cpu->k_slab);
        for (uint32_t j = 0; j < d->v_width / cpu->v_slab; j++)
            tr->from_float(v + (size_t)i * d->v_width + (size_t)j * cpu->v_slab,
                           slab_at(cpu->v[layer], cpu->v_page_bytes, d->page_size, cpu->v_slab_bytes, j, cell), cpu->v_slab);
    }
}

/* kv_read / kv_write move whole cache rows (every slab of a cell, in order:
 * the row the type would store for the full width, since slabs are whole
 * blocks), K rows of the cells first, then V rows; the caller
 * (engine/session.c) checked the cells. */
static size_t move_rows(mf_cpu *cpu, int layer, const int32_t *cells, uint32_t n, uint8_t *buf, bool to_cache) {
    const mf_kv_desc *d = &cpu->kv;
    const uint32_t width[2] = {d->k_width, d->v_width}, slab[2] = {cpu->k_slab, cpu->v_slab};
    const size_t sb[2] = {cpu->k_slab_bytes, cpu->v_slab_bytes}, pb[2] = {cpu->k_page_bytes, cpu->v_page_bytes};
    if (!buf) return (size_t)n * (width[0] / slab[0] * sb[0] + width[1] / slab[1] * sb[1]);
    uint8_t *const base[2] = {cpu->k[layer], cpu->v[layer]};
    size_t off = 0;
    for (int kv = 0; kv < 2; kv++)
        for (uint32_t i = 0; i < n; i++)
            for (uint32_t j = 0; j < width[kv] / slab[kv]; j++, off += sb[kv]) {
                uint8_t *c = slab_at(base[kv], pb[kv], d->page_size, sb[kv], j, (uint32_t)cells[i]);
                if (to_cache) memcpy(c, buf + off, sb[kv]);
                else memcpy(buf + off, c, sb[kv]);
            }
    return off;
}

size_t mf_cpu_kv_read(mf_backend *be, int layer, const int32_t *cells, uint32_t n, void *dst) {
    return move_rows((mf_cpu *)be, layer, cells, n, dst, false);
}

void mf_cpu_kv_write(mf_backend *be, int layer, const int32_t *cells, uint32_t n, const void *src) {
    move_rows((mf_cpu *)be, layer, cells, n, (uint8_t *)src, true);
}

void mf_cpu_kv_copy_page(mf_backend *be, int32_t src, int32_t dst) {
    mf_cpu *cpu = (mf_cpu *)be;
    for (uint32_t l = 0; l < cpu->kv.n_layer; l++) {
        memcpy(cpu->k[l] + (size_t)dst * cpu->k_page_bytes, cpu->k[l] + (size_t)src * cpu->k_page_bytes, cpu->k_page_bytes);
        memcpy(cpu->v[l] + (size_t)dst * cpu->v_page_bytes, cpu->v[l] + (size_t)src * cpu->v_page_bytes, cpu->v_page_bytes);
    }
}

typedef struct attn_task {
    mf_cpu *cpu;
    int layer;
    const float *q;
    const mf_attn_params *p;
    float *out;
    int n_gchunk;    /* chunks a GQA group is split into (when group x Q_BLOCK > MAX_Q) */
    int gchunk;      /* query heads per chunk */
    long n_tasks;
    const int32_t *task_seq;   /* [n_seq + 1]: first task of each sequence of the step */
} attn_task;

/* The largest of x[0..n) (NaNs skipped; -inf if none), in 8 independent
 * lanes: a max is exact in any order, and a decode at depth spends a good
 * part of its attention here when it is one dependent chain. */
static float row_max(const float *x, int n) {
    float mx[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++) mx[l] = x[i + l] > mx[l] ? x[i + l] : mx[l];
    for (; i < n; i++) mx[0] = x[i] > mx[0] ? x[i] : mx[0];
    float m = -INFINITY;
    for (int l = 0; l < 8; l++) m = mx[l] > m ? mx[l] : m;
    return m;
}

/* The first row of a head's K (or V) slab at key position s of sequence sq:
 * the position's page from the block table, then its slot in the page.
 * base: the head's slab in page 0 (rows `row` bytes apart). */
static inline const uint8_t *chunk_rows(const mf_cpu *cpu, const mf_step_seq *sq, const uint8_t *base,
                                        size_t page_bytes, size_t row, uint32_t s) {
    const uint32_t P = cpu->kv.page_size;
    return base + (size_t)sq->pages[s / P] * page_bytes + (size_t)(s % P) * row;
}

/* One task: sequence sq of the step, kv head hk, query heads [h0, h0+nh) of
 * its group, the sequence's query rows [t0, t1).
 * Keys are taken in chunks of KC: the chunk's K rows are converted once, every
 * query scores them (masked keys get -inf), each query's online softmax takes
 * the chunk in one step (new max, rescale, vectorised exp), then the chunk's V
 * rows are converted once and accumulated. */
static void attn_tile(attn_task *t, const mf_step_seq *sq, int hk, int h0, int nh, int t0, int t1, float *scratch) {
    const mf_attn_params *p = t->p;
    const mf_attn_kernels *kk = t->cpu->attn;
    const int dk = p->head_dim_k, dv = p->head_dim_v;
    const mf_cpu *cpu = t->cpu;
    const size_t krow = cpu->k_slab_bytes, vrow = cpu->v_slab_bytes;
    /* head hk's slab within a page (its keys at consecutive slots are krow
     * bytes apart), and where the head starts inside a slab row, in elements */
    const size_t kel = (size_t)hk * dk, vel = (size_t)hk * dv;
    const uint32_t P = cpu->kv.page_size;
    const uint8_t *K0 = cpu->k[t->layer] + kel / cpu->k_slab * P * krow;
    const uint8_t *V0 = cpu->v[t->layer] + vel / cpu->v_slab * P * vrow;
    const size_t koff = kel % cpu->k_slab, voff = vel % cpu->v_slab;
    const int nq = nh * (t1 - t0);

    float m[MAX_Q], l[MAX_Q];
    uint32_t qpos[MAX_Q], first[MAX_Q];
    const float *qv[MAX_Q];
    float *acc = scratch;                       /* [nq][dv] */
    float *sc = acc + (size_t)nq * dv;          /* [nq][KC] scores, then weights */
    float *kbuf = sc + (size_t)nq * KC;         /* [KC][dk] converted K rows */
    float *vbuf = kbuf + (size_t)KC * dk;       /* [KC][dv] converted V rows */
    const float *kr[KC], *vr[KC];
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int ti = t0, j = 0; ti < t1; ti++)
        for (int h = h0; h < h0 + nh; h++, j++) {
            qpos[j] = (uint32_t)(sq->pos0 + ti);
            first[j] = p->window > 0 && qpos[j] >= (uint32_t)p->window ? qpos[j] - (uint32_t)p->window + 1 : 0;
            qv[j] = t->q + ((size_t)(sq->row0 + ti) * p->n_head + h) * dk;
            m[j] = -INFINITY;
            l[j] = 0;
            memset(acc + (size_t)j * dv, 0, sizeof(float) * (size_t)dv);
            if (first[j] < lo) lo = first[j];
            if (qpos[j] > hi) hi = qpos[j];
        }
    for (uint32_t s0 = lo - lo % KC; s0 <= hi; s0 += KC) {
        const int nk = (int)(hi - s0 + 1 < KC ? hi - s0 + 1 : KC);
        const uint8_t *K = chunk_rows(cpu, sq, K0, cpu->k_page_bytes, krow, s0);
        const uint8_t *V = chunk_rows(cpu, sq, V0, cpu->v_page_bytes, vrow, s0);
        if (s0 + KC <= hi) {
            /* the next chunk's K and V rows on their way while this one computes */
            const uint32_t n0 = s0 + KC;
            const size_t nn = hi - n0 + 1 < KC ? hi - n0 + 1 : KC;
            const uint8_t *NK = chunk_rows(cpu, sq, K0, cpu->k_page_bytes, krow, n0);
            const uint8_t *NV = chunk_rows(cpu, sq, V0, cpu->v_page_bytes, vrow, n0);
            for (size_t b = 0; b < nn * krow; b += 64) __builtin_prefetch(NK + b, 0, 3);
            for (size_t b = 0; b < nn * vrow; b += 64) __builtin_prefetch(NV + b, 0, 3);
        }
        for (int i = 0; i < nk; i++) kr[i] = kk->load_k(K + (size_t)i * krow, koff, dk, kbuf + (size_t)i * dk);
        kk->scores(qv, nq, kr, nk, dk, p->scale, sc, KC);
        for (int j = 0; j < nq; j++) {
            float *row = sc + (size_t)j * KC;
            /* masked keys to -inf and the soft-cap, where there is any */
            if (s0 < first[j] || s0 + (uint32_t)nk - 1 > qpos[j] || p->softcap > 0)
                for (int i = 0; i < nk; i++) {
                    const uint32_t s = s0 + (uint32_t)i;
                    if (s < first[j] || s > qpos[j]) row[i] = -INFINITY;
                    else if (p->softcap > 0) row[i] = p->softcap * tanhf(row[i] / p->softcap);
                }
            const float cmax = row_max(row, nk);
            if (cmax == -INFINITY) { /* no visible key in this chunk: weights 0 */
                memset(row, 0, sizeof(float) * (size_t)nk);
                continue;
            }
            if (cmax > m[j]) {
                /* new running max: rescale what was accumulated so far */
                if (m[j] != -INFINITY) {
                    const float c = mf_attn_expf(m[j] - cmax);
                    kk->scale(acc + (size_t)j * dv, c, dv);
                    l[j] *= c;
                }
                m[j] = cmax;
            }
            l[j] += kk->exp_sum(row, nk, m[j]);
        }
        for (int i = 0; i < nk; i++) vr[i] = kk->load_v(V + (size_t)i * vrow, voff, dv, vbuf + (size_t)i * dv);
        kk->accum(sc, KC, nq, vr, nk, dv, acc);
    }
    for (int ti = t0, j = 0; ti < t1; ti++)
        for (int h = h0; h < h0 + nh; h++, j++) {
            float *o = t->out + ((size_t)(sq->row0 + ti) * p->n_head + h) * dv;
            const float inv = 1.0f / l[j];
            const float *a = acc + (size_t)j * dv;
            for (int i = 0; i < dv; i++) o[i] = a[i] * inv;
        }
}

static void attn_fn(void *arg, int ith, int nth) {
    attn_task *t = arg;
    const mf_attn_params *p = t->p;
    const mf_step *st = t->cpu->step;
    const int group = p->n_head / p->n_head_kv;
    float *scratch = t->cpu->att_scratch + (size_t)ith * t->cpu->att_scratch_per_thread;
    long j0, j1;
    mf_split(t->n_tasks, ith, nth, &j0, &j1);
    int si = 0;
    for (long j = j0; j < j1; j++) {
        while (t->task_seq[si + 1] <= j) si++;
        const mf_step_seq *sq = &st->seqs[si];
        const long jl = j - t->task_seq[si];
        const int n_tblk = (sq->n_rows + Q_BLOCK - 1) / Q_BLOCK;
        const int tb = (int)(jl % n_tblk);
        const int gc = (int)((jl / n_tblk) % t->n_gchunk);
        const int hk = (int)(jl / ((long)n_tblk * t->n_gchunk));
        const int h0 = hk * group + gc * t->gchunk;
        const int nh = group - gc * t->gchunk < t->gchunk ? group - gc * t->gchunk : t->gchunk;
        const int t0 = tb * Q_BLOCK, t1 = t0 + Q_BLOCK < sq->n_rows ? t0 + Q_BLOCK : sq->n_rows;
        attn_tile(t, sq, hk, h0, nh, t0, t1, scratch);
    }
}

void mf_cpu_attention(mf_backend *be, int layer, const float *q, const mf_attn_params *p, float *out) {
    mf_cpu *cpu = (mf_cpu *)be;
    const mf_step *st = cpu->step;
    const int group = p->n_head / p->n_head_kv;
    attn_task t = {cpu, layer, q, p, out, 0, 0, 0, cpu->task_seq};
    t.gchunk = group < MAX_Q / Q_BLOCK ? group : MAX_Q / Q_BLOCK;
    t.n_gchunk = (group + t.gchunk - 1) / t.gchunk;
    /* tasks: per sequence, kv heads x group chunks x query blocks */
    cpu->task_seq[0] = 0;
    for (int i = 0; i < st->n_seq; i++) {
        const long n_tblk = (st->seqs[i].n_rows + Q_BLOCK - 1) / Q_BLOCK;
        cpu->task_seq[i + 1] = cpu->task_seq[i] + (int32_t)(p->n_head_kv * t.n_gchunk * n_tblk);
    }
    t.n_tasks = cpu->task_seq[st->n_seq];
    mf_pool_run(cpu->pool, attn_fn, &t);
}

size_t mf_cpu_attn_scratch_floats(int head_dim_k, int head_dim_v) {
    /* accumulators and scores for MAX_Q queries + KC converted K and V rows */
    return (size_t)MAX_Q * ((size_t)head_dim_v + KC) + (size_t)KC * ((size_t)head_dim_k + (size_t)head_dim_v) + 64;
}
