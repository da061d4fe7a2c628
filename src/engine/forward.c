/* forward.c - the transformer forward pass, written once for every family:
 * it reads the model's architecture traits and calls backend ops. Prefill (many
 * tokens) and decode (one token) are the same code path. */
#include "engine/context.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

#define OP(ctx) ((ctx)->be->ops)

static void attention_block(mf_context *ctx, int il, int n) {
    const mf_model *m = ctx->model;
    const mf_hparams *hp = &m->hp;
    const mf_layer *L = &m->layers[il];
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;
    mf_scratch *s = &ctx->s;

    op->norm(be, m->arch->norm, s->x, L->attn_norm, L->attn_norm_b, n, (int)hp->n_embd, hp->norm_eps, s->xn);
    op->matmul(be, L->wq, s->xn, n, s->q);
    op->matmul(be, L->wk, s->xn, n, s->k);
    op->matmul(be, L->wv, s->xn, n, s->v);

    if (m->arch->rope != MF_ROPE_NONE) {
        mf_rope_params rp = {m->arch->rope, (int)hp->n_rot, L->rope_base, L->rope_scale};
        op->rope(be, s->q, n, (int)hp->n_head, (int)hp->head_dim_k, ctx->pos, &rp);
        op->rope(be, s->k, n, (int)hp->n_head_kv, (int)hp->head_dim_k, ctx->pos, &rp);
    }
    op->kv_store(be, il, s->k, s->v, n, ctx->n_past);

    mf_attn_params ap = {
        .n_head = (int)hp->n_head,
        .n_head_kv = (int)hp->n_head_kv,
        .head_dim_k = (int)hp->head_dim_k,
        .head_dim_v = (int)hp->head_dim_v,
        .scale = 1.0f / sqrtf((float)hp->head_dim_k),
        .softcap = hp->attn_softcap,
        .window = L->swa ? (int)hp->n_swa : 0,
    };
    op->attention(be, il, s->q, n, ctx->n_past, &ap, s->att);
    op->matmul(be, L->wo, s->att, n, s->o);
    op->add(be, s->x, s->o, (size_t)n * hp->n_embd);
}

static void ffn_block(mf_context *ctx, int il, int n) {
    const mf_model *m = ctx->model;
    const mf_hparams *hp = &m->hp;
    const mf_layer *L = &m->layers[il];
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;
    mf_scratch *s = &ctx->s;

    op->norm(be, m->arch->norm, s->x, L->ffn_norm, L->ffn_norm_b, n, (int)hp->n_embd, hp->norm_eps, s->xn);
    op->matmul(be, L->ffn_gate, s->xn, n, s->gate);
    op->matmul(be, L->ffn_up, s->xn, n, s->up);
    op->glu(be, m->arch->ffn, s->gate, s->up, (size_t)n * hp->n_ff, s->act);
    op->matmul(be, L->ffn_down, s->act, n, s->o);
    op->add(be, s->x, s->o, (size_t)n * hp->n_embd);
}

/* Output norm + LM head for rows [r0, r0+nr) of the batch -> host logits. */
static void output_rows(mf_context *ctx, int r0, int nr, int dst_row) {
    const mf_model *m = ctx->model;
    const mf_hparams *hp = &m->hp;
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;
    mf_scratch *s = &ctx->s;
    const float *xr = s->x + (size_t)r0 * hp->n_embd;
    op->norm(be, m->arch->norm, xr, m->output_norm, m->output_norm_b, nr, (int)hp->n_embd, hp->norm_eps, s->xn);
    op->matmul(be, m->output, s->xn, nr, s->logits);
    op->download(be, s->logits, (size_t)nr * hp->n_vocab, ctx->logits + (size_t)dst_row * hp->n_vocab);
}

mf_status mf_forward(mf_context *ctx, const mf_token *tokens, int n, bool all, int row0) {
    const mf_model *m = ctx->model;
    const mf_hparams *hp = &m->hp;
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;

    for (int i = 0; i < n; i++) ctx->pos[i] = (int32_t)(ctx->n_past + (uint32_t)i);
    op->get_rows(be, m->token_embd, tokens, n, ctx->s.x);
    if (hp->embd_scale != 1.0f) op->scale(be, ctx->s.x, hp->embd_scale, (size_t)n * hp->n_embd);

    for (uint32_t il = 0; il < hp->n_layer; il++) {
        attention_block(ctx, (int)il, n);
        ffn_block(ctx, (int)il, n);
    }

    if (row0 < 0) {
        /* a chunk that only fills the cache: no output head */
    } else if (all) {
        for (int r = 0; r < n; r += MF_LOGIT_ROWS) {
            int nr = n - r < MF_LOGIT_ROWS ? n - r : MF_LOGIT_ROWS;
            output_rows(ctx, r, nr, row0 + r);
        }
    } else {
        output_rows(ctx, n - 1, 1, row0);
    }
    ctx->n_past += (uint32_t)n;
    return MF_OK;
}
