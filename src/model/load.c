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
    if (hp->n_embd == 0 || hp->n_head == 0 || hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv != 0)
        return mf_err(MF_ERR_FORMAT, "%s: inconsistent attention shape: n_embd %u, %u heads, %u kv heads", f->path,
                      hp->n_embd, hp->n_head, hp->n_head_kv);
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
    if (m->arch->norm == MF_NORM_RMS) {
        if ((s = gguf_get_f32(f, akey(m, "attention.layer_norm_rms_epsilon"), false, &hp->norm_eps))) return s;
    } else {
        if ((s = gguf_get_f32(f, akey(m, "attention.layer_norm_epsilon"), false, &hp->norm_eps))) return s;
    }
    hp->rope_base = 10000.0f;
    if ((s = gguf_get_f32(f, akey(m, "rope.freq_base"), false, &hp->rope_base))) return s;
    hp->rope_scale = 1.0f;
    float lin = 0;
    if ((s = gguf_get_f32(f, akey(m, "rope.scale_linear"), false, &lin))) return s;
    if (lin > 0) hp->rope_scale = 1.0f / lin;
    char stype[64] = "";
    if ((s = gguf_get_str(f, akey(m, "rope.scaling.type"), false, stype, sizeof stype))) return s;
    if (stype[0] && strcmp(stype, "none") != 0) {
        if (strcmp(stype, "linear") != 0)
            return mf_err(MF_ERR_UNSUPPORTED, "%s: RoPE scaling type '%s' is not supported yet", f->path, stype);
        float factor = 0;
        if ((s = gguf_get_f32(f, akey(m, "rope.scaling.factor"), false, &factor))) return s;
        if (factor > 0) hp->rope_scale = 1.0f / factor;
    }
    if (!(hp->norm_eps > 0) || !(hp->rope_base > 0) || !(hp->rope_scale > 0) || !isfinite(hp->rope_base))
        return mf_err(MF_ERR_FORMAT, "%s: invalid norm epsilon / RoPE parameters", f->path);
    if ((s = gguf_get_u32(f, akey(m, "expert_count"), false, &hp->n_expert))) return s;
    if ((s = gguf_get_u32(f, akey(m, "expert_used_count"), false, &hp->n_expert_used))) return s;
    if (hp->n_expert)
        return mf_err(MF_ERR_UNSUPPORTED, "%s: mixture-of-experts models are not supported yet", f->path);
    hp->embd_scale = 1.0f;
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
    *out = gguf_find_tensor(m->gguf, name);
    if (!*out)
        return required ? mf_err(MF_ERR_FORMAT, "%s: missing tensor '%s' (architecture %s)", m->gguf->path, name, m->arch->name)
                        : MF_OK;
    const gguf_tensor *t = *out;
    int64_t want[3] = {ne0, ne1, ne2};
    bool ok = true;
    for (int d = 0; d < 3; d++)
        if (want[d] >= 0 && t->ne[d] != want[d]) ok = false;
    if (t->ne[3] != 1) ok = false;
    if (!ok)
        return mf_err(MF_ERR_FORMAT, "%s: tensor '%s' has shape [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                      "], expected [%" PRId64 ", %" PRId64 ", %" PRId64 "] (-1 = any)",
                      m->gguf->path, name, t->ne[0], t->ne[1], t->ne[2], t->ne[3], ne0, ne1, ne2);
    /* 1-D tensors (norms, biases) are read as f32; matrices go through the type traits */
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

static mf_status bind_weights(mf_model *m) {
    const mf_hparams *hp = &m->hp;
    const int64_t E = hp->n_embd, V = hp->n_vocab, F = hp->n_ff;
    const int64_t QD = (int64_t)hp->n_head * hp->head_dim_k;
    const int64_t KD = (int64_t)hp->n_head_kv * hp->head_dim_k;
    const int64_t VD = (int64_t)hp->n_head_kv * hp->head_dim_v;
    const int64_t OD = (int64_t)hp->n_head * hp->head_dim_v;
    mf_status s;
    if ((s = bind(m, &m->token_embd, true, E, V, 1, "token_embd.weight"))) return s;
    if ((s = bind(m, &m->output_norm, true, E, 1, 1, "output_norm.weight"))) return s;
    if ((s = bind(m, &m->output, false, E, V, 1, "output.weight"))) return s;
    if (!m->output) m->output = m->token_embd; /* tied embeddings */

    m->layers = calloc(hp->n_layer, sizeof *m->layers);
    if (!m->layers) return mf_err(MF_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < hp->n_layer; i++) {
        mf_layer *L = &m->layers[i];
        L->rope_base = hp->rope_base;
        L->rope_scale = hp->rope_scale;
        if ((s = bind(m, &L->attn_norm, true, E, 1, 1, "blk.%u.attn_norm.weight", i))) return s;
        if ((s = bind(m, &L->wq, true, E, QD, 1, "blk.%u.attn_q.weight", i))) return s;
        if ((s = bind(m, &L->wk, true, E, KD, 1, "blk.%u.attn_k.weight", i))) return s;
        if ((s = bind(m, &L->wv, true, E, VD, 1, "blk.%u.attn_v.weight", i))) return s;
        if ((s = bind(m, &L->wo, true, OD, E, 1, "blk.%u.attn_output.weight", i))) return s;
        if ((s = bind(m, &L->ffn_norm, true, E, 1, 1, "blk.%u.ffn_norm.weight", i))) return s;
        if ((s = bind(m, &L->ffn_gate, true, E, F, 1, "blk.%u.ffn_gate.weight", i))) return s;
        if ((s = bind(m, &L->ffn_up, true, E, F, 1, "blk.%u.ffn_up.weight", i))) return s;
        if ((s = bind(m, &L->ffn_down, true, F, E, 1, "blk.%u.ffn_down.weight", i))) return s;
    }
    return MF_OK;
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

mf_status mf_model_load(const char *path, const mf_model_params *params, mf_model **out) {
    *out = NULL;
    mf_model_params p = params ? *params : mf_model_default_params();
    mf_model *m = calloc(1, sizeof *m);
    if (!m) return mf_err(MF_ERR_NOMEM, "out of memory");
    m->verbose = p.verbose;
    mf_status s = gguf_open(path, &m->gguf);
    if (s) goto fail;
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
    *out = m;
    return MF_OK;
fail:
    mf_model_free(m);
    return s;
}

void mf_model_free(mf_model *m) {
    if (!m) return;
    mf_vocab_free(m->vocab);
    free(m->layers);
    gguf_close(m->gguf);
    free(m);
}

const char *mf_model_arch(const mf_model *m) { return m->arch->name; }
int32_t mf_model_n_vocab(const mf_model *m) { return (int32_t)m->hp.n_vocab; }
int32_t mf_model_n_ctx_train(const mf_model *m) { return (int32_t)m->hp.n_ctx_train; }
int32_t mf_model_n_embd(const mf_model *m) { return (int32_t)m->hp.n_embd; }
int32_t mf_model_n_layer(const mf_model *m) { return (int32_t)m->hp.n_layer; }
const char *mf_model_desc(const mf_model *m) { return m->desc; }
