/* context.c - context creation (memory planned up front: KV cache sized from
 * n_ctx, scratch from n_batch), the mf_decode driver, and logits access. */
#include "engine/context.h"
#include "engine/profile.h"
#include "core/alloc.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_N_CTX 4096
#define DEFAULT_N_BATCH 512

mf_context_params mf_context_default_params(void) {
    mf_context_params p = {0};
    p.kv_type = MF_KV_F16;
    return p;
}

static uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

static mf_status alloc_scratch(mf_context *ctx) {
    const mf_hparams *hp = &ctx->model->hp;
    mf_backend *be = ctx->be;
    const size_t B = ctx->n_batch;
    mf_scratch *s = &ctx->s;
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
    s->logits = be->ops->alloc(be, (size_t)MF_LOGIT_ROWS * hp->n_vocab);
    if (!s->x || !s->xn || !s->q || !s->k || !s->v || !s->att || !s->o || !s->gate || !s->up || !s->act || !s->logits)
        return mf_err(MF_ERR_NOMEM, "out of memory for activation buffers (n_batch %u)", ctx->n_batch);
    if (hp->n_expert) {
        const size_t X = hp->n_expert, K = hp->n_expert_used;
        s->router = be->ops->alloc(be, B * X);
        s->moe_in = be->ops->alloc(be, B * hp->n_embd);
        s->moe_out = be->ops->alloc(be, B * hp->n_embd);
        s->moe_slots = be->ops->alloc(be, B * K * hp->n_embd);
        mf_moe_plan *p = &ctx->moe;
        p->probs = malloc(sizeof(float) * B * X);
        p->sel = malloc(sizeof(int32_t) * B * K);
        p->w = malloc(sizeof(float) * B * K);
        p->rows = malloc(sizeof(int32_t) * B);
        p->slots = malloc(sizeof(int32_t) * B);
        p->scales = malloc(sizeof(float) * B);
        if (!s->router || !s->moe_in || !s->moe_out || !s->moe_slots || !p->probs || !p->sel || !p->w || !p->rows ||
            !p->slots || !p->scales)
            return mf_err(MF_ERR_NOMEM, "out of memory for expert routing buffers");
    }
    ctx->pos = calloc(B, sizeof *ctx->pos);
    ctx->logits_cap = 1;
    ctx->logits = malloc(sizeof(float) * hp->n_vocab);
    if (!ctx->pos || !ctx->logits) return mf_err(MF_ERR_NOMEM, "out of memory");
    return MF_OK;
}

mf_status mf_context_new(mf_model *model, const mf_context_params *params, mf_context **out) {
    *out = NULL;
    if (!model->layers) return mf_err(MF_ERR_INVALID_ARG, "model was loaded vocabulary-only; it cannot run");
    mf_context_params p = params ? *params : mf_context_default_params();
    const mf_hparams *hp = &model->hp;
    mf_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return mf_err(MF_ERR_NOMEM, "out of memory");
    ctx->model = model;
    ctx->n_ctx = p.n_ctx ? p.n_ctx : DEFAULT_N_CTX;
    if (ctx->n_ctx > hp->n_ctx_train) ctx->n_ctx = hp->n_ctx_train;
    ctx->n_batch = p.n_batch ? p.n_batch : DEFAULT_N_BATCH;
    if (ctx->n_batch > ctx->n_ctx) ctx->n_batch = ctx->n_ctx;
    ctx->kv_type = p.kv_type;
    ctx->verbose = p.verbose;

    uint32_t widest = max_u32(max_u32(hp->n_embd, hp->n_ff), hp->n_head * hp->head_dim_v);
    widest = max_u32(widest, max_u32(hp->n_ff_exp, hp->n_ff_shexp));
    ctx->be = mf_cpu_backend_new(p.n_threads, (int)ctx->n_batch, (int)widest, ctx->n_ctx, p.verbose);
    if (!ctx->be) {
        free(ctx);
        return mf_err(MF_ERR_NOMEM, "cannot create the CPU backend (threads or memory)");
    }
    const char *prof = getenv("MINFER_OP_PROFILE");
    if (prof && strcmp(prof, "0")) ctx->be = mf_profile_wrap(ctx->be);
    mf_kv_desc kd = {p.kv_type, ctx->n_ctx, hp->n_layer, hp->n_head_kv * hp->head_dim_k, hp->n_head_kv * hp->head_dim_v,
                     hp->head_dim_k, hp->head_dim_v};
    mf_status s = ctx->be->ops->kv_init(ctx->be, &kd);
    if (!s) s = alloc_scratch(ctx);
    if (s) {
        mf_context_free(ctx);
        return s;
    }
    if (p.verbose)
        fprintf(stderr, "minfer: context n_ctx %u, n_batch %u, KV cache %s\n", ctx->n_ctx, ctx->n_batch,
                p.kv_type == MF_KV_F16 ? "f16" : p.kv_type == MF_KV_Q8_0 ? "q8_0" : "f32");
    *out = ctx;
    return MF_OK;
}

