/* load.c - GGUF -> mf_model: architecture lookup, hyperparameters from
 * `<arch>.*` metadata, and weights bound by name with their shapes checked, so
 * the forward pass can trust every dimension it reads. */
#include "model/model.h"
#include "core/error.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mf_model_params mf_model_default_params(void) {
    mf_model_params p = {0};
    return p;
}

/* "<arch>.<suffix>" */
static const char *akey(const mf_model *m, const char *suffix) {
    static _Thread_local char buf[256];
    snprintf(buf, sizeof buf, "%s.%s", m->arch->name, suffix);
    return buf;
}

/* Reads the sliding-window layout: `attention.sliding_window` (+ family
 * default), and `attention.sliding_window_pattern` as a period N (layer il
 * slides iff il % N < N-1) or as one bool per layer. */
static mf_status load_swa(mf_model *m) {
    const gguf_file *f = m->gguf;
    mf_hparams *hp = &m->hp;
    mf_status s;
    hp->n_swa = m->arch->swa_default ? 4096 : 0;
    if ((s = gguf_get_u32(f, akey(m, "attention.sliding_window"), false, &hp->n_swa))) return s;
    if (!m->arch->swa_period || hp->n_swa == 0) {
        hp->n_swa = 0; /* families without SWA support here ignore the key, as llama.cpp does (phi3) */
        return MF_OK;
    }
    uint32_t period = m->arch->swa_period;
    const gguf_value *pv = gguf_get(f, akey(m, "attention.sliding_window_pattern"));
    if (pv && pv->type == GGUF_ARR) {
        if (pv->arr.elem != GGUF_BOOL || pv->arr.n != hp->n_layer)
            return mf_err(MF_ERR_FORMAT, "%s: %s must be %u bools", f->path, akey(m, "attention.sliding_window_pattern"),
                          hp->n_layer);
        for (uint32_t il = 0; il < hp->n_layer; il++) m->layers[il].swa = gguf_arr_int(pv, il) != 0;
        return MF_OK;
    }
    if ((s = gguf_get_u32(f, akey(m, "attention.sliding_window_pattern"), false, &period))) return s;
    for (uint32_t il = 0; il < hp->n_layer; il++) m->layers[il].swa = period == 0 || il % period < period - 1;
    return MF_OK;
}

