/* context.c - context creation and teardown (memory planned up front: KV
 * cache sized from n_ctx and n_seq_max, scratch from n_batch). Decoding is
 * in batch.c, sequence operations in seq.c. */
#include "engine/context.h"
#include "core/log.h"
#include "backends/registry.h"
#include "engine/profile.h"
#include "core/alloc.h"
#include "core/env.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_N_CTX 4096
#define DEFAULT_N_BATCH 512

mf_context_params mf_context_default_params(void) {
    mf_context_params p = {0};
    p.kv_type = MF_KV_F16;
    p.pooling = MF_POOLING_UNSPECIFIED;
    return p;
}

static uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

/* One backend's activation buffers; head: it runs the output head (the
 * logits scratch) */
static mf_status alloc_acts(mf_context *ctx, mf_backend *be, mf_scratch *s, bool head) {
    const mf_hparams *hp = &ctx->model->hp;
    const size_t B = ctx->n_batch;
    const size_t qkv = (size_t)hp->n_head * hp->head_dim_k + (size_t)hp->n_head_kv * (hp->head_dim_k + hp->head_dim_v);
    size_t ff = hp->n_ff;
    if (hp->n_ff_exp > ff) ff = hp->n_ff_exp;
    if (hp->n_ff_shexp > ff) ff = hp->n_ff_shexp;
    const size_t wide = ff > qkv ? ff : qkv;
    s->x = be->ops->alloc(be, B * hp->n_embd);
    s->xn = be->ops->alloc(be, B * hp->n_embd);
    s->q = be->ops->alloc(be, B * hp->n_head * hp->head_dim_k);
    s->k = be->ops->alloc(be, B * hp->n_head_kv * hp->head_dim_k);
    s->v = be->ops->alloc(be, B * hp->n_head_kv * hp->head_dim_v);
    s->att = be->ops->alloc(be, B * hp->n_head * hp->head_dim_v);
    s->o = be->ops->alloc(be, B * hp->n_embd);
    s->gate = be->ops->alloc(be, B * wide);
    s->up = be->ops->alloc(be, B * wide);
    s->act = be->ops->alloc(be, B * 2 * ff);
    if (head) {
        ctx->logit_rows = MF_LOGIT_ROWS;
        if (!be->ops->host_memory)
            ctx->logit_rows = B < MF_LOGIT_ROWS_DEV ? (B > MF_LOGIT_ROWS ? (int)B : MF_LOGIT_ROWS) : MF_LOGIT_ROWS_DEV;
    }
    s->logits = be->ops->alloc(be, head ? (size_t)ctx->logit_rows * hp->n_vocab : 1);
    if (!s->x || !s->xn || !s->q || !s->k || !s->v || !s->att || !s->o || !s->gate || !s->up || !s->act || !s->logits)
        return mf_err(MF_ERR_NOMEM, "out of memory for activation buffers (n_batch %u)", ctx->n_batch);
    if (hp->n_expert) {
        const size_t X = hp->n_expert, K = hp->n_expert_used, F = hp->n_ff_exp;
        const size_t wide_e = F > hp->n_embd ? F : hp->n_embd;
        s->router = be->ops->alloc(be, B * X);
        s->moe_sel = be->ops->alloc(be, B * K); /* int32 expert ids, float-sized */
        s->moe_w = be->ops->alloc(be, B * K);
        s->moe_gate = be->ops->alloc(be, B * K * F);
        s->moe_up = be->ops->alloc(be, B * K * F);
        s->moe_act = be->ops->alloc(be, B * K * F);
        s->moe_in = be->ops->alloc(be, B * K * wide_e);
        s->moe_out = be->ops->alloc(be, B * K * wide_e);
        s->moe_slots = be->ops->alloc(be, B * K * hp->n_embd);
        if (!s->router || !s->moe_sel || !s->moe_w || !s->moe_gate || !s->moe_up || !s->moe_act || !s->moe_in ||
            !s->moe_out || !s->moe_slots)
            return mf_err(MF_ERR_NOMEM, "out of memory for expert buffers");
    }
    return MF_OK;
}

