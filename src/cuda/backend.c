/* backend.c - the CUDA backend's op table: each op queues its kernel on the
 * context's stream; a failure is kept and reported by end_step
 * (engine/backend.h). Activation buffers, the KV cache and the step buffers
 * are allocated when the context is made; a decode allocates nothing.
 *
 * One-row steps (decode) run as a CUDA graph: the first runs eagerly and
 * measures its download, the second is captured and launched, and later ones
 * replay it, after begin_step has copied the step's token, position, cell and
 * page-table arrays into the device buffers the kernels read. A graph runs
 * up to the step's first download (the logits), which launches it; anything
 * after that runs eagerly. The ops of a replayed step only hash their
 * arguments; before launching, the hash must be the captured one (same ops,
 * same buffers, same sizes), or the step fails with a message.
 * MINFER_CUDA_GRAPH=0 runs every step eagerly. */
#include "cuda/cuda.h"
#include "core/env.h"
#include "core/error.h"
#include "core/log.h"
#include "quant/types.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CU(c) ((mf_cuda *)(c))

static void fail(mf_cuda *c, const char *fmt, ...) {
    if (c->err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err_msg, sizeof c->err_msg, fmt, ap);
    va_end(ap);
    c->err = MF_ERR_UNSUPPORTED;
}

/* after each launch: a bad configuration shows up here, a fault at the sync */
static void check(mf_cuda *c, const char *op) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) fail(c, "cuda %s: %s", op, cudaGetErrorString(e));
}

/* FNV-1a over an op's identity and arguments (the replay check) */
static void mix(mf_cuda *c, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) c->hash = (c->hash ^ b[i]) * 0x100000001b3ull;
}
#define MIX(c, v) mix((c), &(v), sizeof(v))

static void flush(mf_cuda *c);
static void flush_rope(mf_cuda *c);

/* Hash the op; true when its kernels are to be queued (not replaying). An
 * op that cannot fuse with a held-back one (own = false) queues that first. */
/* own: the op deals with the held-back ops itself (it may fuse with them);
 * held RoPEs are older than a held op, so an op that may take the held op
 * without them first issues them (all but norm, rope and kv_store, which
 * keep their order themselves) */
static bool op_begin_x(mf_cuda *c, int id, bool own) {
    MIX(c, id);
    c->q8_hold_now = c->q8_hold;
    c->q8_hold = false;
    if (c->mode == MFC_REPLAY || c->err) return false;
    if (!own) flush(c);
    else if (id != 4 && id != 11 && id != 12) flush_rope(c);
    return true;
}
#define op_begin(c, id) op_begin_x((c), (id), false)

static void cu_destroy(mf_backend *be) {
    mf_cuda *c = CU(be);
    if (!c) return;
    if (c->stream) cudaStreamSynchronize(c->stream);
    for (int i = 0; i < c->n_bufs; i++) cudaFree(c->bufs[i]);
    free(c->bufs);
    if (c->k)
        for (uint32_t l = 0; l < c->kv.n_layer; l++) cudaFree(c->k[l]);
    if (c->v)
        for (uint32_t l = 0; l < c->kv.n_layer; l++) cudaFree(c->v[l]);
    free(c->k);
    free(c->v);
    if (c->exec) cudaGraphExecDestroy(c->exec);
    if (c->h_step) cudaFreeHost(c->h_step);
    if (c->d_step) cudaFree(c->d_step);
    if (c->h_dl) cudaFreeHost(c->h_dl);
    if (c->h_ul) cudaFreeHost(c->h_ul);
    cudaFree(c->att_part);
    for (int i = 0; i < 2; i++) {
        cudaFree(c->q8b[i].q);
        cudaFree(c->q8b[i].d);
        cudaFree(c->q8b[i].s);
    }
    cudaFree(c->xh.h);
    cudaFree(c->xh.s);
    cudaFree(c->xh.part);
    for (int i = 0; i < c->n_ev; i++) cudaEventDestroy(c->ev[i]);
    free(c->ev);
    for (int i = 0; i < MFC_HEAD_PARTS_MAX; i++)
        if (c->head_ev[i]) cudaEventDestroy(c->head_ev[i]);
    if (c->dl_stream) cudaStreamDestroy(c->dl_stream);
    if (c->stream) cudaStreamDestroy(c->stream);
    if (c->verbose && (c->n_captures || c->n_replays))
        mf_log(MF_LOG_INFO, "minfer: cuda decode graphs: %d captured, %d replays\n", c->n_captures, c->n_replays);
    free(c);
}

static float *cu_alloc(mf_backend *be, size_t n) {
    mf_cuda *c = CU(be);
    void **nb = realloc(c->bufs, (size_t)(c->n_bufs + 1) * sizeof *nb);
    if (!nb) return NULL;
    c->bufs = nb;
    void *p = NULL;
    if (cudaMalloc(&p, (n ? n : 1) * sizeof(float) + 16) != cudaSuccess) return NULL;
    cudaMemset(p, 0, (n ? n : 1) * sizeof(float));
    c->bufs[c->n_bufs++] = p;
    return p;
}

static mf_status cu_kv_init(mf_backend *be, const mf_kv_desc *d) {
    mf_cuda *c = CU(be);
    if (d->type == MF_KV_Q8_0 && (d->k_width % 32 || d->v_width % 32))
        return mf_err(MF_ERR_UNSUPPORTED, "q8_0 KV cache needs kv rows that are multiples of 32 (this model's are %u and "
                                          "%u); use f16", d->k_width, d->v_width);
    if (d->head_dim_k > 256 || d->head_dim_v > 256)
        return mf_err(MF_ERR_UNSUPPORTED, "head dimension %u/%u: the cuda attention kernel takes at most 256",
                      d->head_dim_k, d->head_dim_v);
    c->kv = *d;
    const size_t cells = (size_t)d->n_pages * d->page_size;
    if (d->type == MF_KV_Q8_0) {
        c->k_row_bytes = (size_t)d->k_width / 32 * MFC_Q8_BLOCK;
        c->v_row_bytes = (size_t)d->v_width / 32 * MFC_Q8_BLOCK;
    } else {
        const size_t es = d->type == MF_KV_F16 ? 2 : 4;
        c->k_row_bytes = es * d->k_width;
        c->v_row_bytes = es * d->v_width;
    }
    c->k = calloc(d->n_layer, sizeof *c->k);
    c->v = calloc(d->n_layer, sizeof *c->v);
    if (!c->k || !c->v) return mf_err(MF_ERR_NOMEM, "out of memory");
    for (uint32_t l = 0; l < d->n_layer; l++) {
        if (cudaMalloc(&c->k[l], cells * c->k_row_bytes) != cudaSuccess ||
            cudaMalloc(&c->v[l], cells * c->v_row_bytes) != cudaSuccess) {
            cudaGetLastError();
            return mf_err(MF_ERR_NOMEM, "out of device memory for the KV cache (%zu cells x %u layers)", cells, d->n_layer);
        }
        cudaMemset(c->k[l], 0, cells * c->k_row_bytes);
        cudaMemset(c->v[l], 0, cells * c->v_row_bytes);
    }
    /* flash-decoding: a decode row's keys in shares (mfc_att_share: 32
     * keys while that makes at most 64 of them; short rows at one row want
     * many blocks), merged by a second kernel; decode steps always go
     * through the share buffers (one share is a share kernel plus a
     * merge). The share size follows the row's own key count, so a row's
     * result never depends on the rest of the step. */
    c->att_split = (int)((c->max_ctx + 31) / 32); /* the most shares a row of up to max_ctx keys has */
    if (c->att_split > MFC_ATT_MAX_SHARES) c->att_split = MFC_ATT_MAX_SHARES;
    if (c->att_split < 1) c->att_split = 1;
    {
        const size_t heads = (size_t)c->max_width / (d->head_dim_v ? d->head_dim_v : 1) + 1;
        const size_t split_rows = c->max_rows < ATT_SPLIT_ROWS ? (size_t)c->max_rows : ATT_SPLIT_ROWS;
        const size_t nf = split_rows * heads * (size_t)c->att_split * (d->head_dim_v + 2);
        if (cudaMalloc((void **)&c->att_part, nf * sizeof(float)) != cudaSuccess) {
            cudaGetLastError();
            return mf_err(MF_ERR_NOMEM, "out of device memory for the attention split buffers");
        }
        c->att_heads = (int)heads;
    }
    /* step arrays: 5 per row, 1 per sequence, and the block tables (each at
     * most max_ctx / page_size + 1 pages) */
    const size_t R = (size_t)c->max_rows;
    c->step_cap = 6 * R + R * (c->max_ctx / d->page_size + 2);
    if (cudaMallocHost((void **)&c->h_step, c->step_cap * 4) != cudaSuccess ||
        cudaMalloc((void **)&c->d_step, c->step_cap * 4) != cudaSuccess) {
        cudaGetLastError();
        return mf_err(MF_ERR_NOMEM, "out of memory for the cuda step buffers");
    }
    if (c->verbose)
        mf_log(MF_LOG_INFO, "minfer: cuda KV cache %s, %.1f MiB on the device\n",
               d->type == MF_KV_F16 ? "f16" : d->type == MF_KV_Q8_0 ? "q8_0" : "f32",
               (double)cells * (double)(c->k_row_bytes + c->v_row_bytes) * d->n_layer / (1 << 20));
    return MF_OK;
}

