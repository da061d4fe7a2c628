/* context.h - a context: one conversation's KV cache, scratch activations and
 * backend (with its thread pool), on top of a shared read-only model. */
#ifndef MF_ENGINE_CONTEXT_H
#define MF_ENGINE_CONTEXT_H

#include "engine/backend.h"
#include "model/model.h"
#include "engine/kv.h"
#include "core/threadpool.h"

#include <pthread.h>

/* Activation buffers of one forward pass, allocated once per context from the
 * backend (decode allocates nothing). Sized for n_batch rows. */
typedef struct mf_scratch {
    float *x;      /* residual stream      [n_batch][n_embd] */
    float *xn;     /* normed input         [n_batch][n_embd] */
    float *q, *k, *v;
    float *att;    /* attention output     [n_batch][n_head * head_dim_v] */
    float *o;      /* projection output    [n_batch][n_embd] */
    float *gate, *up;      /* FFN          [n_batch][max(n_ff, fused qkv width)] */
    float *act;            /* FFN          [n_batch][2 * n_ff] (fused gate-up output) */
    float *logits; /* device logits        [logit_rows][n_vocab] */
    /* mixture of experts */
    float *router;         /* [n_batch][n_expert] */
    float *moe_sel, *moe_w; /* routing: [n_batch][k] expert ids (int32) and weights */
    float *moe_gate, *moe_up, *moe_act; /* [n_batch][k][n_ff_exp] per slot */
    float *moe_in, *moe_out; /* matmul_id scratch [n_batch * k][max(n_embd, n_ff_exp)]; moe_out also the shared expert */
    float *moe_slots;      /* [n_batch][n_expert_used][n_embd] */
} mf_scratch;

/* A pool shared by contexts (pool.c). */
struct mf_threadpool {
    mf_pool *pool;
    pthread_mutex_t lock; /* held by a decode on a context that uses the pool */
};

/* Output-head rows computed per call when every position's logits are wanted:
 * bounds the scratch for large vocabularies. A device backend takes up to
 * MF_LOGIT_ROWS_DEV (one product and one download for 64 sequences'
 * logits instead of four: the head is the largest matrix). */
#define MF_LOGIT_ROWS 16
#define MF_LOGIT_ROWS_DEV 64

/* The per-forward step arrays (sized n_batch) the engine fills from a batch. */
typedef struct mf_step_buf {
    mf_token *tokens;
    int32_t *pos, *cell, *seq, *out_rows;
    mf_step_seq *seqs;
    int32_t *pages;      /* [n_batch][max pages of a sequence]: block tables of the step's sequences */
} mf_step_buf;

/* A split model's CPU side (mf_model.n_cpu_layers): its backend and scratch
 * run layers [0, n_layer) and the token lookup; the context's own backend
 * the rest and the output head. be NULL: the model is not split. */
typedef struct mf_part {
    mf_backend *be;
    mf_scratch s;
    uint32_t n_layer;
} mf_part;

struct mf_context {
    mf_model *model;
    mf_backend *be;      /* the output head's backend (during a split forward: the side running) */
    mf_part lo;          /* the CPU side of a split model (during a split forward: the other side) */
    uint32_t kv_base;    /* the running side's first layer: its KV cache counts layers from there */
    uint32_t n_ctx, n_batch, n_seq_max;
    mf_kv_type kv_type;
    bool embeddings;
    mf_pooling pooling;
    mf_abort_fn abort_cb;
    void *abort_ud;
    mf_layer_fn layer_cb;
    void *layer_ud;
    mf_ffn_fn ffn_cb;
    void *ffn_ud;
    mf_threadpool *tp;   /* shared pool, or NULL (the backend owns its own) */
    mf_kv kv;
    mf_scratch s;
    mf_step_buf sb;
    /* the last decode's outputs: rows in step order (sequences sorted),
     * found through entry_row (batch entry -> row, -1 if not flagged) and
     * out_entry (j-th flagged entry in batch order) */
    float *logits;       /* [n_out][n_vocab] */
    float *embd;         /* [n_out][n_embd] */
    size_t out_cap;      /* rows logits / embd can hold */
    int logit_rows;      /* output-head rows per call (MF_LOGIT_ROWS, or _DEV for a device backend) */
    int32_t n_logits;    /* output rows held */
    int32_t *entry_row, *out_entry, *order;
    size_t entry_cap;
    int32_t n_entries;
    float *embd_rows;    /* [n_batch][n_embd] host copy of a step's normed rows (embeddings) */
    float *ffn_add;      /* [n_batch][n_embd] an FFN callback's addition (return 2), when one is set */
    double *pool_sum;    /* [n_seq_max][n_embd] */
    float *pooled;       /* [n_seq_max][n_embd] */
    int32_t *pool_n;     /* [n_seq_max] rows pooled; 0 = the sequence had none */
    mf_batch one;        /* mf_decode's batch */
    uint32_t *seq_scratch; /* [n_seq_max + 1] per-sequence counters of one decode */
    int32_t *seq_last_row; /* [n_seq_max] output row of each sequence's last token in the last decode, or -1 */
    /* mf_context_set_resume: decodes start at resume_layer from resume_x ([resume_rows][n_embd]); NULL = off */
    const float *resume_x;
    int32_t resume_layer, resume_rows;
};

/* The backend holding layer's KV cache, and the layer's index there. */
mf_backend *mf_context_kv_be(const mf_context *ctx, uint32_t layer, int *local);

/* One forward pass over the step (<= n_batch rows). Output rows go to
 * ctx->logits / ctx->embd from row out_base on, in the step's out_rows
 * order; pooled embeddings are accumulated into ctx->pool_*. */
mf_status mf_forward(mf_context *ctx, const mf_step *st, int32_t out_base);

/* Makes the context hold one row of logits, sequence seq's, as after a
 * decode whose only output was that sequence's last token (a session load);
 * returns the row to fill. */
float *mf_context_one_logit_row(mf_context *ctx, int32_t seq);
/* Logits of seq's last token in the last decode, or NULL (not in it, or not flagged). */
const float *mf_context_seq_logits(const mf_context *ctx, int32_t seq);

#endif