static mf_status load_rope(mf_model *m) {
    const gguf_file *f = m->gguf;
    mf_hparams *hp = &m->hp;
    mf_status s;
    hp->rope_base = 10000.0f;
    if ((s = gguf_get_f32(f, akey(m, "rope.freq_base"), false, &hp->rope_base))) return s;
    hp->rope_base_swa = hp->rope_base;
    if ((s = gguf_get_f32(f, akey(m, "rope.freq_base_swa"), false, &hp->rope_base_swa))) return s;
    hp->rope_scale = 1.0f;
    float lin = 0;
    if ((s = gguf_get_f32(f, akey(m, "rope.scale_linear"), false, &lin))) return s;
    if (lin > 0) hp->rope_scale = 1.0f / lin;
    char stype[64] = "";
    if ((s = gguf_get_str(f, akey(m, "rope.scaling.type"), false, stype, sizeof stype))) return s;
    const bool yarn = !strcmp(stype, "yarn");
    if (stype[0] && strcmp(stype, "none") != 0) {
        if (strcmp(stype, "linear") != 0 && !yarn)
            return mf_err(MF_ERR_UNSUPPORTED, "%s: RoPE scaling type '%s' is not supported (linear and yarn are)", f->path, stype);
        float factor = 0;
        if ((s = gguf_get_f32(f, akey(m, "rope.scaling.factor"), false, &factor))) return s;
        if (factor > 0) hp->rope_scale = 1.0f / factor;
    } else if (stype[0]) {
        hp->rope_scale = 1.0f; /* "none" never scales, whatever scale_linear says */
    }
    /* YaRN as llama.cpp applies it: extrapolation factor 1, magnitude
     * (1 + 0.1 ln factor) folded with the attention factor so that, without
     * a log multiplier, cos/sin keep unit magnitude */
    hp->yarn_ext_factor = yarn ? 1.0f : 0.0f;
    if ((s = gguf_get_f32(f, akey(m, "rope.scaling.yarn_ext_factor"), false, &hp->yarn_ext_factor))) return s;
    float rope_attn = 1.0f, log_mul = 0.0f, beta_fast = 32.0f, beta_slow = 1.0f;
    uint32_t orig_ctx = hp->n_ctx_train;
    if ((s = gguf_get_f32(f, akey(m, "rope.scaling.attn_factor"), false, &rope_attn))) return s;
    if ((s = gguf_get_f32(f, akey(m, "rope.scaling.yarn_log_multiplier"), false, &log_mul))) return s;
    if ((s = gguf_get_f32(f, akey(m, "rope.scaling.yarn_beta_fast"), false, &beta_fast))) return s;
    if ((s = gguf_get_f32(f, akey(m, "rope.scaling.yarn_beta_slow"), false, &beta_slow))) return s;
    if ((s = gguf_get_u32(f, akey(m, "rope.scaling.original_context_length"), false, &orig_ctx))) return s;
    hp->n_ctx_orig = orig_ctx;
    hp->yarn_attn_factor = 1.0f;
    if (hp->yarn_ext_factor != 0.0f) {
        const float factor = 1.0f / hp->rope_scale;
        const float ms = factor <= 1.0f ? 1.0f : 0.1f * logf(factor) + 1.0f;
        float attn = ms;
        if (log_mul != 0.0f) {
            const float ms_all = factor <= 1.0f ? 1.0f : 0.1f * log_mul * logf(factor) + 1.0f;
            attn = ms / ms_all;
        }
        hp->yarn_attn_factor = attn / (1.0f + 0.1f * logf(factor));
    }
    hp->yarn_attn_factor *= rope_attn;
    if (!(hp->rope_base > 0) || !(hp->rope_base_swa > 0) || !(hp->rope_scale > 0) || !isfinite(hp->rope_base))
        return mf_err(MF_ERR_FORMAT, "%s: invalid RoPE parameters (base %g, scale %g)", f->path, hp->rope_base, hp->rope_scale);
    for (uint32_t il = 0; il < hp->n_layer; il++) {
        mf_layer *L = &m->layers[il];
        bool own = m->arch->swa_own_rope && L->swa;
        L->rope_base = own ? hp->rope_base_swa : hp->rope_base;
        L->rope_scale = own ? 1.0f : hp->rope_scale;
        /* dims where the rotation is slow enough (beta_slow) or fast enough
         * (beta_fast) relative to the original context to interpolate or keep */
        const float nr = (float)hp->n_rot, two_pi = 6.283185307179586f;
        float lo = floorf(nr * logf((float)orig_ctx / (beta_fast * two_pi)) / (2 * logf(L->rope_base)));
        float hi = ceilf(nr * logf((float)orig_ctx / (beta_slow * two_pi)) / (2 * logf(L->rope_base)));
        L->yarn_corr[0] = lo > 0 ? lo : 0;
        L->yarn_corr[1] = hi < nr - 1 ? hi : nr - 1;
    }
    return MF_OK;
}

/* `<arch>.pooling_type` (llama.cpp's numbers: 0 none, 1 mean, 2 cls, 3 last;
 * rank and others are refused only when an embedding context asks for them) */
static mf_status load_pooling(mf_model *m) {
    uint32_t pt = 0;
    mf_status s = gguf_get_u32(m->gguf, akey(m, "pooling_type"), false, &pt);
    if (s) return s;
    m->hp.pooling = pt <= 3 ? (int32_t)pt : -2;
    return MF_OK;
}

static mf_status load_moe(mf_model *m) {
    const gguf_file *f = m->gguf;
    mf_hparams *hp = &m->hp;
    mf_status s;
    if ((s = gguf_get_u32(f, akey(m, "expert_count"), false, &hp->n_expert))) return s;
    if ((s = gguf_get_u32(f, akey(m, "expert_used_count"), false, &hp->n_expert_used))) return s;
    if (hp->n_expert == 0) return MF_OK;
    if (hp->n_expert > 1024 || hp->n_expert_used == 0 || hp->n_expert_used > hp->n_expert)
        return mf_err(MF_ERR_FORMAT, "%s: %u experts with %u used per token is out of range", f->path, hp->n_expert,
                      hp->n_expert_used);
    hp->n_ff_exp = hp->n_ff;
    if ((s = gguf_get_u32(f, akey(m, "expert_feed_forward_length"), false, &hp->n_ff_exp))) return s;
    hp->n_ff_shexp = hp->n_ff_exp;
    if ((s = gguf_get_u32(f, akey(m, "expert_shared_feed_forward_length"), false, &hp->n_ff_shexp))) return s;
    hp->moe_norm_topk = m->arch->moe_norm_topk;
    if ((s = gguf_get_bool(f, akey(m, "expert_weights_norm"), false, &hp->moe_norm_topk))) return s;
    hp->moe_scale = 1.0f;
    if ((s = gguf_get_f32(f, akey(m, "expert_weights_scale"), false, &hp->moe_scale))) return s;
    uint32_t gating = 1; /* 1 = softmax, 2 = sigmoid (llama.cpp's numbering) */
    if ((s = gguf_get_u32(f, akey(m, "expert_gating_func"), false, &gating))) return s;
    if (gating != 1 && gating != 2)
        return mf_err(MF_ERR_UNSUPPORTED, "%s: expert gating function %u is not supported", f->path, gating);
    hp->moe_sigmoid = gating == 2;
    return MF_OK;
}

