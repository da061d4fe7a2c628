/* forward.c - the transformer forward pass, written once for every family:
 * it reads the model's architecture traits and calls backend ops. Prefill (many
 * tokens) and decode (one token) are the same code path.
 *
 * Per layer:  x += [post_norm](attn(norm(x)))  ;  x += [post_norm](ffn(norm(x)))
 * with the residual scale (granite) applied to each branch before the add. */
#include "engine/context.h"
#include "core/error.h"

#include <math.h>
#include <string.h>

#define OP(ctx) ((ctx)->be->ops)

/* y = x W^T (+ b); with res, also res += y */
static void linear(mf_context *ctx, mf_weight w, mf_weight b, const float *x, int n, float *y, float *res) {
    if (!b && !res) {
        OP(ctx)->matmul(ctx->be, w, x, n, y);
        return;
    }
    float *const out[1] = {y};
    OP(ctx)->matmul_n(ctx->be, &w, &b, 1, x, n, out, res);
}

/* The branch output o joins the residual stream x inside the projection's
 * epilogue unless a post-norm or residual scale comes between them. */
static bool residual_fuses(const mf_context *ctx, mf_weight post_norm) {
    return !post_norm && ctx->model->hp.residual_scale == 1.0f;
}

static void attention_block(mf_context *ctx, const mf_step *st, int il, int n) {
    const mf_model *m = ctx->model;
    const mf_hparams *hp = &m->hp;
    const mf_layer *L = &m->layers[il];
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;
    mf_scratch *s = &ctx->s;
    const int QD = (int)(hp->n_head * hp->head_dim_k), KD = (int)(hp->n_head_kv * hp->head_dim_k);
    const int VD = (int)(hp->n_head_kv * hp->head_dim_v);

    op->norm(be, m->arch->norm, s->x, L->attn_norm, L->attn_norm_b, n, (int)hp->n_embd, hp->norm_eps, s->xn);
    if (L->wqkv) {
        /* fused projection: rows are [Q ; K ; V] */
        linear(ctx, L->wqkv, L->bqkv, s->xn, n, s->gate, NULL);
        op->copy_cols(be, s->gate, QD + KD + VD, 0, QD, n, s->q);
        op->copy_cols(be, s->gate, QD + KD + VD, QD, KD, n, s->k);
        op->copy_cols(be, s->gate, QD + KD + VD, QD + KD, VD, n, s->v);
    } else {
        const mf_weight w[3] = {L->wq, L->wk, L->wv}, b[3] = {L->bq, L->bk, L->bv};
        float *const out[3] = {s->q, s->k, s->v};
        op->matmul_n(be, w, b, 3, s->xn, n, out, NULL);
    }
    /* each of Q and K normed then rotated, so a backend may do the two in
     * one pass per head */
    mf_rope_params rp = {0};
    const bool rope = m->arch->rope != MF_ROPE_NONE;
    if (rope) {
        /* frequency factors: Llama 3.1's rope_freqs, or Phi-3's long/short
         * pair chosen by whether this context exceeds the trained one */
        mf_weight ff = m->rope_freqs ? m->rope_freqs : ctx->n_ctx > hp->n_ctx_orig ? m->rope_long : m->rope_short;
        rp = (mf_rope_params){m->arch->rope, (int)hp->n_rot, L->rope_base, L->rope_scale,
                              ff,
                              hp->yarn_ext_factor, hp->yarn_attn_factor, {L->yarn_corr[0], L->yarn_corr[1]}};
    }
    if (L->q_norm)
        op->norm(be, MF_NORM_RMS, s->q, L->q_norm, NULL, n * (int)hp->n_head, (int)hp->head_dim_k, hp->norm_eps, s->q);
    if (rope) op->rope(be, s->q, (int)hp->n_head, (int)hp->head_dim_k, &rp);
    if (L->q_norm)
        op->norm(be, MF_NORM_RMS, s->k, L->k_norm, NULL, n * (int)hp->n_head_kv, (int)hp->head_dim_k, hp->norm_eps, s->k);
    if (rope) op->rope(be, s->k, (int)hp->n_head_kv, (int)hp->head_dim_k, &rp);
    op->kv_store(be, il - (int)ctx->kv_base, s->k, s->v);

    mf_attn_params ap = {
        .n_head = (int)hp->n_head,
        .n_head_kv = (int)hp->n_head_kv,
        .head_dim_k = (int)hp->head_dim_k,
        .head_dim_v = (int)hp->head_dim_v,
        .scale = hp->attn_scale,
        .softcap = hp->attn_softcap,
        .window = L->swa ? (int)hp->n_swa : 0,
    };
    op->attention(be, il - (int)ctx->kv_base, s->q, &ap, s->att);
    if (residual_fuses(ctx, L->post_attn_norm)) {
        linear(ctx, L->wo, L->bo, s->att, n, s->o, s->x);
        return;
    }
    linear(ctx, L->wo, L->bo, s->att, n, s->o, NULL);
    if (L->post_attn_norm)
        op->norm(be, MF_NORM_RMS, s->o, L->post_attn_norm, NULL, n, (int)hp->n_embd, hp->norm_eps, s->o);
    if (hp->residual_scale != 1.0f) op->scale(be, s->o, hp->residual_scale, (size_t)n * hp->n_embd);
    op->add(be, s->x, s->o, (size_t)n * hp->n_embd);
}