/* ---- steps ---- */

static mf_status cu_begin_step(mf_backend *be, const mf_step *st) {
    mf_cuda *c = CU(be);
    c->step = st;
    c->err = MF_OK;
    /* nothing held survives a step (a failed one skips the final flush) */
    c->pend.kind = PEND_NONE;
    c->rp.n = 0;
    c->hash = 0xcbf29ce484222325ull;
    c->n_dl = 0;
    c->n_mark = 0;
    if (st->n_tok > c->max_rows) return mf_err(MF_ERR_INVALID_ARG, "step of %d rows: at most %d", st->n_tok, c->max_rows);
    /* pack: tok, pos, cell, rowseq, out_rows, seq_pg, pages */
    const size_t R = (size_t)st->n_tok;
    int32_t *h = c->h_step;
    size_t np = 0;
    for (int i = 0; i < st->n_seq; i++) np += (size_t)(st->seqs[i].pos0 + st->seqs[i].n_rows - 1) / c->kv.page_size + 1;
    const size_t need = 5 * R + (size_t)st->n_seq + np;
    if (need > c->step_cap) return mf_err(MF_ERR_INVALID_ARG, "step tables of %zu entries: at most %zu", need, c->step_cap);
    int32_t *tok = h, *pos = h + R, *cell = h + 2 * R, *rs = h + 3 * R, *outr = h + 4 * R, *spg = h + 5 * R;
    int32_t *pg = spg + st->n_seq;
    for (size_t i = 0; i < R; i++) {
        tok[i] = st->tokens ? st->tokens[i] : 0;
        pos[i] = st->pos[i];
        cell[i] = st->cell[i];
    }
    for (int i = 0; i < st->n_out; i++) outr[i] = st->out_rows[i];
    size_t off = 0;
    for (int i = 0; i < st->n_seq; i++) {
        const mf_step_seq *q = &st->seqs[i];
        const size_t n = (size_t)(q->pos0 + q->n_rows - 1) / c->kv.page_size + 1;
        spg[i] = (int32_t)off;
        memcpy(pg + off, q->pages, n * 4);
        off += n;
        for (int r = q->row0; r < q->row0 + q->n_rows; r++) rs[r] = i;
    }
    const int32_t *d = c->d_step;
    c->sd = (mfc_step_dev){d, d + R, d + 2 * R, d + 3 * R, d + 4 * R, d + 5 * R, d + 5 * R + st->n_seq};
    if (cudaMemcpyAsync(c->d_step, c->h_step, need * 4, cudaMemcpyHostToDevice, c->stream) != cudaSuccess)
        return mf_err(MF_ERR_IO, "cuda: step upload: %s", cudaGetErrorString(cudaGetLastError()));

    c->mode = MFC_EAGER;
    /* a one-row step's ops depend only on whether it has an output row */
    if (c->graphs && st->n_tok == 1 && st->n_out == c->graph_nout) {
        if (c->exec) {
            c->mode = MFC_REPLAY;
        } else if (c->dl_cap) {
            /* the eager one-row step before sized the download staging */
            if (cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeRelaxed) != cudaSuccess)
                return mf_err(MF_ERR_IO, "cuda: cannot capture the decode step: %s", cudaGetErrorString(cudaGetLastError()));
            c->mode = MFC_CAPTURE;
        }
    }
    return MF_OK;
}

/* End a capture (instantiating its graph) or check a replay against the
 * captured hash, then launch the graph; the step continues eagerly. */
static void graph_run(mf_cuda *c) {
    const mfc_mode mode = c->mode;
    c->mode = MFC_EAGER;
    if (mode == MFC_CAPTURE) {
        cudaGraph_t g = NULL;
        cudaError_t e = cudaStreamEndCapture(c->stream, &g);
        if (e == cudaSuccess && !c->err) e = cudaGraphInstantiate(&c->exec, g, 0);
        if (g) cudaGraphDestroy(g);
        if (e != cudaSuccess && !c->err) fail(c, "cuda: decode graph: %s", cudaGetErrorString(e));
        if (c->err) {
            if (c->exec) cudaGraphExecDestroy(c->exec);
            c->exec = NULL;
            return;
        }
        c->exec_hash = c->hash;
        c->n_captures++;
    } else if (mode == MFC_REPLAY) {
        if (c->err) return;
        if (c->hash != c->exec_hash) {
            fail(c, "cuda: this decode step asked for other ops than the captured graph (internal error; "
                    "MINFER_CUDA_GRAPH=0 runs steps without graphs)");
            cudaGraphExecDestroy(c->exec);
            c->exec = NULL;
            return;
        }
        c->n_replays++;
    } else {
        return;
    }
    cudaError_t e = cudaGraphLaunch(c->exec, c->stream);
    if (e != cudaSuccess) fail(c, "cuda: graph launch: %s", cudaGetErrorString(e));
}

static mf_status cu_end_step(mf_backend *be) {
    mf_cuda *c = CU(be);
    if (c->mode != MFC_REPLAY && !c->err) flush(c);
    graph_run(c); /* a captured or replayed step that downloaded nothing */
    c->step = NULL;
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) fail(c, "cuda: %s", cudaGetErrorString(e));
    if (c->err) return mf_err(c->err, "%s", c->err_msg);
    return MF_OK;
}

static void cu_synchronize(mf_backend *be) {
    mf_cuda *c = CU(be);
    /* inside a captured or replayed step nothing has run yet: the engine
     * only waits there to call its hooks between layers */
    if (c->mode != MFC_REPLAY && !c->err) flush(c);
    if (c->mode == MFC_EAGER) cudaStreamSynchronize(c->stream);
}

static int cu_n_threads(mf_backend *be) { return 1; }
static mf_status cu_set_threads(mf_backend *be, int n) { return MF_OK; }
static bool cu_supports_type(mf_backend *be, mf_type t) { return mfc_type_ok(t); }

/* A download is complete when it returns (the caller may read dst at once:
 * pooling reads the embeddings it downloaded). In a captured or replayed
 * step, the graph ends with the copy into pinned staging: it is launched
 * here and the rest of the step, if any, runs eagerly. */
