/* presets.c - the real model shapes `minfer synth` writes, and the tensor
 * list (names, shapes, value scales) each one implies. */
#include "synth/synth.h"
#include "core/error.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The numbers below are each model's Hugging Face config.json
 * (hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
 * num_key_value_heads, head_dim, vocab_size, max_position_embeddings,
 * rope_theta, rms_norm_eps, tie_word_embeddings, rope_scaling). The test
 * tests/synth checks that each big preset's parameter count is the count
 * its model card publishes, which pins the shapes down. */
static const synth_preset g_presets[] = {
    /* For tests: every row length a multiple of 256 so that every type
     * applies without fallbacks; GQA 4 (8 q / 2 kv heads) so that the
     * GQA-dependent mixture clauses (Q2_K, IQ4_*) are exercised; untied, so
     * output.weight gets its own rule. */
    {.name = "tiny", .arch = "llama", .source = "test shape, no real model",
     .n_layer = 4, .n_embd = 256, .n_ff = 768, .n_head = 8, .n_head_kv = 2, .head_dim = 32,
     .n_vocab = 1000, .n_ctx = 2048, .rope_base = 10000.0f, .norm_eps = 1e-5f, .llama_keys = true},
    /* The qwen2 traits in small: QKV bias, tied embeddings. */
    {.name = "tiny-qwen2", .arch = "qwen2", .source = "test shape, no real model",
     .n_layer = 2, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2, .head_dim = 64,
     .n_vocab = 1000, .n_ctx = 4096, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true, .qkv_bias = true},
    /* The qwen3 traits in small: QK-norm, a head width decoupled from
     * n_embd (4 x 128 != 256), tied embeddings. */
    {.name = "tiny-qwen3", .arch = "qwen3", .source = "test shape, no real model",
     .n_layer = 2, .n_embd = 256, .n_ff = 512, .n_head = 4, .n_head_kv = 2, .head_dim = 128, .write_head_dim = true,
     .n_vocab = 1000, .n_ctx = 4096, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true, .qk_norm = true},
    /* For the vindex benchmarks: an FFN 64k features wide (65,536 x 512, the
     * shape where the HNSW gate KNN pays; no preset of a real model is that
     * wide), in 2 layers so that building their HNSW graphs takes minutes. */
    {.name = "wide-ffn", .arch = "llama", .source = "benchmark shape, no real model",
     .n_layer = 2, .n_embd = 512, .n_ff = 65536, .n_head = 8, .n_head_kv = 2, .head_dim = 64,
     .n_vocab = 1000, .n_ctx = 2048, .rope_base = 10000.0f, .norm_eps = 1e-5f, .tied = true, .llama_keys = true},
    /* For the vindex benchmarks at larql's published shape: Gemma-3-4B's
     * FFN (google/gemma-3-4b config.json: hidden_size 2560,
     * intermediate_size 10240, 8 attention heads, 4 key/value heads, head_dim
     * 256, QK-norm) in 14 layers, the layer count of larql's walk figure.
     * qwen3 blocks (QK-norm, a head width decoupled from n_embd; SwiGLU in
     * place of Gemma's GeGLU, the same three matrices) and a small vocab, so
     * the FFN and attention are the real sizes and the head is not. */
    {.name = "gemma3-4b-ffn", .arch = "qwen3", .source = "benchmark shape: Gemma-3-4B's FFN and heads, 14 layers",
     .n_layer = 14, .n_embd = 2560, .n_ff = 10240, .n_head = 8, .n_head_kv = 4, .head_dim = 256, .write_head_dim = true,
     .n_vocab = 1000, .n_ctx = 4096, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true, .qk_norm = true},
    /* For the speculative-decoding benchmark: the draft of a constructed
     * pair. 2 layers 1024 wide (16 query / 4 KV heads of 64, FFN 4096) and a
     * 32,000-token vocabulary (Llama 2's size), untied: about 63M weights
     * read per token, 30M of them in the layers. `--extra-layers 38` on the
     * same preset writes its target (40 layers, about 10x the draft's work
     * per token, roughly Qwen2.5-0.5B against 7B). */
    {.name = "spec-draft", .arch = "llama", .source = "benchmark shape, no real model",
     .n_layer = 2, .n_embd = 1024, .n_ff = 4096, .n_head = 16, .n_head_kv = 4, .head_dim = 64,
     .n_vocab = 32000, .n_ctx = 4096, .rope_base = 10000.0f, .norm_eps = 1e-5f, .llama_keys = true},
    /* Qwen/Qwen2.5-0.5B config.json: num_hidden_layers 24, hidden_size 896,
     * intermediate_size 4864, num_attention_heads 14, num_key_value_heads 2
     * (head width 896 / 14 = 64), vocab_size 151936, max_position_embeddings
     * 32768, rope_theta 1000000, rms_norm_eps 1e-6, tie_word_embeddings true;
     * Qwen2 attention has q/k/v biases. 494,032,768 parameters. */
    {.name = "qwen2.5-0.5b", .arch = "qwen2", .source = "Qwen/Qwen2.5-0.5B config.json",
     .n_layer = 24, .n_embd = 896, .n_ff = 4864, .n_head = 14, .n_head_kv = 2, .head_dim = 64,
     .n_vocab = 151936, .n_ctx = 32768, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true, .qkv_bias = true},
    /* meta-llama/Llama-3.2-1B config.json: num_hidden_layers 16, hidden_size
     * 2048, intermediate_size 8192, num_attention_heads 32,
     * num_key_value_heads 8, head_dim 64, vocab_size 128256,
     * max_position_embeddings 131072, rope_theta 500000, rms_norm_eps 1e-5,
     * tie_word_embeddings true, rope_scaling {rope_type llama3, factor 32,
     * low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings
     * 8192}. 1,235,814,400 parameters, plus the 32 RoPE factors. */
    {.name = "llama-3.2-1b", .arch = "llama", .source = "meta-llama/Llama-3.2-1B config.json",
     .n_layer = 16, .n_embd = 2048, .n_ff = 8192, .n_head = 32, .n_head_kv = 8, .head_dim = 64, .write_head_dim = true,
     .n_vocab = 128256, .n_ctx = 131072, .rope_base = 500000.0f, .norm_eps = 1e-5f, .tied = true, .llama_keys = true,
     .l3_factor = 32.0f, .l3_low = 1.0f, .l3_high = 4.0f, .l3_orig_ctx = 8192},
    /* Qwen/Qwen3-4B config.json: num_hidden_layers 36, hidden_size 2560,
     * intermediate_size 9728, num_attention_heads 32, num_key_value_heads 8,
     * head_dim 128, vocab_size 151936, max_position_embeddings 40960,
     * rope_theta 1000000, rms_norm_eps 1e-6, tie_word_embeddings true; Qwen3
     * attention normalises q and k per head. 4,022,468,096 parameters. */
    {.name = "qwen3-4b", .arch = "qwen3", .source = "Qwen/Qwen3-4B config.json",
     .n_layer = 36, .n_embd = 2560, .n_ff = 9728, .n_head = 32, .n_head_kv = 8, .head_dim = 128, .write_head_dim = true,
     .n_vocab = 151936, .n_ctx = 40960, .rope_base = 1000000.0f, .norm_eps = 1e-6f, .tied = true, .qk_norm = true},
    /* meta-llama/Meta-Llama-3-8B config.json: num_hidden_layers 32,
     * hidden_size 4096, intermediate_size 14336, num_attention_heads 32,
     * num_key_value_heads 8 (head width 128), vocab_size 128256,
     * max_position_embeddings 8192, rope_theta 500000, rms_norm_eps 1e-5,
     * tie_word_embeddings false, no rope_scaling. 8,030,261,248 parameters. */
    {.name = "llama-3-8b", .arch = "llama", .source = "meta-llama/Meta-Llama-3-8B config.json",
     .n_layer = 32, .n_embd = 4096, .n_ff = 14336, .n_head = 32, .n_head_kv = 8, .head_dim = 128,
     .n_vocab = 128256, .n_ctx = 8192, .rope_base = 500000.0f, .norm_eps = 1e-5f, .llama_keys = true},
};
#define N_PRESETS ((int)(sizeof g_presets / sizeof g_presets[0]))