/* A dense FFN over `n` rows of `in` into `out`. `gate` NULL with `fused` set:
 * `up` holds [gate ; up] (phi3). Non-gated GELU families have no gate. */
typedef struct ffn_w {
    mf_weight gate, up, down, up_b, down_b;
    bool fused;
    int n_ff;
} ffn_w;

static void dense_ffn(mf_context *ctx, const ffn_w *f, const float *in, int n, float *out, float *res) {
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;
    mf_scratch *s = &ctx->s;
    const mf_ffn_type act = ctx->model->arch->ffn;
    if (act == MF_FFN_GELU) {
        linear(ctx, f->up, f->up_b, in, n, s->up, NULL);
        op->glu(be, MF_FFN_GELU, s->up, NULL, (size_t)n * f->n_ff, s->act);
    } else {
        if (f->fused) {
            op->matmul(be, f->up, in, n, s->act);
            op->copy_cols(be, s->act, 2 * f->n_ff, 0, f->n_ff, n, s->gate);
            op->copy_cols(be, s->act, 2 * f->n_ff, f->n_ff, f->n_ff, n, s->up);
        } else {
            const mf_weight w[2] = {f->gate, f->up}, b[2] = {NULL, f->up_b};
            float *const out[2] = {s->gate, s->up};
            op->matmul_n(be, w, b, 2, in, n, out, NULL);
        }
        op->glu(be, act, s->gate, s->up, (size_t)n * f->n_ff, s->act);
    }
    linear(ctx, f->down, f->down_b, s->act, n, out, res);
}

/* Mixture of experts: the router's logits, then routing as a backend op
 * (softmax or sigmoid over all experts, the top k per token, weights
 * optionally renormalised and scaled), each expert's products indexed by the
 * routing (no host round trip), outputs weighted and summed per token in rank
 * order. */