static void cu_download(mf_backend *be, const float *src, size_t n, float *dst) {
    mf_cuda *c = CU(be);
    MIX(c, src), MIX(c, n); /* not dst: it is written from the staging after the graph, and the
                               * engine may move its output buffer between steps */
    if (c->mode != MFC_REPLAY && !c->err) flush(c);
    const bool first = c->n_dl++ == 0;
    if (c->mode == MFC_EAGER) {
        if (c->err) return;
        if (c->graphs && c->step && c->step->n_tok == 1 && !c->exec && c->step->n_out && first &&
            (c->graph_nout != c->step->n_out || n > c->dl_cap)) {
            /* size the staging for the graph of the next one-row step */
            if (c->h_dl) cudaFreeHost(c->h_dl);
            c->h_dl = NULL;
            c->dl_cap = 0;
            if (cudaMallocHost((void **)&c->h_dl, n * sizeof(float)) == cudaSuccess) {
                c->dl_cap = n;
                c->graph_nout = c->step->n_out;
            } else {
                cudaGetLastError();
                c->graphs = false;
            }
        }
        cudaError_t e = cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost, c->stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) fail(c, "cuda download: %s", cudaGetErrorString(e));
        return;
    }
    if (n > c->dl_cap) {
        fail(c, "cuda: a decode step downloads more than the graph's staging holds");
        if (c->mode == MFC_CAPTURE) graph_run(c); /* ends the capture; the error stands */
        c->mode = MFC_EAGER;
        return;
    }
    if (c->mode == MFC_CAPTURE && !c->err &&
        cudaMemcpyAsync(c->h_dl, src, n * sizeof(float), cudaMemcpyDeviceToHost, c->stream) != cudaSuccess)
        fail(c, "cuda: capture of a download: %s", cudaGetErrorString(cudaGetLastError()));
    graph_run(c);
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) fail(c, "cuda: %s", cudaGetErrorString(e));
    if (!c->err) memcpy(dst, c->h_dl, n * sizeof(float));
}

/* A split model's residual stream from the CPU's layers, which are done
 * when this is called: copied into pinned staging now, then queued as a copy
 * of the step, so a captured graph replays the copy from the staging. The
 * staging is sized for a full batch by the first (eager) upload; steps end
 * synchronized, so no copy of an earlier step still reads it. */
static void cu_upload(mf_backend *be, const float *src, size_t n, float *dst) {
    mf_cuda *c = CU(be);
    MIX(c, dst), MIX(c, n);
    if (c->err) return;
    if (n > c->ul_cap) {
        if (c->mode != MFC_EAGER) {
            fail(c, "cuda: an upload of %zu floats inside a captured step outgrows its staging", n);
            return;
        }
        if (c->h_ul) cudaFreeHost(c->h_ul);
        c->h_ul = NULL;
        c->ul_cap = 0;
        size_t cap = (size_t)c->max_rows * (size_t)c->max_width;
        if (cap < n) cap = n;
        if (cudaMallocHost((void **)&c->h_ul, cap * sizeof(float)) != cudaSuccess) {
            cudaGetLastError();
            fail(c, "cuda: out of pinned host memory for a %zu-float upload", cap);
            return;
        }
        c->ul_cap = cap;
    }
    memcpy(c->h_ul, src, n * sizeof(float));
    if (!op_begin(c, 14)) return;
    if (cudaMemcpyAsync(dst, c->h_ul, n * sizeof(float), cudaMemcpyHostToDevice, c->stream) != cudaSuccess)
        fail(c, "cuda upload: %s", cudaGetErrorString(cudaGetLastError()));
}

/* Pinned host memory for the context's logits: a download into pageable
 * memory goes through the driver's staging at a fraction of the bus (the
 * 39 MB of 64 sequences' logits per step). */
static void *cu_host_alloc(mf_backend *be, size_t bytes) {
    (void)be;
    void *p = NULL;
    if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
        cudaGetLastError();
        return NULL;
    }
    return p;
}

static void cu_host_free(mf_backend *be, void *p) {
    (void)be;
    if (p) cudaFreeHost(p);
}

/* ---- ops ---- */

static const void *wdev(mf_weight w) { return w ? w->dev : NULL; }
/* the kernels' type of w's device bytes (weights.c repacks some Q8_0) */
static int dtype(mf_weight w) { return mfc_dev_type((int)w->type, w->ne[0]); }

/* ---- held-back ops ---- */

static const float *wf(mf_weight w) { return w ? (const float *)w->dev : NULL; }

/* the held RoPEs, each as its own launch */
static void flush_rope(mf_cuda *c) {
    for (int i = 0; i < c->rp.n; i++) {
        const mfc_rope_grp *g = &c->rp.g[i];
        if (g->norm)
            mfc_norm_rope(c->stream, g->x, g->w, c->rp.rows, g->n_head, c->rp.head_dim, g->eps, c->sd.pos, &c->rp.r);
        else
            mfc_rope_apply(c->stream, g->x, c->rp.rows, g->n_head, c->rp.head_dim, c->sd.pos, &c->rp.r);
        check(c, "rope");
    }
    c->rp.n = 0;
}

static void flush(mf_cuda *c) {
    flush_rope(c);
    if (c->pend.kind == PEND_NORM) {
        mfc_norm(c->stream, c->pend.layer, c->pend.x, c->pend.w, c->pend.b, c->pend.rows, c->pend.n, c->pend.eps,
                 c->pend.out);
        check(c, "norm");
    } else if (c->pend.kind == PEND_GATE_UP) {
        /* q8b[q8_i] still holds their input: every op flushes before it quantizes */
        mfc_mmvq_n(c->stream, c->pend.seg, 2, c->pend.k, &c->q8b[c->q8_i], c->pend.rows);
        check(c, "matmul");
    }
    c->pend.kind = PEND_NONE;
}

/* Make q8b[q8_i] hold x (rows of k) as int8 blocks: kept when it already
 * does (fresh false; as it was written, g8 or not), fused with a held-back
 * norm that writes x, else quantized on its own. g8: every product that
 * reads it is a K-quant (kernels.h, mfc_q8.g8). */
static void quant_for(mf_cuda *c, const float *x, int k, int rows, bool fresh, bool g8) {
    if (!fresh && c->q8_x == x) return;
    if (c->pin_x == x) g8 = c->pin_g8;
    c->pin_x = NULL;
    c->q8b[c->q8_i].g8 = g8 && mfc_q8_g8;
    if (c->pend.kind == PEND_NORM && c->pend.out == x && c->pend.rows == rows && c->pend.n == k &&
        mfc_norm_quant(c->stream, c->pend.layer, c->pend.x, c->pend.w, c->pend.b, rows, k, c->pend.eps, c->pend.out,
                       &c->q8b[c->q8_i])) {
        c->pend.kind = PEND_NONE;
        check(c, "norm");
    } else {
        flush(c);
        mfc_quant_x(c->stream, x, k, rows, &c->q8b[c->q8_i]);
    }
    c->q8_x = x;
}

/* whether rows x k int8 activations fit the q8 buffers: the tiled layout
 * (more than 8 rows) writes whole tiles of 16 rows */
static bool q8_fits(const mf_cuda *c, int rows, size_t k) {
    const size_t r = mfc_q8_tiled_kb(rows, 32) ? ((size_t)rows + 15) / 16 * 16 : (size_t)rows;
    return r * k <= c->q8_cap;
}

static bool mmvq_ok(mf_cuda *c, mf_weight w, int rows) {
    const int k = (int)w->ne[0];
    return c->mmvq && mfc_mmvq_takes(dtype(w), k, rows) && q8_fits(c, rows, (size_t)k);
}

static mfc_mm_seg seg_of(mf_weight w, float *out, mf_weight b, float *res) {
    return (mfc_mm_seg){w->dev, mf_row_size(w->type, w->ne[0]), dtype(w), (int)w->ne[1], out, wf(b), res};
}