const synth_preset *synth_preset_find(const char *name) {
    if (!name) return NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(g_presets[i].name, name)) return &g_presets[i];
    return NULL;
}

const synth_preset *synth_preset_at(int i) { return i >= 0 && i < N_PRESETS ? &g_presets[i] : NULL; }

const char *synth_preset_names(void) {
    static char buf[256];
    if (!buf[0]) {
        size_t o = 0;
        for (int i = 0; i < N_PRESETS; i++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? ", " : "", g_presets[i].name);
    }
    return buf;
}

const char *mf_synth_preset_names(void) { return synth_preset_names(); }

const char *mf_synth_preset_desc(int i) {
    static char lines[N_PRESETS][512];
    const synth_preset *p = synth_preset_at(i);
    if (!p) return NULL;
    if (!lines[i][0])
        snprintf(lines[i], sizeof lines[i],
                 "%-13s %s, %u layers, n_embd %u, n_ff %u, %u/%u heads of %u, vocab %u, ctx %u, RoPE base %g%s%s%s%s "
                 "(%s)",
                 p->name, p->arch, p->n_layer, p->n_embd, p->n_ff, p->n_head, p->n_head_kv, p->head_dim, p->n_vocab,
                 p->n_ctx, p->rope_base, p->l3_factor > 0 ? " with Llama 3 scaling" : "", p->tied ? ", tied" : "",
                 p->qkv_bias ? ", QKV bias" : "", p->qk_norm ? ", QK-norm" : "", p->source);
    return lines[i];
}