static mf_status alloc_scratch(mf_context *ctx) {
    const mf_hparams *hp = &ctx->model->hp;
    const size_t B = ctx->n_batch;
    mf_status st = alloc_acts(ctx, ctx->be, &ctx->s, true);
    if (!st && ctx->lo.be) st = alloc_acts(ctx, ctx->lo.be, &ctx->lo.s, false);
    if (st) return st;
    /* step arrays and host-side output buffers */
    mf_step_buf *sb = &ctx->sb;
    const size_t maxp = ctx->kv.max_pages;
    sb->tokens = malloc(B * sizeof *sb->tokens);
    sb->pos = malloc(B * sizeof *sb->pos);
    sb->cell = malloc(B * sizeof *sb->cell);
    sb->seq = malloc(B * sizeof *sb->seq);
    sb->out_rows = malloc(B * sizeof *sb->out_rows);
    sb->seqs = malloc(B * sizeof *sb->seqs);
    sb->pages = malloc(B * maxp * sizeof *sb->pages);
    ctx->seq_scratch = malloc((ctx->n_seq_max + 1) * sizeof *ctx->seq_scratch);
    ctx->seq_last_row = malloc(ctx->n_seq_max * sizeof *ctx->seq_last_row);
    if (!ctx->seq_last_row || !ctx->seq_scratch || !sb->tokens || !sb->pos || !sb->cell || !sb->seq || !sb->out_rows || !sb->seqs || !sb->pages)
        return mf_err(MF_ERR_NOMEM, "out of memory for step arrays");
    if (ctx->ffn_cb && !(ctx->ffn_add = malloc(B * hp->n_embd * sizeof(float))))
        return mf_err(MF_ERR_NOMEM, "out of memory for the FFN callback's buffer");
    if (ctx->embeddings) {
        const size_t E = hp->n_embd, S = ctx->n_seq_max;
        ctx->embd_rows = malloc(B * E * sizeof(float));
        ctx->pool_sum = malloc(S * E * sizeof(double));
        ctx->pooled = malloc(S * E * sizeof(float));
        ctx->pool_n = calloc(S, sizeof(int32_t));
        if (!ctx->embd_rows || !ctx->pool_sum || !ctx->pooled || !ctx->pool_n)
            return mf_err(MF_ERR_NOMEM, "out of memory for embedding buffers");
    }
    return MF_OK;
}

static mf_pooling resolve_pooling(const mf_model *m, mf_pooling asked) {
    if (asked != MF_POOLING_UNSPECIFIED) return asked;
    return m->hp.pooling >= 0 ? (mf_pooling)m->hp.pooling : (mf_pooling)-2;
}