/* a prompt's product on the f16 tensor cores (k_gemm_h.cu) */
static bool gemm_h_ok(const mf_cuda *c, mf_weight w, int rows) {
    const int k = (int)w->ne[0];
    return c->tc && c->xh.h && mfc_gemm_h_takes(dtype(w), k, rows) && (size_t)rows * (size_t)k <= c->xh_cap;
}

/* fresh: x may have changed since the last product quantized it */
static void mm(mf_cuda *c, mf_weight w, const float *x, int rows, float *out, mf_weight b, float *res, bool fresh) {
    const int k = (int)w->ne[0];
    if (gemm_h_ok(c, w, rows)) {
        flush(c);
        const mfc_mm_seg g = seg_of(w, out, b, res);
        if (mfc_gemm_h(c->stream, &g, 1, k, x, rows, &c->xh)) {
            check(c, "matmul");
            return;
        }
    }
    if (mmvq_ok(c, w, rows)) {
        quant_for(c, x, k, rows, fresh, w->type != MF_TYPE_Q8_0);
        const mfc_mm_seg g = seg_of(w, out, b, res);
        mfc_mmvq_n(c->stream, &g, 1, k, &c->q8b[c->q8_i], rows);
        check(c, "matmul");
        return;
    }
    flush(c);
    if (c->tc && mfc_gemm_tc_takes(dtype(w), k, rows) &&
        mfc_gemm_tc(c->stream, dtype(w), w->dev, mf_row_size(w->type, k), k, (int)w->ne[1], x, rows, out,
                    wf(b), res)) {
        check(c, "matmul");
        return;
    }
    if (!mfc_matmul(c->stream, dtype(w), w->dev, mf_row_size(w->type, w->ne[0]), (int)w->ne[0], (int)w->ne[1], x,
                    rows, out, wf(b), res))
        fail(c, "cuda matmul: %s (%s, %lld x %lld) over %d rows is not supported", w->name, mf_type_name(w->type),
             (long long)w->ne[1], (long long)w->ne[0], rows);
    check(c, "matmul");
}

/* whether x's quantization from the op before is still in q8b[q8_i] */
static bool x_fresh(const mf_cuda *c, const float *x) { return !(c->q8_hold_now && c->q8_x == x); }

static void cu_matmul(mf_backend *be, mf_weight w, const float *x, int rows, float *out) {
    mf_cuda *c = CU(be);
    MIX(c, w), MIX(c, x), MIX(c, rows), MIX(c, out);
    if (!op_begin_x(c, 1, true)) return;
    mm(c, w, x, rows, out, NULL, NULL, x_fresh(c, x));
}

/* The output head of a step of several output rows, its logits copied
 * down in parts while the later parts compute: 64 sequences' logits of a
 * 152k vocabulary are 39 MB, about 0.7 ms on the bus, which otherwise
 * starts only after the whole product (about 0.5 ms). Part j is W's rows
 * [n0, n0 + nj), i.e. columns n0.. of every logit row, computed into
 * out + rows * n0 (rows x nj) as its own product, then copied by a 2-D copy
 * on the download stream into those columns of dst once the part's event
 * has fired. A logit's sum over k does not depend on the other rows of W
 * in its launch, so the bits are those of the whole product (test_cuda
 * checks it against MINFER_CUDA_HEAD_PARTS=1). One-row steps (captured
 * into the decode graph) and parts of fewer than 256 columns take the
 * product, then the copy. */
static void cu_matmul_download(mf_backend *be, mf_weight w, const float *x, int rows, float *out, float *dst) {
    mf_cuda *c = CU(be);
    const int n = (int)w->ne[1];
    int parts = c->head_parts;
    while (parts > 1 && n / parts < 256) parts--;
    /* the f16 tile GEMM splits k by the product's width (mfc_gemm_h_parts): a part could sum differently */
    if (parts <= 1 || rows < 2 || c->mode != MFC_EAGER || !c->dl_stream || c->err || gemm_h_ok(c, w, rows)) {
        cu_matmul(be, w, x, rows, out);
        cu_download(be, out, (size_t)rows * (size_t)n, dst);
        return;
    }
    MIX(c, w), MIX(c, x), MIX(c, rows), MIX(c, out);
    if (!op_begin_x(c, 1, true)) return;
    c->n_dl++;
    const size_t rb = mf_row_size(w->type, w->ne[0]);
    const int step = ((n + parts - 1) / parts + 255) / 256 * 256; /* step * parts >= n: at most parts parts */
    const bool fresh = x_fresh(c, x);
    int j = 0;
    for (int n0 = 0; n0 < n && j < parts && !c->err; n0 += step, j++) {
        const int nj = n - n0 < step ? n - n0 : step;
        mf_tensor part = *w;
        part.ne[1] = nj;
        part.nbytes = (size_t)nj * rb;
        part.dev = (char *)w->dev + (size_t)n0 * rb;
        float *po = out + (size_t)rows * (size_t)n0;
        /* the first part quantizes x (or takes a held norm's); the rest reuse it */
        mm(c, &part, x, rows, po, NULL, NULL, j == 0 && fresh);
        if (c->err) break;
        cudaError_t e = cudaEventRecord(c->head_ev[j], c->stream);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(c->dl_stream, c->head_ev[j], 0);
        if (e == cudaSuccess)
            e = cudaMemcpy2DAsync(dst + n0, (size_t)n * sizeof(float), po, (size_t)nj * sizeof(float),
                                  (size_t)nj * sizeof(float), (size_t)rows, cudaMemcpyDeviceToHost, c->dl_stream);
        if (e != cudaSuccess) fail(c, "cuda head download: %s", cudaGetErrorString(e));
    }
    cudaError_t e = cudaStreamSynchronize(c->dl_stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) fail(c, "cuda head download: %s", cudaGetErrorString(e));
}

static void cu_matmul_n(mf_backend *be, const mf_weight *w, const mf_weight *b, int nw, const float *x, int rows,
                        float *const *out, float *res) {
    mf_cuda *c = CU(be);
    for (int i = 0; i < nw; i++) {
        const mf_weight bi = b ? b[i] : NULL;
        MIX(c, w[i]), MIX(c, out[i]), MIX(c, bi);
    }
    MIX(c, nw), MIX(c, x), MIX(c, rows), MIX(c, res);
    if (!op_begin_x(c, 2, true)) return;
    const int k = (int)w[0]->ne[0];
    bool h = nw >= 2 && nw <= MFC_MAX_SEGS;
    for (int i = 0; i < nw && h; i++) h = gemm_h_ok(c, w[i], rows) && (int)w[i]->ne[0] == k;
    if (h) {
        /* a prompt: x in f16 once, every product in one launch where the
         * types allow, else one launch each over the same conversion */
        flush(c);
        mfc_mm_seg g[MFC_MAX_SEGS];
        for (int i = 0; i < nw; i++) g[i] = seg_of(w[i], out[i], b ? b[i] : NULL, i == 0 ? res : NULL);
        if (!mfc_gemm_h(c->stream, g, nw, k, x, rows, &c->xh)) {
            mfc_x_to_h(c->stream, x, k, rows, &c->xh);
            for (int i = 0; i < nw; i++) mfc_gemm_h(c->stream, &g[i], 1, k, NULL, rows, &c->xh);
        }
        check(c, "matmul");
        return;
    }
    bool one = nw >= 2 && nw <= MFC_MAX_SEGS;
    for (int i = 0; i < nw && one; i++) one = mmvq_ok(c, w[i], rows) && (int)w[i]->ne[0] == k;
    if (one) {
        /* one quantization of x and one launch for every product */
        bool g8 = true;
        for (int i = 0; i < nw; i++) g8 = g8 && w[i]->type != MF_TYPE_Q8_0;
        quant_for(c, x, k, rows, x_fresh(c, x), g8);
        mfc_mm_seg g[MFC_MAX_SEGS];
        for (int i = 0; i < nw; i++) g[i] = seg_of(w[i], out[i], b ? b[i] : NULL, i == 0 ? res : NULL);
        if (c->fuse && nw == 2 && !res && !g[0].b && !g[1].b && g[0].n == g[1].n && g[0].n % 32 == 0) {
            /* gate/up: held back for the activation that follows */
            c->pend.kind = PEND_GATE_UP;
            c->pend.seg[0] = g[0], c->pend.seg[1] = g[1];
            c->pend.k = k, c->pend.rows = rows;
            return;
        }
        mfc_mmvq_n(c->stream, g, nw, k, &c->q8b[c->q8_i], rows);
        check(c, "matmul");
        return;
    }
    /* one quantization of x serves every product (out[i] never aliases x) */
    if (x_fresh(c, x)) c->q8_x = NULL;
    for (int i = 0; i < nw; i++) mm(c, w[i], x, rows, out[i], b ? b[i] : NULL, i == 0 ? res : NULL, false);
}