static mf_status load_hparams(mf_model *m) {
    const gguf_file *f = m->gguf;
    mf_hparams *hp = &m->hp;
    mf_status s;
    if ((s = gguf_get_u32(f, akey(m, "context_length"), true, &hp->n_ctx_train))) return s;
    if ((s = gguf_get_u32(f, akey(m, "embedding_length"), true, &hp->n_embd))) return s;
    if ((s = gguf_get_u32(f, akey(m, "block_count"), true, &hp->n_layer))) return s;
    const gguf_value *ffv = gguf_get(f, akey(m, "feed_forward_length"));
    if (ffv && ffv->type == GGUF_ARR)
        return mf_err(MF_ERR_UNSUPPORTED, "%s: per-layer feed_forward_length arrays are not supported", f->path);
    if ((s = gguf_get_u32(f, akey(m, "feed_forward_length"), true, &hp->n_ff))) return s;
    const gguf_value *hv = gguf_get(f, akey(m, "attention.head_count"));
    if (hv && hv->type == GGUF_ARR)
        return mf_err(MF_ERR_UNSUPPORTED, "%s: per-layer attention.head_count arrays are not supported", f->path);
    if ((s = gguf_get_u32(f, akey(m, "attention.head_count"), true, &hp->n_head))) return s;
    hp->n_head_kv = hp->n_head;
    if ((s = gguf_get_u32(f, akey(m, "attention.head_count_kv"), false, &hp->n_head_kv))) return s;

    if (hp->n_layer == 0 || hp->n_layer > MF_MAX_LAYERS)
        return mf_err(MF_ERR_FORMAT, "%s: block_count %u out of range (1..%d)", f->path, hp->n_layer, MF_MAX_LAYERS);
    if (hp->n_embd == 0 || hp->n_embd > (1u << 20) || hp->n_ff > (1u << 24) || hp->n_head == 0 || hp->n_head_kv == 0 ||
        hp->n_head > 4096 || hp->n_head % hp->n_head_kv != 0)
        return mf_err(MF_ERR_FORMAT, "%s: inconsistent shape: n_embd %u, n_ff %u, %u heads, %u kv heads", f->path,
                      hp->n_embd, hp->n_ff, hp->n_head, hp->n_head_kv);
    hp->head_dim_k = hp->n_embd / hp->n_head;
    if ((s = gguf_get_u32(f, akey(m, "attention.key_length"), false, &hp->head_dim_k))) return s;
    hp->head_dim_v = hp->head_dim_k;
    if ((s = gguf_get_u32(f, akey(m, "attention.value_length"), false, &hp->head_dim_v))) return s;
    if (hp->head_dim_k == 0 || hp->head_dim_v == 0 || hp->head_dim_k > 4096 || hp->head_dim_v > 4096)
        return mf_err(MF_ERR_FORMAT, "%s: head dimension %u/%u out of range", f->path, hp->head_dim_k, hp->head_dim_v);
    hp->n_rot = hp->head_dim_k;
    if ((s = gguf_get_u32(f, akey(m, "rope.dimension_count"), false, &hp->n_rot))) return s;
    if (hp->n_rot > hp->head_dim_k || hp->n_rot % 2)
        return mf_err(MF_ERR_FORMAT, "%s: rope.dimension_count %u must be even and <= head dim %u", f->path, hp->n_rot, hp->head_dim_k);

    hp->norm_eps = 1e-5f;
    const char *eps_key = m->arch->norm == MF_NORM_RMS ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon";
    if ((s = gguf_get_f32(f, akey(m, eps_key), false, &hp->norm_eps))) return s;
    if (!(hp->norm_eps > 0) || !(hp->norm_eps < 1))
        return mf_err(MF_ERR_FORMAT, "%s: norm epsilon %g out of range", f->path, hp->norm_eps);

    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers) return mf_err(MF_ERR_NOMEM, "out of memory");
    if ((s = load_swa(m))) return s;
    if ((s = load_rope(m))) return s;
    if ((s = load_moe(m))) return s;
    if ((s = load_pooling(m))) return s;

    /* scales: family defaults, then metadata (granite carries all four) */
    hp->embd_scale = m->arch->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f;
    if ((s = gguf_get_f32(f, akey(m, "embedding_scale"), false, &hp->embd_scale))) return s;
    hp->residual_scale = 1.0f;
    if ((s = gguf_get_f32(f, akey(m, "residual_scale"), false, &hp->residual_scale))) return s;
    hp->logit_scale = 1.0f;
    if ((s = gguf_get_f32(f, akey(m, "logit_scale"), false, &hp->logit_scale))) return s;
    if (m->arch->big_layers && hp->n_layer == m->arch->big_layers)
        hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd / hp->n_head));
    else
        hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
    if ((s = gguf_get_f32(f, akey(m, "attention.scale"), false, &hp->attn_scale))) return s;
    if ((s = gguf_get_f32(f, akey(m, "attn_logit_softcapping"), false, &hp->attn_softcap))) return s;
    if ((s = gguf_get_f32(f, akey(m, "final_logit_softcapping"), false, &hp->final_softcap))) return s;
    if (!isfinite(hp->embd_scale) || !isfinite(hp->residual_scale) || !(hp->logit_scale != 0) ||
        !isfinite(hp->attn_scale) || hp->attn_softcap < 0 || hp->final_softcap < 0)
        return mf_err(MF_ERR_FORMAT, "%s: invalid scale or soft-capping value", f->path);
    return MF_OK;
}