static void moe_ffn(mf_context *ctx, const mf_layer *L, int n) {
    const mf_model *m = ctx->model;
    const mf_hparams *hp = &m->hp;
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;
    mf_scratch *s = &ctx->s;
    const int X = (int)hp->n_expert, K = (int)hp->n_expert_used, E = (int)hp->n_embd, F = (int)hp->n_ff_exp;
    int32_t *sel = (int32_t *)s->moe_sel;

    op->matmul(be, L->ffn_gate_inp, s->xn, n, s->router);
    const mf_moe_route rp = {X, K, hp->moe_sigmoid, hp->moe_norm_topk, hp->moe_scale};
    op->moe_route(be, s->router, n, &rp, sel, s->moe_w);
    const size_t slots = (size_t)n * K;
    if (m->arch->ffn == MF_FFN_GELU) {
        op->matmul_id(be, L->up_exp, X, s->xn, false, n, K, sel, s->moe_up, s->moe_in, s->moe_out);
        op->glu(be, MF_FFN_GELU, s->moe_up, NULL, slots * F, s->moe_act);
    } else {
        op->matmul_id(be, L->gate_exp, X, s->xn, false, n, K, sel, s->moe_gate, s->moe_in, s->moe_out);
        op->matmul_id(be, L->up_exp, X, s->xn, false, n, K, sel, s->moe_up, s->moe_in, s->moe_out);
        op->glu(be, m->arch->ffn, s->moe_gate, s->moe_up, slots * F, s->moe_act);
    }
    op->matmul_id(be, L->down_exp, X, s->moe_act, true, n, K, sel, s->moe_slots, s->moe_in, s->moe_out);
    op->scale_rows(be, s->moe_slots, s->moe_w, false, (int)slots, E);
    op->sum_slots(be, s->moe_slots, n, K, E, s->o);

    if (L->ffn_up_shexp) {
        /* shared expert, gated per token by sigmoid(w . x) when a gate exists */
        ffn_w f = {.gate = L->ffn_gate_shexp, .up = L->ffn_up_shexp, .down = L->ffn_down_shexp, .n_ff = (int)hp->n_ff_shexp};
        dense_ffn(ctx, &f, s->xn, n, s->moe_out, NULL);
        if (L->ffn_gate_inp_shexp) {
            op->matmul(be, L->ffn_gate_inp_shexp, s->xn, n, s->router);
            op->scale_rows(be, s->moe_out, s->router, true, n, E);
        }
        op->add(be, s->o, s->moe_out, (size_t)n * E);
    }
}

static mf_status ffn_block(mf_context *ctx, const mf_step *st, int il, int n) {
    const mf_model *m = ctx->model;
    const mf_hparams *hp = &m->hp;
    const mf_layer *L = &m->layers[il];
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;
    mf_scratch *s = &ctx->s;

    op->norm(be, m->arch->norm, s->x, L->ffn_norm, L->ffn_norm_b, n, (int)hp->n_embd, hp->norm_eps, s->xn);
    int over = 0;
    const size_t nE = (size_t)n * hp->n_embd;
    if (ctx->ffn_cb) {
        /* an override (the vindex's walk FFN, an edit overlay) on host rows */
        op->synchronize(be);
        over = ctx->ffn_cb(il, s->xn, s->o, n, (int)hp->n_embd, ctx->sb.seq, st->pos, ctx->ffn_ud);
        if (over < 0 || over > 2) return mf_err(MF_ERR_ABORTED, "decode aborted by the FFN callback at layer %d", il);
        /* 2: s->o holds an addition to the model's own FFN; keep it aside */
        if (over == 2) memcpy(ctx->ffn_add, s->o, nE * sizeof(float));
    }
    if (over == 1) {
        /* out is in s->o: the post-norm and residual below */
    } else if (hp->n_expert) {
        moe_ffn(ctx, L, n);
    } else {
        ffn_w f = {.gate = L->ffn_gate, .up = L->ffn_gate_up ? L->ffn_gate_up : L->ffn_up, .down = L->ffn_down,
                   .up_b = L->ffn_up_b, .down_b = L->ffn_down_b, .fused = L->ffn_gate_up != NULL, .n_ff = (int)hp->n_ff};
        if (residual_fuses(ctx, L->post_ffn_norm)) {
            dense_ffn(ctx, &f, s->xn, n, s->o, s->x);
            if (over == 2) op->add(be, s->x, ctx->ffn_add, nE);
            return MF_OK;
        }
        dense_ffn(ctx, &f, s->xn, n, s->o, NULL);
    }
    if (over == 2) op->add(be, s->o, ctx->ffn_add, nE);
    if (L->post_ffn_norm)
        op->norm(be, MF_NORM_RMS, s->o, L->post_ffn_norm, NULL, n, (int)hp->n_embd, hp->norm_eps, s->o);
    if (hp->residual_scale != 1.0f) op->scale(be, s->o, hp->residual_scale, (size_t)n * hp->n_embd);
    op->add(be, s->x, s->o, (size_t)n * hp->n_embd);
    return MF_OK;
}