static void cu_get_rows(mf_backend *be, mf_weight w, mf_step_ids which, float *out) {
    mf_cuda *c = CU(be);
    MIX(c, w), MIX(c, which), MIX(c, out);
    if (!op_begin(c, 3)) return;
    if (!mfc_get_rows(c->stream, dtype(w), w->dev, mf_row_size(w->type, w->ne[0]), (int)w->ne[0],
                      which == MF_STEP_TOKENS ? c->sd.tok : c->sd.pos, c->step->n_tok, out))
        fail(c, "cuda get_rows: %s (%s) is not supported", w->name, mf_type_name(w->type));
    check(c, "get_rows");
}

static void cu_norm(mf_backend *be, mf_norm_type type, const float *x, mf_weight w, mf_weight b, int rows, int n,
                    float eps, float *out) {
    mf_cuda *c = CU(be);
    MIX(c, type), MIX(c, x), MIX(c, w), MIX(c, b), MIX(c, rows), MIX(c, n), MIX(c, eps), MIX(c, out);
    if (!op_begin_x(c, 4, true)) return;
    if (c->pend.kind != PEND_NONE) flush(c); /* a held op newer than the held RoPEs: all go, in order */
    if (c->fuse) {
        /* held back: the product or RoPE that reads it may take it in */
        c->pend.kind = PEND_NORM;
        c->pend.layer = type == MF_NORM_LAYER;
        c->pend.x = x, c->pend.w = wf(w), c->pend.b = wf(b);
        c->pend.rows = rows, c->pend.n = n, c->pend.eps = eps, c->pend.out = out;
        return;
    }
    flush(c);
    mfc_norm(c->stream, type == MF_NORM_LAYER, x, wdev(w), wdev(b), rows, n, eps, out);
    check(c, "norm");
}

static void cu_add(mf_backend *be, float *a, const float *b, size_t n) {
    mf_cuda *c = CU(be);
    MIX(c, a), MIX(c, b), MIX(c, n);
    if (!op_begin(c, 5)) return;
    mfc_add(c->stream, a, b, n);
    check(c, "add");
}

static void cu_scale(mf_backend *be, float *x, float s, size_t n) {
    mf_cuda *c = CU(be);
    MIX(c, x), MIX(c, s), MIX(c, n);
    if (!op_begin(c, 6)) return;
    mfc_scale(c->stream, x, s, n);
    check(c, "scale");
}

static void cu_softcap(mf_backend *be, float *x, float cap, size_t n) {
    mf_cuda *c = CU(be);
    MIX(c, x), MIX(c, cap), MIX(c, n);
    if (!op_begin(c, 7)) return;
    mfc_softcap(c->stream, x, cap, n);
    check(c, "softcap");
}

static void cu_copy_cols(mf_backend *be, const float *src, int sw, int col0, int n, int rows, float *dst) {
    mf_cuda *c = CU(be);
    MIX(c, src), MIX(c, sw), MIX(c, col0), MIX(c, n), MIX(c, rows), MIX(c, dst);
    if (!op_begin(c, 8)) return;
    mfc_copy_cols(c->stream, src, sw, col0, n, rows, dst);
    check(c, "copy_cols");
}

static void cu_gather_out(mf_backend *be, const float *src, int first, int count, int n, float *dst) {
    mf_cuda *c = CU(be);
    MIX(c, src), MIX(c, first), MIX(c, count), MIX(c, n), MIX(c, dst);
    if (!op_begin(c, 9)) return;
    mfc_gather_rows(c->stream, src, c->sd.out_rows + first, count, n, dst);
    check(c, "gather_out");
}

static void cu_glu(mf_backend *be, mf_ffn_type act, const float *gate, const float *up, size_t n, float *out) {
    mf_cuda *c = CU(be);
    MIX(c, act), MIX(c, gate), MIX(c, up), MIX(c, n), MIX(c, out);
    if (!op_begin_x(c, 10, true)) return;
    /* the down product's input takes the scales gate's and up's input took
     * (its own type is not known here), fused or not */
    c->pin_x = out, c->pin_g8 = c->q8b[c->q8_i].g8;
    if (c->pend.kind == PEND_GATE_UP && c->pend.seg[0].out == gate && c->pend.seg[1].out == up &&
        n == (size_t)c->pend.rows * (size_t)c->pend.seg[0].n && (act == MF_FFN_SWIGLU || act == MF_FFN_GEGLU)) {
        /* the down product's input is quantized into the other buffer on the way out */
        const bool q = q8_fits(c, c->pend.rows, (size_t)c->pend.seg[0].n);
        c->q8b[c->q8_i ^ 1].g8 = c->pin_g8;
        if (mfc_mmvq_glu(c->stream, act == MF_FFN_SWIGLU ? 0 : 1, &c->pend.seg[0], &c->pend.seg[1], c->pend.k,
                         &c->q8b[c->q8_i], c->pend.rows, out, q ? &c->q8b[c->q8_i ^ 1] : NULL)) {
            c->pend.kind = PEND_NONE;
            if (q) c->q8_i ^= 1, c->q8_x = out, c->q8_hold = true;
            check(c, "glu");
            return;
        }
    }
    flush(c);
    mfc_glu(c->stream, (int)act, gate, up, n, out);
    check(c, "glu");
}

static void cu_rope(mf_backend *be, float *x, int n_head, int head_dim, const mf_rope_params *p) {
    mf_cuda *c = CU(be);
    MIX(c, x), MIX(c, n_head), MIX(c, head_dim), MIX(c, *p);
    if (!op_begin_x(c, 11, true)) return;
    mfc_rope r = {p->type == MF_ROPE_NEOX, p->n_rot, powf(p->base, -2.0f / (float)p->n_rot), p->freq_scale,
                  p->ext_factor, p->attn_factor, p->corr_dims[0], p->corr_dims[1],
                  p->freq_factors ? (const float *)p->freq_factors->dev : NULL};
    const int rows = c->step->n_tok;
    const bool qkn = c->pend.kind == PEND_NORM && c->pend.x == x && c->pend.out == x && !c->pend.layer &&
                     !c->pend.b && c->pend.rows == rows * n_head && c->pend.n == head_dim;
    if (c->fuse && head_dim <= MFC_MAX_HEAD_DIM && p->n_rot <= head_dim && (qkn || c->pend.kind == PEND_NONE)) {
        /* held back for the KV store: with the other RoPE of the step if
         * they match, else the ones held so far go first */
        if (c->rp.n == 2 || (c->rp.n == 1 && (c->rp.rows != rows || c->rp.head_dim != head_dim || c->rp.g[0].x == x ||
                                               memcmp(&c->rp.r, &r, sizeof r) != 0))) {
            flush_rope(c); /* a held norm stays: it is newer */
        }
        mfc_rope_grp *g = &c->rp.g[c->rp.n++];
        *g = (mfc_rope_grp){x, qkn ? c->pend.w : NULL, n_head, qkn, qkn ? c->pend.eps : 0.0f};
        c->rp.rows = rows, c->rp.head_dim = head_dim, c->rp.r = r;
        if (qkn) c->pend.kind = PEND_NONE;
        return;
    }
    flush_rope(c); /* older than this RoPE (and than a held norm) */
    if (qkn && mfc_norm_rope(c->stream, x, c->pend.w, rows, n_head, head_dim, c->pend.eps, c->sd.pos, &r)) {
        /* QK-norm and RoPE of each head in one pass */
        c->pend.kind = PEND_NONE;
        check(c, "rope");
        return;
    }
    flush(c);
    mfc_rope_apply(c->stream, x, rows, n_head, head_dim, c->sd.pos, &r);
    check(c, "rope");
}