/* Finds a tensor by printf-style name and checks its shape (-1 = any).
 * Returns MF_OK with *out = NULL when an optional tensor is absent. */
static mf_status bind(mf_model *m, mf_weight *out, bool required, int64_t ne0, int64_t ne1, int64_t ne2,
                      const char *fmt, ...) MF_PRINTF(7, 8);

static mf_status bind(mf_model *m, mf_weight *out, bool required, int64_t ne0, int64_t ne1, int64_t ne2,
                      const char *fmt, ...) {
    char name[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const gguf_tensor *gt = gguf_find_tensor(m->gguf, name);
    *out = gt ? &m->tensors[gt - m->gguf->tensors] : NULL;
    if (!*out)
        return required ? mf_err(MF_ERR_FORMAT, "%s: missing tensor '%s' (architecture %s)", m->gguf->path, name, m->arch->name)
                        : MF_OK;
    const mf_tensor *t = *out;
    int64_t want[3] = {ne0, ne1, ne2};
    bool ok = true;
    for (int d = 0; d < 3; d++)
        if (want[d] >= 0 && t->ne[d] != want[d]) ok = false;
    if (t->ne[3] != 1) ok = false;
    if (!ok)
        return mf_err(MF_ERR_FORMAT, "%s: tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                      "], expected [%" PRId64 ", %" PRId64 ", %" PRId64 "] (-1 = any)",
                      m->gguf->path, name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], ne0, ne1, ne2);
    /* vectors (norms, biases, factors) are read as f32; matrices go through the type traits */
    if (t->ne[1] == 1 && t->ne[2] == 1) {
        if (t->type != MF_TYPE_F32)
            return mf_err(MF_ERR_UNSUPPORTED, "%s: tensor '%s' is a vector of type %s; only f32 vectors are supported",
                          m->gguf->path, name, mf_type_name(t->type));
    } else if (!mf_type_traits_get(t->type)) {
        return mf_err(MF_ERR_UNSUPPORTED, "%s: tensor '%s' has type %s, which minfer cannot compute with yet",
                      m->gguf->path, name, mf_type_name(t->type));
    }
    return MF_OK;
}

/* 2-D views of each expert's slice of a stacked [ne0, ne1, n_expert] tensor. */
static void make_expert_views(mf_weight stack, mf_tensor *views, uint32_t n_expert) {
    const size_t slice = mf_row_size(stack->type, stack->ne[0]) * (size_t)stack->ne[1];
    for (uint32_t e = 0; e < n_expert; e++) {
        mf_tensor *v = &views[e];
        *v = *stack;
        v->ne[2] = 1;
        v->n_dims = 2;
        v->nbytes = slice;
        v->data = (const uint8_t *)stack->data + e * slice;
    }
}

