/* context.h - a context: one conversation's KV cache, scratch activations and
 * backend (with its thread pool), on top of a shared read-only model. */
#ifndef MF_ENGINE_CONTEXT_H
#define MF_ENGINE_CONTEXT_H

#include "engine/backend.h"
#include "model/model.h"

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
    float *logits; /* device logits        [MF_LOGIT_ROWS][n_vocab] */
    /* mixture of experts */
    float *router;         /* [n_batch][n_expert] */
    float *moe_in, *moe_out; /* rows routed to one expert [n_batch][n_embd] */
    float *moe_slots;      /* [n_batch][n_expert_used][n_embd] */
} mf_scratch;

/* Host-side routing of one MoE layer, planned per batch (allocated once). */
typedef struct mf_moe_plan {
    float *probs;          /* [n_batch][n_expert] */
    int32_t *sel;          /* [n_batch][k] selected experts */
    float *w;              /* [n_batch][k] their weights */
    int32_t *rows, *slots; /* rows routed to the current expert and their (t, k) slot */
    float *scales;
} mf_moe_plan;

/* Output-head rows computed per call when every position's logits are wanted:
 * bounds the scratch for large vocabularies. */
#define MF_LOGIT_ROWS 16

struct mf_context {
    mf_model *model;
    mf_backend *be;
    uint32_t n_ctx, n_batch;
    int n_threads;
    mf_kv_type kv_type;
    bool verbose;
    uint32_t n_past;
    mf_scratch s;
    mf_moe_plan moe;
    int32_t *pos;        /* host positions of the current batch */
    float *logits;       /* host logits of the last decode */
    size_t logits_cap;   /* in rows */
    int32_t n_logits;    /* rows held */
    bool all_logits;
};

/* One forward pass over n <= n_batch tokens at positions ctx->n_past...
 * Writes logits for every token (all) or only the last into ctx->logits
 * starting at row `row0`; row0 < 0 skips the output head (cache fill only). */
mf_status mf_forward(mf_context *ctx, const mf_token *tokens, int n, bool all, int row0);

#endif