static int kvt_of(const mf_cuda *c) {
    return c->kv.type == MF_KV_F16 ? MFC_KV_F16 : c->kv.type == MF_KV_Q8_0 ? MFC_KV_Q8 : MFC_KV_F32;
}

static void cu_kv_store(mf_backend *be, int layer, const float *k, const float *v) {
    mf_cuda *c = CU(be);
    MIX(c, layer), MIX(c, k), MIX(c, v);
    if (!op_begin_x(c, 12, true)) return;
    if (c->pend.kind == PEND_NONE && c->rp.n >= 1 && c->rp.rows == c->step->n_tok) {
        /* the held RoPEs (K's the last, or the only one) and this store in one launch */
        const int kb = c->rp.n - 1;
        const mfc_rope_grp none = {NULL, NULL, 0, false, 0.0f};
        /* one launch rotates Q and K in place while it reads V: only for
         * three distinct buffers */
        const bool apart = v != k && (kb == 0 || (c->rp.g[0].x != k && c->rp.g[0].x != v));
        if (c->rp.g[kb].x == k && apart && mfc_rope_store(c->stream, &c->sd, c->step->n_tok, kb ? &c->rp.g[0] : &none,
                                                   &c->rp.g[kb], c->rp.head_dim, &c->rp.r, v, c->k[layer],
                                                   c->v[layer], (int)c->kv.k_width, (int)c->kv.v_width,
                                                   kvt_of(c))) {
            c->rp.n = 0;
            check(c, "kv_store");
            return;
        }
    }
    flush(c);
    mfc_kv_store(c->stream, &c->sd, c->step->n_tok, k, v, c->k[layer], c->v[layer], (int)c->kv.k_width,
                 (int)c->kv.v_width, kvt_of(c));
    check(c, "kv_store");
}

static void cu_attention(mf_backend *be, int layer, const float *q, const mf_attn_params *p, float *out) {
    mf_cuda *c = CU(be);
    MIX(c, layer), MIX(c, q), MIX(c, *p), MIX(c, out);
    if (!op_begin(c, 13)) return;
    mfc_attn a = {p->n_head, p->n_head_kv, p->head_dim_k, p->head_dim_v, p->scale, p->softcap, p->window,
                  (int)c->kv.page_size, (int)c->kv.k_width, (int)c->kv.v_width, kvt_of(c), 0};
    const mf_step *st = c->step;
    a.early = c->att_early && st->n_tok == st->n_seq;
    const bool split = st->n_tok <= ATT_SPLIT_ROWS && st->n_tok <= c->max_rows && p->n_head <= c->att_heads;
    /* blocks along the shares: the most any row has (a captured step: the
     * context's capacity, for it replays at later positions) */
    int nz = c->att_split;
    if (split && c->mode != MFC_CAPTURE) {
        nz = 1;
        for (int i = 0; i < st->n_tok; i++) {
            const int pos = st->pos[i];
            const int first = mfc_att_first(p->window, pos);
            const int n = mfc_att_n_shares(pos - first + 1);
            if (n > nz) nz = n;
        }
        if (nz > c->att_split) nz = c->att_split;
    }
    /* the output projection's int8 input, written by the attention itself
     * (for as many rows as the int8 products take) */
    const bool qz = c->fuse && c->mmvq && split && p->head_dim_v % 32 == 0 &&
                    (st->n_tok <= 8 || st->n_tok <= mfc_mmq_rows) &&
                    q8_fits(c, st->n_tok, (size_t)p->n_head * (size_t)p->head_dim_v);
    c->q8b[c->q8_i].g8 = 0; /* a block a head: its scales are per 32, fused or not */
    c->pin_x = out, c->pin_g8 = false;
    mfc_attention(c->stream, &c->sd, st->n_tok, q, c->k[layer], c->v[layer], &a, out, split ? c->att_split : 1, nz,
                  split ? c->att_part : NULL, qz ? &c->q8b[c->q8_i] : NULL);
    if (qz) c->q8_x = out, c->q8_hold = true;
    check(c, "attention");
}

/* Mixture-of-experts models are refused at load (weights.c); these keep
 * the table whole. */
/* mixture of experts (k_moe.cu): the routing never leaves the device */
static void cu_moe_route(mf_backend *be, const float *l, int n, const mf_moe_route *p, int32_t *sel, float *w) {
    mf_cuda *c = CU(be);
    /* field by field: the struct's padding is not part of the op */
    MIX(c, l), MIX(c, n), MIX(c, p->n_expert), MIX(c, p->k), MIX(c, p->sigmoid), MIX(c, p->norm_topk), MIX(c, p->scale);
    MIX(c, sel), MIX(c, w);
    if (!op_begin(c, 15)) return;
    if (!mfc_moe_route(c->stream, l, n, p->n_expert, p->k, p->sigmoid, p->norm_topk, p->scale, sel, w))
        fail(c, "cuda: routing of %d experts, %d per token: at most 1024 experts", p->n_expert, p->k);
    check(c, "moe_route");
}
static void cu_matmul_id(mf_backend *be, mf_weight e, int ne, const float *x, bool ps, int rows, int k,
                         const int32_t *sel, float *out, float *ti, float *to) {
    (void)ne, (void)ti, (void)to;
    mf_cuda *c = CU(be);
    MIX(c, e), MIX(c, x), MIX(c, ps), MIX(c, rows), MIX(c, k), MIX(c, sel), MIX(c, out);
    if (!op_begin(c, 16)) return;
    /* the experts' views lie slice bytes apart in their stack */
    if (!e->dev || !mfc_matmul_id(c->stream, dtype(e), e->dev, e->nbytes, mf_row_size(e->type, e->ne[0]),
                                  (int)e->ne[0], (int)e->ne[1], x, ps, rows, k, sel, out))
        fail(c, "cuda: expert product %s (%s, %d x %d slots) not taken", e->name, mf_type_name(e->type), rows, k);
    check(c, "matmul_id");
}
static void cu_scale_rows(mf_backend *be, float *x, const float *s, bool sig, int rows, int n) {
    mf_cuda *c = CU(be);
    MIX(c, x), MIX(c, s), MIX(c, sig), MIX(c, rows), MIX(c, n);
    if (!op_begin(c, 17)) return;
    mfc_scale_rows(c->stream, x, s, sig, rows, n);
    check(c, "scale_rows");
}
static void cu_sum_slots(mf_backend *be, const float *src, int rows, int k, int n, float *out) {
    mf_cuda *c = CU(be);
    MIX(c, src), MIX(c, rows), MIX(c, k), MIX(c, n), MIX(c, out);
    if (!op_begin(c, 18)) return;
    mfc_sum_slots(c->stream, src, rows, k, n, out);
    check(c, "sum_slots");
}

/* ---- the cache outside steps (sessions, copy-on-write) ---- */

static size_t cu_kv_read(mf_backend *be, int layer, const int32_t *cells, uint32_t n, void *dst) {
    mf_cuda *c = CU(be);
    const size_t total = (size_t)n * (c->k_row_bytes + c->v_row_bytes);
    if (!dst) return total;
    uint8_t *o = dst;
    for (uint32_t i = 0; i < n; i++, o += c->k_row_bytes)
        cudaMemcpy(o, (uint8_t *)c->k[layer] + (size_t)cells[i] * c->k_row_bytes, c->k_row_bytes, cudaMemcpyDeviceToHost);
    for (uint32_t i = 0; i < n; i++, o += c->v_row_bytes)
        cudaMemcpy(o, (uint8_t *)c->v[layer] + (size_t)cells[i] * c->v_row_bytes, c->v_row_bytes, cudaMemcpyDeviceToHost);
    return total;
}