static mf_status bind_attention(mf_model *m, uint32_t i, mf_layer *L) {
    const mf_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd;
    const int64_t QD = (int64_t)hp->n_head * hp->head_dim_k, KD = (int64_t)hp->n_head_kv * hp->head_dim_k;
    const int64_t VD = (int64_t)hp->n_head_kv * hp->head_dim_v, OD = (int64_t)hp->n_head * hp->head_dim_v;
    const bool layer_norm = m->arch->norm == MF_NORM_LAYER;
    mf_status s;
    if ((s = bind(m, &L->attn_norm, true, E, 1, 1, "blk.%u.attn_norm.weight", i))) return s;
    if ((s = bind(m, &L->attn_norm_b, layer_norm, E, 1, 1, "blk.%u.attn_norm.bias", i))) return s;
    if ((s = bind(m, &L->wqkv, false, E, QD + KD + VD, 1, "blk.%u.attn_qkv.weight", i))) return s;
    if (L->wqkv) {
        if ((s = bind(m, &L->bqkv, false, QD + KD + VD, 1, 1, "blk.%u.attn_qkv.bias", i))) return s;
    } else {
        if ((s = bind(m, &L->wq, true, E, QD, 1, "blk.%u.attn_q.weight", i))) return s;
        if ((s = bind(m, &L->wk, true, E, KD, 1, "blk.%u.attn_k.weight", i))) return s;
        if ((s = bind(m, &L->wv, true, E, VD, 1, "blk.%u.attn_v.weight", i))) return s;
        if ((s = bind(m, &L->bq, false, QD, 1, 1, "blk.%u.attn_q.bias", i))) return s;
        if ((s = bind(m, &L->bk, false, KD, 1, 1, "blk.%u.attn_k.bias", i))) return s;
        if ((s = bind(m, &L->bv, false, VD, 1, 1, "blk.%u.attn_v.bias", i))) return s;
    }
    if ((s = bind(m, &L->wo, true, OD, E, 1, "blk.%u.attn_output.weight", i))) return s;
    if ((s = bind(m, &L->bo, false, E, 1, 1, "blk.%u.attn_output.bias", i))) return s;
    if (m->arch->qk_norm) {
        if ((s = bind(m, &L->q_norm, true, hp->head_dim_k, 1, 1, "blk.%u.attn_q_norm.weight", i))) return s;
        if ((s = bind(m, &L->k_norm, true, hp->head_dim_k, 1, 1, "blk.%u.attn_k_norm.weight", i))) return s;
    }
    if (m->arch->post_norms)
        if ((s = bind(m, &L->post_attn_norm, true, E, 1, 1, "blk.%u.post_attention_norm.weight", i))) return s;
    return MF_OK;
}

static mf_status bind_ffn(mf_model *m, uint32_t i, mf_layer *L, mf_tensor *views) {
    const mf_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, F = hp->n_ff;
    mf_status s;
    if ((s = bind(m, &L->ffn_norm, true, E, 1, 1, "blk.%u.ffn_norm.weight", i))) return s;
    if ((s = bind(m, &L->ffn_norm_b, m->arch->norm == MF_NORM_LAYER, E, 1, 1, "blk.%u.ffn_norm.bias", i))) return s;
    if (m->arch->post_norms)
        if ((s = bind(m, &L->post_ffn_norm, true, E, 1, 1, "blk.%u.post_ffw_norm.weight", i))) return s;

    if (hp->n_expert) {
        const int64_t X = hp->n_expert, FE = hp->n_ff_exp;
        if ((s = bind(m, &L->ffn_gate_inp, true, E, X, 1, "blk.%u.ffn_gate_inp.weight", i))) return s;
        if ((s = bind(m, &L->ffn_gate_exps, true, E, FE, X, "blk.%u.ffn_gate_exps.weight", i))) return s;
        if ((s = bind(m, &L->ffn_up_exps, true, E, FE, X, "blk.%u.ffn_up_exps.weight", i))) return s;
        if ((s = bind(m, &L->ffn_down_exps, true, FE, E, X, "blk.%u.ffn_down_exps.weight", i))) return s;
        make_expert_views(L->ffn_gate_exps, views, hp->n_expert);
        make_expert_views(L->ffn_up_exps, views + X, hp->n_expert);
        make_expert_views(L->ffn_down_exps, views + 2 * X, hp->n_expert);
        L->gate_exp = views;
        L->up_exp = views + X;
        L->down_exp = views + 2 * X;
        const int64_t FS = hp->n_ff_shexp;
        if ((s = bind(m, &L->ffn_up_shexp, false, E, FS, 1, "blk.%u.ffn_up_shexp.weight", i))) return s;
        if (L->ffn_up_shexp) {
            if ((s = bind(m, &L->ffn_gate_shexp, true, E, FS, 1, "blk.%u.ffn_gate_shexp.weight", i))) return s;
            if ((s = bind(m, &L->ffn_down_shexp, true, FS, E, 1, "blk.%u.ffn_down_shexp.weight", i))) return s;
            if ((s = bind(m, &L->ffn_gate_inp_shexp, false, E, 1, 1, "blk.%u.ffn_gate_inp_shexp.weight", i))) return s;
        }
        return MF_OK;
    }
    if (m->arch->ffn == MF_FFN_GELU) {
        if ((s = bind(m, &L->ffn_up, true, E, F, 1, "blk.%u.ffn_up.weight", i))) return s;
        if ((s = bind(m, &L->ffn_up_b, false, F, 1, 1, "blk.%u.ffn_up.bias", i))) return s;
    } else {
        if ((s = bind(m, &L->ffn_gate, false, E, F, 1, "blk.%u.ffn_gate.weight", i))) return s;
        if (L->ffn_gate) {
            if ((s = bind(m, &L->ffn_up, true, E, F, 1, "blk.%u.ffn_up.weight", i))) return s;
        } else {
            /* fused gate-up (phi3): 2F rows, the first F are the gate */
            if ((s = bind(m, &L->ffn_gate_up, true, E, 2 * F, 1, "blk.%u.ffn_up.weight", i))) return s;
        }
    }
    if ((s = bind(m, &L->ffn_down, true, F, E, 1, "blk.%u.ffn_down.weight", i))) return s;
    if ((s = bind(m, &L->ffn_down_b, false, E, 1, 1, "blk.%u.ffn_down.bias", i))) return s;
    return MF_OK;
}