void mf_context_free(mf_context *ctx) {
    if (!ctx) return;
    if (ctx->be) ctx->be->ops->destroy(ctx->be);
    free(ctx->pos);
    free(ctx->logits);
    free(ctx->moe.probs);
    free(ctx->moe.sel);
    free(ctx->moe.w);
    free(ctx->moe.rows);
    free(ctx->moe.slots);
    free(ctx->moe.scales);
    free(ctx);
}

uint32_t mf_context_n_ctx(const mf_context *ctx) { return ctx->n_ctx; }
uint32_t mf_context_n_past(const mf_context *ctx) { return ctx->n_past; }

void mf_kv_truncate(mf_context *ctx, uint32_t n_keep) {
    if (n_keep < ctx->n_past) ctx->n_past = n_keep;
}

mf_status mf_decode(mf_context *ctx, const mf_token *tokens, int32_t n, bool all_logits) {
    const uint32_t n_vocab = ctx->model->hp.n_vocab;
    if (n <= 0) return mf_err(MF_ERR_INVALID_ARG, "mf_decode: empty batch");
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= n_vocab)
            return mf_err(MF_ERR_INVALID_ARG, "token id %d at batch index %d is out of range (vocabulary of %u)",
                          tokens[i], i, n_vocab);
    if ((uint64_t)ctx->n_past + (uint64_t)n > ctx->n_ctx)
        return mf_err(MF_ERR_CONTEXT_FULL, "context full: %u cached + %d new tokens exceed n_ctx %u", ctx->n_past, n,
                      ctx->n_ctx);
    size_t rows = all_logits ? (size_t)n : 1;
    if (rows > ctx->logits_cap) {
        float *nl = realloc(ctx->logits, rows * n_vocab * sizeof(float));
        if (!nl) return mf_err(MF_ERR_NOMEM, "out of memory for %zu rows of logits", rows);
        ctx->logits = nl;
        ctx->logits_cap = rows;
    }
    ctx->all_logits = all_logits;
    ctx->n_logits = (int32_t)rows;
    for (int32_t i = 0; i < n; i += (int32_t)ctx->n_batch) {
        int32_t nb = n - i < (int32_t)ctx->n_batch ? n - i : (int32_t)ctx->n_batch;
        bool last = i + nb == n;
        if (!all_logits && !last) {
            /* earlier chunks only fill the cache; their logits are not kept */
            mf_status s = mf_forward(ctx, tokens + i, nb, false, -1);
            if (s) return s;
            continue;
        }
        mf_status s = mf_forward(ctx, tokens + i, nb, all_logits, all_logits ? i : 0);
        if (s) return s;
    }
    return MF_OK;
}

const float *mf_get_logits(const mf_context *ctx, int32_t i) {
    if (ctx->n_logits == 0) return NULL;
    if (i < 0) i += ctx->n_logits;
    if (i < 0 || i >= ctx->n_logits) return NULL;
    return ctx->logits + (size_t)i * ctx->model->hp.n_vocab;
}