static void cu_kv_write(mf_backend *be, int layer, const int32_t *cells, uint32_t n, const void *src) {
    mf_cuda *c = CU(be);
    const uint8_t *s = src;
    for (uint32_t i = 0; i < n; i++, s += c->k_row_bytes)
        cudaMemcpy((uint8_t *)c->k[layer] + (size_t)cells[i] * c->k_row_bytes, s, c->k_row_bytes, cudaMemcpyHostToDevice);
    for (uint32_t i = 0; i < n; i++, s += c->v_row_bytes)
        cudaMemcpy((uint8_t *)c->v[layer] + (size_t)cells[i] * c->v_row_bytes, s, c->v_row_bytes, cudaMemcpyHostToDevice);
}

static void cu_kv_copy_page(mf_backend *be, int32_t src, int32_t dst) {
    mf_cuda *c = CU(be);
    const size_t P = c->kv.page_size;
    for (uint32_t l = 0; l < c->kv.n_layer; l++) {
        cudaMemcpyAsync((uint8_t *)c->k[l] + (size_t)dst * P * c->k_row_bytes,
                        (uint8_t *)c->k[l] + (size_t)src * P * c->k_row_bytes, P * c->k_row_bytes,
                        cudaMemcpyDeviceToDevice, c->stream);
        cudaMemcpyAsync((uint8_t *)c->v[l] + (size_t)dst * P * c->v_row_bytes,
                        (uint8_t *)c->v[l] + (size_t)src * P * c->v_row_bytes, P * c->v_row_bytes,
                        cudaMemcpyDeviceToDevice, c->stream);
    }
}

/* The profiler's timestamps: events on the stream, the held-back ops
 * launched first so that each op's kernels fall between its two marks.
 * Profiling turns the graphs off, so every op is queued as it comes. */
static int cu_mark(mf_backend *be) {
    mf_cuda *c = CU(be);
    if (c->mode == MFC_REPLAY || c->err || !c->step) return -1;
    flush(c);
    if (c->n_mark == c->n_ev) {
        cudaEvent_t *ev = realloc(c->ev, (size_t)(c->n_ev + 64) * sizeof *ev);
        if (!ev) return -1;
        c->ev = ev;
        for (int i = 0; i < 64; i++, c->n_ev++)
            if (cudaEventCreate(&c->ev[c->n_ev]) != cudaSuccess) return -1;
    }
    if (cudaEventRecord(c->ev[c->n_mark], c->stream) != cudaSuccess) return -1;
    return c->n_mark++;
}

static double cu_mark_ms(mf_backend *be, int a, int b) {
    mf_cuda *c = CU(be);
    float ms = 0.0f;
    if (a < 0 || b < 0 || a >= c->n_mark || b >= c->n_mark) return -1.0;
    return cudaEventElapsedTime(&ms, c->ev[a], c->ev[b]) == cudaSuccess ? (double)ms : -1.0;
}

static const mf_backend_ops g_cuda_ops = {
    .name = "cuda",
    .host_memory = false,
    .destroy = cu_destroy,
    .alloc = cu_alloc,
    .kv_init = cu_kv_init,
    .begin_step = cu_begin_step,
    .end_step = cu_end_step,
    .synchronize = cu_synchronize,
    .n_threads = cu_n_threads,
    .set_threads = cu_set_threads,
    .supports_type = cu_supports_type,
    .get_rows = cu_get_rows,
    .norm = cu_norm,
    .matmul = cu_matmul,
    .matmul_n = cu_matmul_n,
    .add = cu_add,
    .copy_cols = cu_copy_cols,
    .gather_out = cu_gather_out,
    .moe_route = cu_moe_route,
    .matmul_id = cu_matmul_id,
    .scale_rows = cu_scale_rows,
    .sum_slots = cu_sum_slots,
    .softcap = cu_softcap,
    .scale = cu_scale,
    .rope = cu_rope,
    .glu = cu_glu,
    .kv_store = cu_kv_store,
    .kv_read = cu_kv_read,
    .kv_write = cu_kv_write,
    .kv_copy_page = cu_kv_copy_page,
    .attention = cu_attention,
    .download = cu_download,
    .matmul_download = cu_matmul_download,
    .upload = cu_upload,
    .host_alloc = cu_host_alloc,
    .host_free = cu_host_free,
    .mark = cu_mark,
    .mark_ms = cu_mark_ms,
};