static mf_status bind_weights(mf_model *m) {
    const mf_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab;
    mf_status s;
    /* one backend-neutral record per GGUF tensor: the reader's stay as read */
    const gguf_file *g = m->gguf;
    m->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *m->tensors);
    if (!m->tensors) return mf_err(MF_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        mf_tensor *d = &m->tensors[i];
        d->name = t->name;
        d->type = t->type;
        d->n_dims = t->n_dims;
        for (int k = 0; k < 4; k++) d->ne[k] = t->ne[k];
        d->nbytes = t->nbytes;
        d->data = t->data;
    }
    if ((s = bind(m, &m->token_embd, true, E, V, 1, "token_embd.weight"))) return s;
    if (m->arch->rope == MF_ROPE_NONE) {
        if ((s = bind(m, &m->pos_embd, true, E, -1, 1, "position_embd.weight"))) return s;
        if (m->pos_embd->ne[1] < (int64_t)hp->n_ctx_train)
            return mf_err(MF_ERR_FORMAT, "%s: position_embd.weight has %" PRId64 " rows, context length is %u",
                          m->gguf->path, m->pos_embd->ne[1], hp->n_ctx_train);
    }
    if ((s = bind(m, &m->output_norm, true, E, 1, 1, "output_norm.weight"))) return s;
    if ((s = bind(m, &m->output_norm_b, m->arch->norm == MF_NORM_LAYER, E, 1, 1, "output_norm.bias"))) return s;
    if ((s = bind(m, &m->output, false, E, V, 1, "output.weight"))) return s;
    if (!m->output) m->output = m->token_embd; /* tied embeddings */
    if ((s = bind(m, &m->rope_freqs, false, hp->n_rot / 2, 1, 1, "rope_freqs.weight"))) return s;
    if ((s = bind(m, &m->rope_long, false, hp->n_rot / 2, 1, 1, "rope_factors_long.weight"))) return s;
    if ((s = bind(m, &m->rope_short, false, hp->n_rot / 2, 1, 1, "rope_factors_short.weight"))) return s;
    if (!m->rope_long != !m->rope_short)
        return mf_err(MF_ERR_FORMAT, "%s: only one of rope_factors_long / rope_factors_short is present", m->gguf->path);

    if (hp->n_expert) {
        m->expert_views = calloc((size_t)hp->n_layer * 3 * hp->n_expert, sizeof *m->expert_views);
        if (!m->expert_views) return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        mf_layer *L = &m->layers[i];
        if ((s = bind_attention(m, i, L))) return s;
        if ((s = bind_ffn(m, i, L, m->expert_views ? m->expert_views + (size_t)i * 3 * hp->n_expert : NULL))) return s;
    }
    return MF_OK;
}