/* Output norm + LM head for the step's flagged rows -> host logits from row
 * out_base on; with embeddings, the normed rows themselves (and pooling). */
static void output_rows(mf_context *ctx, const mf_step *st, int32_t out_base) {
    const mf_model *m = ctx->model;
    const mf_hparams *hp = &m->hp;
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;
    mf_scratch *s = &ctx->s;
    const size_t E = hp->n_embd;
    if (ctx->embeddings) {
        /* every row's final normed state (mean pooling needs all of them) */
        op->norm(be, m->arch->norm, s->x, m->output_norm, m->output_norm_b, st->n_tok, (int)E, hp->norm_eps, s->xn);
        float *h = ctx->embd_rows;
        op->download(be, s->xn, (size_t)st->n_tok * E, h);
        for (int j = 0; j < st->n_out; j++)
            memcpy(ctx->embd + (size_t)(out_base + j) * E, h + (size_t)st->out_rows[j] * E, E * sizeof(float));
        if (ctx->pooling == MF_POOLING_NONE) return;
        for (int i = 0; i < st->n_seq; i++) {
            const mf_step_seq *q = &st->seqs[i];
            const int32_t seq = ctx->sb.seq[q->row0];
            double *sum = ctx->pool_sum + (size_t)seq * E;
            for (int r = q->row0; r < q->row0 + q->n_rows; r++) {
                const float *row = h + (size_t)r * E;
                /* mean sums every row, last keeps overwriting, cls takes position 0 */
                if (ctx->pooling == MF_POOLING_CLS && st->pos[r] != 0) continue;
                if (ctx->pooling == MF_POOLING_MEAN)
                    for (size_t e = 0; e < E; e++) sum[e] += row[e];
                else
                    for (size_t e = 0; e < E; e++) sum[e] = row[e];
                ctx->pool_n[seq]++;
            }
        }
        return;
    }
    if (!st->n_out) return;
    const int lr = ctx->logit_rows;
    for (int r = 0; r < st->n_out; r += lr) {
        const int nr = st->n_out - r < lr ? st->n_out - r : lr;
        const size_t nl = (size_t)nr * hp->n_vocab;
        float *dst = ctx->logits + (size_t)(out_base + r) * hp->n_vocab;
        /* a host-memory backend writes the logits where the caller reads them */
        float *lg = op->host_memory ? dst : s->logits;
        const float *xr;
        if (nr == 1) {
            xr = s->x + (size_t)st->out_rows[r] * E;
        } else {
            op->gather_out(be, s->x, r, nr, (int)E, s->o);
            xr = s->o;
        }
        op->norm(be, m->arch->norm, xr, m->output_norm, m->output_norm_b, nr, (int)E, hp->norm_eps, s->xn);
        if (lg != dst && op->matmul_download && hp->logit_scale == 1.0f && !(hp->final_softcap > 0)) {
            op->matmul_download(be, m->output, s->xn, nr, lg, dst);
            continue;
        }
        op->matmul(be, m->output, s->xn, nr, lg);
        if (hp->logit_scale != 1.0f) op->scale(be, lg, 1.0f / hp->logit_scale, nl);
        if (hp->final_softcap > 0) op->softcap(be, lg, hp->final_softcap, nl);
        if (lg != dst) op->download(be, lg, nl, dst);
    }
}

static mf_status run_layers(mf_context *ctx, const mf_step *st, uint32_t il0, uint32_t il1) {
    const mf_hparams *hp = &ctx->model->hp;
    const int n = st->n_tok;
    for (uint32_t il = il0; il < il1; il++) {
        attention_block(ctx, st, (int)il, n);
        mf_status fs = ffn_block(ctx, st, (int)il, n);
        if (fs) return fs;
        if (ctx->layer_cb || ctx->abort_cb) {
            OP(ctx)->synchronize(ctx->be);
            if (ctx->layer_cb && !ctx->layer_cb((int)il, ctx->s.x, n, (int)hp->n_embd, ctx->sb.seq, st->pos, ctx->layer_ud))
                return mf_err(MF_ERR_ABORTED, "decode aborted by the layer callback after layer %u", il);
            if (ctx->abort_cb && ctx->abort_cb(ctx->abort_ud))
                return mf_err(MF_ERR_ABORTED, "decode aborted after layer %u", il);
        }
    }
    return MF_OK;
}