mf_status mf_context_new(mf_model *model, const mf_context_params *params, mf_context **out) {
    *out = NULL;
    if (!model->layers) return mf_err(MF_ERR_INVALID_ARG, "model was loaded vocabulary-only; it cannot run");
    mf_context_params p = params ? *params : mf_context_default_params();
    const mf_hparams *hp = &model->hp;
    if (p.kv_type != MF_KV_F32 && p.kv_type != MF_KV_F16 && p.kv_type != MF_KV_Q8_0)
        return mf_err(MF_ERR_INVALID_ARG, "unknown KV cache type %d", (int)p.kv_type);
    if (p.n_seq_max > 4096) return mf_err(MF_ERR_INVALID_ARG, "n_seq_max %u is more than 4096", p.n_seq_max);
    const mf_pooling pool = resolve_pooling(model, p.pooling);
    if (p.embeddings && (pool < MF_POOLING_NONE || pool > MF_POOLING_LAST))
        return mf_err(MF_ERR_UNSUPPORTED, "pooling type %d (from %s) is not supported (none, mean, cls, last are)",
                      model->hp.pooling, p.pooling == MF_POOLING_UNSPECIFIED ? "the model file" : "the parameters");
    if (hp->n_expert > MF_MAX_EXPERTS || hp->n_expert_used > MF_MAX_EXPERTS_USED)
        return mf_err(MF_ERR_UNSUPPORTED, "%u experts with %u per token: at most %d and %d are supported", hp->n_expert,
                      hp->n_expert_used, MF_MAX_EXPERTS, MF_MAX_EXPERTS_USED);
    mf_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return mf_err(MF_ERR_NOMEM, "out of memory");
    ctx->model = model;
    /* a sequence holds at most the trained context; the cache holds n_ctx
     * positions in all (with one sequence, the two are the same) */
    ctx->n_seq_max = p.n_seq_max ? p.n_seq_max : 1;
    uint32_t n_cells = p.n_ctx ? p.n_ctx : DEFAULT_N_CTX;
    ctx->n_ctx = n_cells < hp->n_ctx_train ? n_cells : hp->n_ctx_train;
    if (ctx->n_seq_max == 1) n_cells = ctx->n_ctx;
    ctx->n_batch = p.n_batch ? p.n_batch : DEFAULT_N_BATCH;
    if (ctx->n_batch > n_cells) ctx->n_batch = n_cells;
    ctx->kv_type = p.kv_type;
    ctx->embeddings = p.embeddings;
    ctx->pooling = p.embeddings ? pool : MF_POOLING_NONE;
    ctx->abort_cb = p.abort_cb;
    ctx->abort_ud = p.abort_ud;
    ctx->layer_cb = p.layer_cb;
    ctx->layer_ud = p.layer_ud;
    ctx->ffn_cb = p.ffn_cb;
    ctx->ffn_ud = p.ffn_ud;

    uint32_t widest = max_u32(max_u32(hp->n_embd, hp->n_ff), hp->n_head * hp->head_dim_v);
    widest = max_u32(widest, max_u32(hp->n_ff_exp, hp->n_ff_shexp));
    ctx->tp = p.threadpool;
    mf_backend_config bc = {p.n_threads, p.threadpool ? p.threadpool->pool : NULL, (int)ctx->n_batch, (int)widest,
                            ctx->n_ctx, p.verbose};
    /* the model's weights were loaded for one backend: contexts run there */
    const char *bname = p.backend ? p.backend : model->backend;
    if (model->backend && strcmp(bname, model->backend)) {
        free(ctx);
        return mf_err(MF_ERR_INVALID_ARG, "backend \"%s\": this model's weights were loaded for \"%s\" (mf_model_params.backend)",
                      bname, model->backend);
    }
    mf_status s = mf_backend_create(bname, &bc, &ctx->be);
    if (s) {
        free(ctx);
        return s;
    }
    if ((ctx->layer_cb || ctx->ffn_cb) && !ctx->be->ops->host_memory) {
        mf_context_free(ctx);
        return mf_err(MF_ERR_UNSUPPORTED, "the %s backend keeps activations off the host: no per-layer or FFN callback",
                      bname ? bname : "cpu");
    }
    /* a split model: its first layers on the CPU, beside the device */
    const uint32_t n_lo = model->n_cpu_layers < hp->n_layer ? model->n_cpu_layers : 0;
    if (n_lo) {
        s = mf_backend_create("cpu", &bc, &ctx->lo.be);
        if (s) {
            mf_context_free(ctx);
            return s;
        }
        ctx->lo.n_layer = n_lo;
    }
    if (mf_env_on("MINFER_OP_PROFILE")) {
        ctx->be = mf_profile_wrap(ctx->be);
        if (ctx->lo.be) ctx->lo.be = mf_profile_wrap(ctx->lo.be);
    }
    s = mf_kv_init(&ctx->kv, n_cells, ctx->n_ctx, ctx->n_seq_max);
    mf_kv_desc kd = {p.kv_type, ctx->kv.n_pages, MF_KV_PAGE, hp->n_layer - n_lo, hp->n_head_kv * hp->head_dim_k,
                     hp->n_head_kv * hp->head_dim_v, hp->head_dim_k, hp->head_dim_v};
    if (!s) s = ctx->be->ops->kv_init(ctx->be, &kd);
    if (!s && n_lo) {
        kd.n_layer = n_lo;
        s = ctx->lo.be->ops->kv_init(ctx->lo.be, &kd);
    }
    if (!s) s = alloc_scratch(ctx);
    if (!s) s = mf_batch_init(&ctx->one, 1);
    if (s) {
        mf_context_free(ctx);
        return s;
    }
    if (p.verbose)
        mf_log(MF_LOG_INFO, "minfer: context n_ctx %u, n_batch %u, %u sequences, KV cache %s in %u pages of %u positions\n",
                ctx->n_ctx, ctx->n_batch, ctx->n_seq_max,
                p.kv_type == MF_KV_F16 ? "f16" : p.kv_type == MF_KV_Q8_0 ? "q8_0" : "f32", ctx->kv.n_pages, MF_KV_PAGE);
    *out = ctx;
    return MF_OK;
}