mf_backend *mf_cuda_backend_new(const mf_backend_config *cfg, char *why, size_t why_len) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(why, why_len, "no CUDA device (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        cudaGetLastError();
        return NULL;
    }
    mf_cuda *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->base.ops = &g_cuda_ops;
    c->verbose = cfg->verbose;
    c->max_rows = cfg->max_rows;
    c->max_ctx = cfg->max_ctx;
    c->max_width = cfg->max_width;
    c->graph_nout = -1;
    c->graphs = !mf_env_off("MINFER_CUDA_GRAPH");
    if (mf_env_on("MINFER_OP_PROFILE")) c->graphs = false; /* the profiler times ops one by one */
    c->mmvq = !mf_env_off("MINFER_CUDA_MMVQ");
    if (getenv("MINFER_CUDA_MMVQ_OCC")) mfc_mmvq_occ = mf_env_on("MINFER_CUDA_MMVQ_OCC");
    c->tc = !mf_env_off("MINFER_CUDA_TC");
    cudaGetDevice(&c->device);
    /* int8 activations for the rows the dp4a and int8 tensor-core products
     * take (MINFER_CUDA_MMQ_ROWS: at most that many on the tensor cores, 8
     * or less: none) of the widest input */
    {
        const char *mr = getenv("MINFER_CUDA_MMQ_ROWS");
        if (mr && *mr) mfc_mmq_rows = atoi(mr);
        const char *mc = getenv("MINFER_CUDA_MMQ_CHUNK");
        if (mc && *mc) mfc_mmq_chunk = atoi(mc);
        if (getenv("MINFER_CUDA_MMQ_STAGE")) mfc_mmq_stage = mf_env_on("MINFER_CUDA_MMQ_STAGE");
        if (getenv("MINFER_CUDA_Q8_G8")) mfc_q8_g8 = mf_env_on("MINFER_CUDA_Q8_G8");
    }
    int q8_rows = cfg->max_rows < mfc_mmq_rows ? cfg->max_rows : mfc_mmq_rows;
    if (q8_rows < 8) q8_rows = 8;
    q8_rows = (q8_rows + 15) / 16 * 16; /* whole tiles of the tiled layout (kernels.h) */
    const size_t qn = (size_t)q8_rows * (size_t)(cfg->max_width + 256);
    c->q8_cap = qn;
    for (int i = 0; i < 2; i++)
        if (cudaMalloc((void **)&c->q8b[i].q, qn) != cudaSuccess ||
            cudaMalloc((void **)&c->q8b[i].d, qn / 32 * 8) != cudaSuccess || /* (d, s) pairs when tiled */
            cudaMalloc((void **)&c->q8b[i].s, qn / 32 * 4) != cudaSuccess) {
            snprintf(why, why_len, "out of device memory for the activation buffers");
            cudaGetLastError();
            cu_destroy(&c->base);
            return NULL;
        }
    {
        const char *hr = getenv("MINFER_CUDA_GEMM_H_ROWS");
        if (hr && *hr) mfc_gemm_h_rows = atoi(hr);
        const char *hs = getenv("MINFER_CUDA_GEMM_H_SPLIT");
        if (hs && *hs) mfc_gemm_h_split = atoi(hs);
    }
    if (mfc_gemm_h_rows > 0 && cfg->max_rows >= mfc_gemm_h_rows) {
        c->xh_cap = (size_t)cfg->max_rows * (size_t)(cfg->max_width + 256);
        if (cudaMalloc(&c->xh.h, c->xh_cap * 2) != cudaSuccess ||
            cudaMalloc((void **)&c->xh.s, (size_t)cfg->max_rows * sizeof(float)) != cudaSuccess ||
            cudaMalloc((void **)&c->xh.part, (size_t)cfg->max_rows * MFC_H_PART_PER_ROW * sizeof(float)) !=
                cudaSuccess) {
            snprintf(why, why_len, "out of device memory for the activation buffers");
            cudaGetLastError();
            cu_destroy(&c->base);
            return NULL;
        }
    }
    c->fuse = !mf_env_off("MINFER_CUDA_FUSE");
    mfc_fattn_on = !mf_env_off("MINFER_CUDA_FA");
    {
        const char *ak = getenv("MINFER_CUDA_ATT");
        mfc_att_kernel = ak && !strcmp(ak, "grouped") ? 1 : ak && !strcmp(ak, "tile") ? 0 : 2;
        if (ak && *ak && strcmp(ak, "grouped") && strcmp(ak, "tile") && strcmp(ak, "mma"))
            mf_log(MF_LOG_WARN, "minfer: MINFER_CUDA_ATT=%s is not mma, tile or grouped; mma it is\n", ak);
    }
    c->att_early = !mf_env_off("MINFER_CUDA_ATT_EARLY");
    mfc_mmq_tile_on = !mf_env_off("MINFER_CUDA_MMQ_TILE");
    {
        const char *tr = getenv("MINFER_CUDA_MMQ_TILE_ROWS");
        if (tr && *tr) mfc_mmq_tile_rows = atoi(tr);
    }
    {
        struct cudaDeviceProp pr;
        cudaGetDeviceProperties(&pr, c->device);
        /* programmatic dependent launch needs sm_90; process-wide (kernels.h) */
        mfc_pdl_on = pr.major >= 9 && !mf_env_off("MINFER_CUDA_PDL");
    }
    if (cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking) != cudaSuccess) {
        snprintf(why, why_len, "cannot create a CUDA stream: %s", cudaGetErrorString(cudaGetLastError()));
        free(c);
        return NULL;
    }
    {
        /* the head's parts (cu_matmul_download): 4 unless MINFER_CUDA_HEAD_PARTS says otherwise; without
         * the second stream or its events, one product and one copy */
        const char *hp = getenv("MINFER_CUDA_HEAD_PARTS");
        c->head_parts = hp && *hp ? atoi(hp) : 4;
        if (c->head_parts < 1) c->head_parts = 1;
        if (c->head_parts > MFC_HEAD_PARTS_MAX) c->head_parts = MFC_HEAD_PARTS_MAX;
        bool ok = cudaStreamCreateWithFlags(&c->dl_stream, cudaStreamNonBlocking) == cudaSuccess;
        for (int i = 0; ok && i < c->head_parts; i++)
            ok = cudaEventCreateWithFlags(&c->head_ev[i], cudaEventDisableTiming) == cudaSuccess;
        if (!ok) {
            cudaGetLastError();
            c->head_parts = 1;
        }
    }
    if (c->verbose) {
        struct cudaDeviceProp pr;
        cudaGetDeviceProperties(&pr, c->device);
        mf_log(MF_LOG_INFO,
               "minfer: cuda backend on %s (sm_%d%d, %d SMs, %.0f GiB), one stream, decode graphs %s, "
               "programmatic dependent launch %s, fused decode ops %s\n",
               pr.name, pr.major, pr.minor, pr.multiProcessorCount, (double)pr.totalGlobalMem / (1u << 30),
               c->graphs ? "on" : "off", mfc_pdl_on ? "on" : "off (sm_90+, MINFER_CUDA_PDL)",
               c->fuse ? "on" : "off (MINFER_CUDA_FUSE=0)");
        mf_log(MF_LOG_INFO, "minfer: cuda kernels: Q4_K/Q6_K/Q8_0 over int8 activations, up to 8 rows by dp4a, "
                            "more rows (up to %d) by int8 mma%s, from %d rows (Q4_K/Q6_K) by int8 mma tiles of 64 "
                            "rows in shared memory%s; Q2_K/Q3_K/IQ4_NL/IQ4_XS up to 8 rows by dp4a; other types "
                            "warp-per-row f32 up to 8 rows; more rows: 128x64 f16 tensor-core tiles%s (F32/BF16: "
                            "64x64 f32 tiles); weights decoded from the file's encoding in all\n",
               c->max_rows < mfc_mmq_rows ? c->max_rows : mfc_mmq_rows, c->mmvq ? "" : " (off: MINFER_CUDA_MMVQ=0)",
               mfc_mmq_tile_rows > 9 ? mfc_mmq_tile_rows : 9, mfc_mmq_tile_on ? "" : " (off: MINFER_CUDA_MMQ_TILE=0)",
               c->tc ? "" : " (off: MINFER_CUDA_TC=0)");
        if (c->xh.h && c->tc)
            mf_log(MF_LOG_INFO, "minfer: cuda prompt products: from %d rows, every quantized type and F16 by f16 "
                                "tensor-core tiles of 128x128 (weights decoded to f16 in shared memory, activations "
                                "in f16 scaled by a power of two per row; k split in up to %d parts where the weight "
                                "tiles are few; MINFER_CUDA_GEMM_H_ROWS=0 turns this off), ahead of the kernels above\n",
                   mfc_gemm_h_rows, mfc_gemm_h_split);
        else
            mf_log(MF_LOG_INFO, "minfer: cuda prompt products: the kernels above (the f16 128x128 tiles are off: %s)\n",
                   !c->tc ? "MINFER_CUDA_TC=0" : mfc_gemm_h_rows <= 0 ? "MINFER_CUDA_GEMM_H_ROWS=0"
                                                                      : "steps hold fewer rows than they take");
        if (c->fuse)
            mf_log(MF_LOG_INFO, "minfer: cuda decode fusions: norm+int8 quantization, Q/K/V in one launch, "
                                "gate/up in one launch, activation+quantization, Q and K QK-norm+RoPE with the KV "
                                "store in one launch, attention+quantization\n");
        mf_log(MF_LOG_INFO, "minfer: cuda decode attention: %s, shares of 32 keys (more past 2048) merged by warp "
                            "shuffles%s\n",
               mfc_att_kernel == 1
                   ? "one block per KV head and share, a thread per key (MINFER_CUDA_ATT=grouped)"
               : mfc_att_kernel == 2
                   ? "f16 tensor cores (mma.sync, queries and probabilities as two f16 parts), a block per "
                     "share for all the query heads of a KV head, its two warps splitting K/V tiles of 32 keys "
                     "in shared memory by cp.async (f16 caches, heads of 64 or 128, up to 16 query heads a KV "
                     "head; other shapes the grouped kernel, else one block per query head)"
                   : "K/V tiles of 32 keys in shared memory by cp.async, f32 FMAs, a warp per query head "
                     "(MINFER_CUDA_ATT=tile; f16 caches, heads of 64 or 128; others one block per KV head and "
                     "share)",
               c->att_early && mfc_att_kernel != 1 ? ", the first tile's older keys copied before the wait" : "");
        mf_log(MF_LOG_INFO, "minfer: cuda prompt attention: %s\n",
               mfc_fattn_on ? "f16 tensor-core flash attention (64 rows x 64-key tiles; head dims 16/32/64/128, f16 "
                              "or q8_0 cache), f32 blocks per row otherwise"
                            : "f32 blocks per row (MINFER_CUDA_FA=0)");
    }
    return &c->base;
}