/* The residual stream's start: token (and position) embeddings. */
static void embed(mf_context *ctx, const mf_step *st) {
    const mf_model *m = ctx->model;
    const mf_hparams *hp = &m->hp;
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;
    const size_t nE = (size_t)st->n_tok * hp->n_embd;
    op->get_rows(be, m->token_embd, MF_STEP_TOKENS, ctx->s.x);
    if (hp->embd_scale != 1.0f) op->scale(be, ctx->s.x, hp->embd_scale, nE);
    if (m->pos_embd) {
        op->get_rows(be, m->pos_embd, MF_STEP_POSITIONS, ctx->s.o);
        op->add(be, ctx->s.x, ctx->s.o, nE);
    }
}

/* A split model's two sides trade places: the forward pass runs on
 * ctx->be / ctx->s, and those are the CPU's while its layers run. */
static void swap_sides(mf_context *ctx) {
    mf_backend *be = ctx->be;
    mf_scratch s = ctx->s;
    ctx->be = ctx->lo.be, ctx->s = ctx->lo.s;
    ctx->lo.be = be, ctx->lo.s = s;
}

/* The CPU's layers of a split model, from the embedding lookup on. On
 * return the device side runs again (whatever the status), and the CPU's
 * residual stream (ctx->lo.s.x) is final. */
static mf_status cpu_side(mf_context *ctx, const mf_step *st, uint32_t n_lo) {
    swap_sides(ctx);
    mf_status s = OP(ctx)->begin_step(ctx->be, st);
    if (!s) {
        embed(ctx, st);
        s = run_layers(ctx, st, 0, n_lo);
        const mf_status e = OP(ctx)->end_step(ctx->be);
        if (!s) s = e;
    }
    swap_sides(ctx);
    return s;
}

mf_status mf_forward(mf_context *ctx, const mf_step *st, int32_t out_base) {
    const mf_model *m = ctx->model;
    const mf_hparams *hp = &m->hp;
    const mf_backend_ops *op = OP(ctx);
    mf_backend *be = ctx->be;
    const int n = st->n_tok;
    if (ctx->resume_x && n != ctx->resume_rows)
        return mf_err(MF_ERR_INVALID_ARG, "resuming at layer %d: a forward pass of %d rows, the saved residuals are %d",
                      ctx->resume_layer, n, ctx->resume_rows);

    const uint32_t n_lo = ctx->lo.be ? ctx->lo.n_layer : 0;
    mf_status s;
    if (n_lo) {
        /* resuming needs a host-memory backend (mf_context_set_resume), so
         * never here */
        s = cpu_side(ctx, st, n_lo);
        if (!s) s = op->begin_step(be, st);
        if (s) return s;
        /* the residual stream crosses once per forward pass */
        op->upload(be, ctx->lo.s.x, (size_t)n * hp->n_embd, ctx->s.x);
        ctx->kv_base = n_lo;
    } else {
        s = op->begin_step(be, st);
        if (s) return s;
        if (ctx->resume_x) {
            /* the residual stream entering resume_layer, as a full pass had it:
             * the layers below would recompute the same bits */
            op->synchronize(be);
            memcpy(ctx->s.x, ctx->resume_x, (size_t)n * hp->n_embd * sizeof(float));
        } else {
            embed(ctx, st);
        }
    }
    if (!s) s = run_layers(ctx, st, n_lo ? n_lo : ctx->resume_x ? (uint32_t)ctx->resume_layer : 0, hp->n_layer);
    ctx->kv_base = 0;
    if (!s) output_rows(ctx, st, out_base);
    mf_status e = op->end_step(be);
    return s ? s : e;
}