/* ---- tensor list ---- */

typedef struct list {
    synth_tensor *t;
    int64_t n, cap;
} list;

static void add(list *l, synth_kind kind, float scale, int64_t ne0, int64_t ne1, const char *fmt, int layer) {
    synth_tensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, fmt, layer);
    t->kind = kind;
    t->scale = scale;
    t->ne[0] = ne0;
    t->ne[1] = ne1;
    t->n_dims = ne1 > 1 ? 2 : 1;
}

mf_status synth_tensor_list(const synth_preset *p, uint32_t extra_layers, float extra_scale, synth_tensor **out,
                            int64_t *n) {
    const int64_t E = p->n_embd, F = p->n_ff, V = p->n_vocab;
    const int64_t QD = (int64_t)p->n_head * p->head_dim, KD = (int64_t)p->n_head_kv * p->head_dim;
    /* Scales keep activations near unit size through every layer: a
     * matrix's outputs have about the spread of its inputs when its values
     * have standard deviation 1/sqrt(fan_in), and the two matrices that feed
     * the residual stream are shrunk by a further sqrt(2 * n_layer) so that
     * the 2 * n_layer additions sum to about unit size, not sqrt(2 * n_layer).
     * Extra layers take the preset's scales (n_layer is the preset's, so the
     * preset's own layers do not change), their two residual matrices times
     * extra_scale. */
    const float in_e = 1.0f / sqrtf((float)E);
    const float res = 1.0f / sqrtf(2.0f * (float)p->n_layer);
    const float bias = 0.02f, norm = 0.1f;

    list l = {0};
    const int n_all = (int)(p->n_layer + extra_layers);
    l.cap = 4 + (int64_t)n_all * 16;
    l.t = calloc((size_t)l.cap, sizeof *l.t);
    if (!l.t) return mf_err(MF_ERR_NOMEM, "synth: out of memory");
    if (p->l3_factor > 0) add(&l, SK_ROPE_FREQS, 0, p->head_dim / 2, 1, "rope_freqs.weight", 0);
    add(&l, SK_MATRIX, in_e, E, V, "token_embd.weight", 0);
    for (int i = 0; i < n_all; i++) {
        const float rs = i < (int)p->n_layer ? res : res * extra_scale;
        add(&l, SK_NORM, norm, E, 1, "blk.%d.attn_norm.weight", i);
        add(&l, SK_MATRIX, in_e, E, QD, "blk.%d.attn_q.weight", i);
        if (p->qkv_bias) add(&l, SK_BIAS, bias, QD, 1, "blk.%d.attn_q.bias", i);
        add(&l, SK_MATRIX, in_e, E, KD, "blk.%d.attn_k.weight", i);
        if (p->qkv_bias) add(&l, SK_BIAS, bias, KD, 1, "blk.%d.attn_k.bias", i);
        add(&l, SK_MATRIX, in_e, E, KD, "blk.%d.attn_v.weight", i);
        if (p->qkv_bias) add(&l, SK_BIAS, bias, KD, 1, "blk.%d.attn_v.bias", i);
        add(&l, SK_MATRIX, rs / sqrtf((float)QD), QD, E, "blk.%d.attn_output.weight", i);
        if (p->qk_norm) {
            add(&l, SK_NORM, norm, p->head_dim, 1, "blk.%d.attn_q_norm.weight", i);
            add(&l, SK_NORM, norm, p->head_dim, 1, "blk.%d.attn_k_norm.weight", i);
        }
        add(&l, SK_NORM, norm, E, 1, "blk.%d.ffn_norm.weight", i);
        add(&l, SK_MATRIX, in_e, E, F, "blk.%d.ffn_gate.weight", i);
        add(&l, SK_MATRIX, in_e, E, F, "blk.%d.ffn_up.weight", i);
        add(&l, SK_MATRIX, rs / sqrtf((float)F), F, E, "blk.%d.ffn_down.weight", i);
    }
    add(&l, SK_NORM, norm, E, 1, "output_norm.weight", 0);
    if (!p->tied) add(&l, SK_MATRIX, in_e, E, V, "output.weight", 0);
    *out = l.t;
    *n = l.n;
    return MF_OK;
}