/* Appends ", <text>" to the traits line. */
static void trait(mf_model *m, const char *fmt, ...) MF_PRINTF(2, 3);
static void trait(mf_model *m, const char *fmt, ...) {
    size_t n = strlen(m->traits);
    if (n + 3 >= sizeof m->traits) return;
    n += (size_t)snprintf(m->traits + n, sizeof m->traits - n, "; ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->traits + n, sizeof m->traits - n, fmt, ap);
    va_end(ap);
}

/* The family's fixed traits plus what this file turned on. */
static void describe_traits(mf_model *m) {
    const mf_hparams *hp = &m->hp;
    const mf_layer *L0 = &m->layers[0];
    snprintf(m->traits, sizeof m->traits, "%s: %s", m->arch->name, m->arch->traits);
    if (hp->n_head != hp->n_head_kv) trait(m, "GQA %u query / %u kv heads", hp->n_head, hp->n_head_kv);
    if (hp->n_head * hp->head_dim_k != hp->n_embd)
        trait(m, "decoupled head dim %u (q width %u != n_embd %u)", hp->head_dim_k, hp->n_head * hp->head_dim_k, hp->n_embd);
    if (L0->bq || L0->bqkv) trait(m, "QKV bias");
    if (L0->bo || L0->ffn_down_b) trait(m, "output and FFN biases");
    if (L0->wqkv) trait(m, "fused QKV");
    if (L0->ffn_gate_up) trait(m, "fused gate-up");
    trait(m, m->output == m->token_embd ? "tied embeddings" : "separate output head");
    if (hp->n_expert)
        trait(m, "MoE %u experts, top %u, %s router%s%s", hp->n_expert, hp->n_expert_used, hp->moe_sigmoid ? "sigmoid" : "softmax",
              hp->moe_norm_topk ? ", weights renormalised" : "", L0->ffn_up_shexp ? ", shared expert" : "");
    if (hp->n_swa) {
        uint32_t n_swa_layers = 0;
        for (uint32_t i = 0; i < hp->n_layer; i++) n_swa_layers += m->layers[i].swa;
        trait(m, "sliding window %u on %u of %u layers", hp->n_swa, n_swa_layers, hp->n_layer);
    }
    if (m->arch->rope != MF_ROPE_NONE)
        trait(m, "RoPE base %g%s", hp->rope_base,
              m->rope_freqs ? " with rope_freqs factors" : m->rope_long ? " with long/short factors (longrope)" : "");
    if (hp->rope_scale != 1.0f)
        trait(m, "%s RoPE scaling x%g", hp->yarn_ext_factor != 0.0f ? "YaRN" : "linear", 1.0f / hp->rope_scale);
    if (hp->attn_softcap > 0) trait(m, "attention soft-cap %g", hp->attn_softcap);
    if (hp->final_softcap > 0) trait(m, "final logit soft-cap %g", hp->final_softcap);
    if (hp->embd_scale != 1.0f && !m->arch->embd_scale) trait(m, "embedding scale %g", hp->embd_scale);
    if (hp->residual_scale != 1.0f) trait(m, "residual scale %g", hp->residual_scale);
    if (hp->logit_scale != 1.0f) trait(m, "logit scale 1/%g", hp->logit_scale);
    if (fabsf(hp->attn_scale - 1.0f / sqrtf((float)hp->head_dim_k)) > 1e-7f) trait(m, "attention scale %g", hp->attn_scale);
}

static void describe(mf_model *m) {
    /* dominant type = type holding the most bytes among matrices */
    size_t bytes[MF_TYPE_COUNT] = {0};
    m->n_params = 0;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const gguf_tensor *t = &m->gguf->tensors[i];
        m->n_params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
        if (t->ne[1] > 1) bytes[t->type] += t->nbytes;
    }
    int best = 0;
    for (int t = 0; t < MF_TYPE_COUNT; t++)
        if (bytes[t] > bytes[best]) best = t;
    m->ftype = (mf_type)best;
    double p = (double)m->n_params;
    char ps[32];
    if (p >= 1e9) snprintf(ps, sizeof ps, "%.2fB", p / 1e9);
    else if (p >= 1e6) snprintf(ps, sizeof ps, "%.2fM", p / 1e6);
    else snprintf(ps, sizeof ps, "%.1fK", p / 1e3);
    snprintf(m->desc, sizeof m->desc, "%s, %u layers, %u embd, %u/%u heads, vocab %u, %s, %s params", m->arch->name,
             m->hp.n_layer, m->hp.n_embd, m->hp.n_head, m->hp.n_head_kv, m->hp.n_vocab, mf_type_name(m->ftype), ps);
}