void mf_context_free(mf_context *ctx) {
    if (!ctx) return;
    if (ctx->be && ctx->be->ops->host_free) { /* the backend's host memory goes before the backend */
        ctx->be->ops->host_free(ctx->be, ctx->logits);
        ctx->be->ops->host_free(ctx->be, ctx->embd);
        ctx->logits = ctx->embd = NULL;
    }
    if (ctx->be) ctx->be->ops->destroy(ctx->be);
    if (ctx->lo.be) ctx->lo.be->ops->destroy(ctx->lo.be);
    mf_kv_free(&ctx->kv);
    mf_step_buf *sb = &ctx->sb;
    free(sb->tokens);
    free(sb->pos);
    free(sb->cell);
    free(sb->seq);
    free(sb->out_rows);
    free(sb->seqs);
    free(sb->pages);
    free(ctx->logits);
    free(ctx->embd);
    free(ctx->entry_row);
    free(ctx->out_entry);
    free(ctx->order);
    free(ctx->embd_rows);
    free(ctx->ffn_add);
    free(ctx->pool_sum);
    free(ctx->pooled);
    free(ctx->pool_n);
    mf_batch_free(&ctx->one);
    free(ctx->seq_scratch);
    free(ctx->seq_last_row);
    free(ctx);
}

uint32_t mf_context_n_ctx(const mf_context *ctx) { return ctx->n_ctx; }
uint32_t mf_context_n_seq_max(const mf_context *ctx) { return ctx->n_seq_max; }
mf_pooling mf_context_pooling(const mf_context *ctx) { return ctx->pooling; }
uint32_t mf_context_n_past(const mf_context *ctx) { return ctx->kv.seq[0].n_pos; }

/* a split model's threads are its CPU side's */
int32_t mf_context_n_threads(const mf_context *ctx) {
    const mf_backend *be = ctx->lo.be ? ctx->lo.be : ctx->be;
    return be->ops->n_threads((mf_backend *)be);
}

mf_backend *mf_context_kv_be(const mf_context *ctx, uint32_t layer, int *local) {
    if (ctx->lo.be && layer < ctx->lo.n_layer) {
        *local = (int)layer;
        return ctx->lo.be;
    }
    *local = (int)(layer - (ctx->lo.be ? ctx->lo.n_layer : 0));
    return ctx->be;
}

mf_status mf_context_set_resume(mf_context *ctx, int32_t layer, const float *x, int32_t n_rows) {
    if (!x) {
        ctx->resume_x = NULL, ctx->resume_layer = 0, ctx->resume_rows = 0;
        return MF_OK;
    }
    const uint32_t L = ctx->model->hp.n_layer;
    if (layer < 1 || (uint32_t)layer >= L)
        return mf_err(MF_ERR_INVALID_ARG, "resume layer %d is out of range (1..%u)", layer, L - 1);
    if (n_rows < 1 || (uint32_t)n_rows > ctx->n_batch)
        return mf_err(MF_ERR_INVALID_ARG, "resume rows %d: one forward pass holds 1..%u", n_rows, ctx->n_batch);
    /* the rows are copied into the backend's residual buffer as host memory */
    if (!ctx->be->ops->host_memory || ctx->embeddings)
        return mf_err(MF_ERR_UNSUPPORTED, "resuming at a layer needs a host-memory backend and a logits context");
    ctx->resume_x = x, ctx->resume_layer = layer, ctx->resume_rows = n_rows;
    return MF_OK;
}

mf_status mf_context_set_threads(mf_context *ctx, int32_t n_threads) {
    if (n_threads < 0 || n_threads > 1024) return mf_err(MF_ERR_INVALID_ARG, "thread count %d is out of range", n_threads);
    mf_backend *be = ctx->lo.be ? ctx->lo.be : ctx->be;
    return be->ops->set_threads(be, n_threads);
}