mf_status mf_model_open(const char *path, const mf_model_params *params, mf_model **out) {
    *out = NULL;
    const mf_model_params p = params ? *params : mf_model_default_params();
    gguf_file *g;
    mf_status s = gguf_open_ex(path, p.no_mmap, &g);
    if (s) return s;
    return mf_model_open_gguf(g, &p, out);
}

mf_status mf_model_open_gguf(gguf_file *g, const mf_model_params *params, mf_model **out) {
    *out = NULL;
    mf_model_params p = params ? *params : mf_model_default_params();
    const char *path = g->path;
    mf_status s;
    mf_model *m = calloc(1, sizeof *m);
    if (!m) {
        gguf_close(g);
        return mf_err(MF_ERR_NOMEM, "out of memory");
    }
    m->verbose = p.verbose;
    m->gguf = g;
    char arch[64] = "";
    if ((s = gguf_get_str(m->gguf, "general.architecture", true, arch, sizeof arch))) goto fail;
    m->arch = mf_arch_find(arch);
    if (!m->arch && p.vocab_only) {
        /* a vocabulary file's architecture only names where its tokenizer came from */
        static const mf_arch any = {.name = "vocab"};
        m->arch = &any;
    }
    if (!m->arch) {
        s = mf_err(MF_ERR_UNSUPPORTED, "%s: unknown architecture '%s' (supported: %s)", path, arch, mf_arch_supported());
        goto fail;
    }
    if ((s = mf_vocab_load(m->gguf, &m->vocab))) goto fail;
    if (p.vocab_only) {
        m->hp.n_vocab = (uint32_t)mf_vocab_n_tokens(m->vocab);
        snprintf(m->desc, sizeof m->desc, "%s vocabulary only, %u tokens", m->arch->name, m->hp.n_vocab);
        *out = m;
        return MF_OK;
    }
    if ((s = load_hparams(m))) goto fail;
    m->hp.n_vocab = (uint32_t)mf_vocab_n_tokens(m->vocab);
    if ((s = bind_weights(m))) goto fail;
    describe(m);
    describe_traits(m);
    *out = m;
    return MF_OK;
fail:
    mf_model_free(m);
    return s;
}

void mf_model_free(mf_model *m) {
    if (!m) return;
    mf_vocab_free(m->vocab);
    /* the loaders' copies first: they may still look at the layers and views */
    if (m->be_weights_free) m->be_weights_free(m);
    if (m->dev_weights_free) m->dev_weights_free(m);
    free(m->layers);
    free(m->expert_views);
    free(m->tensors);
    gguf_close(m->gguf);
    free(m);
}

const char *mf_model_arch(const mf_model *m) { return m->arch->name; }
int32_t mf_model_n_vocab(const mf_model *m) { return (int32_t)m->hp.n_vocab; }
int32_t mf_model_n_ctx_train(const mf_model *m) { return (int32_t)m->hp.n_ctx_train; }
int32_t mf_model_n_embd(const mf_model *m) { return (int32_t)m->hp.n_embd; }
int32_t mf_model_n_layer(const mf_model *m) { return (int32_t)m->hp.n_layer; }
int32_t mf_model_gpu_layers(const mf_model *m) {
    return m->dev_weights ? (int32_t)(m->hp.n_layer - m->n_cpu_layers) : 0;
}
const char *mf_model_desc(const mf_model *m) { return m->desc; }
const char *mf_model_traits(const mf_model *m) { return m->traits[0] ? m->traits : m->desc; }

uint64_t mf_model_n_params(const mf_model *m) { return m->n_params; }

uint64_t mf_model_size(const mf_model *m) {
    uint64_t b = 0;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) b += m->gguf->tensors[i].nbytes;
    return b;
}

uint64_t mf_model_bytes_per_token(const mf_model *m) {
    uint64_t b = 0;
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const mf_tensor *t = &m->tensors[i];
        if (t == m->token_embd && m->output != m->token_embd)
            b += t->nbytes / (uint64_t)t->ne[1]; /* one row looked up */
        else if (t == m->pos_embd)
            b += t->nbytes / (uint64_t)t->ne[1];
        else if (m->hp.n_expert && t->ne[2] > 1)
            b += t->nbytes / m->hp.n_expert * m->hp.n_expert_used; /* only the selected experts */
        else
            b += t->nbytes;
    }
    return b;
}
