/* synth.h - internals of `minfer synth`: the presets (real model shapes),
 * the tensor list a preset implies, the random values of each tensor, and
 * the vocabulary (generated or copied). mf_synth() in synth.c ties them to
 * the quantizer's per-tensor rules and the GGUF writer. */
#ifndef MF_SYNTH_SYNTH_H
#define MF_SYNTH_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "minfer.h"
#include "gguf/gguf_write.h"

/* One real model shape. Every number is what the model's own config.json
 * says (see `source`); the GGUF keys are derived from them the way
 * llama.cpp's converter derives them. */
typedef struct synth_preset {
    const char *name;       /* --preset */
    const char *arch;       /* general.architecture */
    const char *source;     /* where the numbers come from */
    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv;
    uint32_t head_dim;      /* per-head width of q/k/v (n_embd / n_head unless decoupled) */
    bool write_head_dim;    /* the config names head_dim: write attention.key_length/value_length */
    uint32_t n_vocab, n_ctx;
    float rope_base, norm_eps;
    bool tied;              /* no output.weight: token_embd is also the output head */
    bool qkv_bias;          /* attn_q/k/v biases (qwen2) */
    bool qk_norm;           /* attn_q_norm/attn_k_norm (qwen3) */
    bool llama_keys;        /* also <arch>.vocab_size and rope.dimension_count, as the llama converter writes */
    /* Llama 3 frequency-dependent RoPE scaling, written as rope_freqs.weight;
     * l3_factor 0 = none */
    float l3_factor, l3_low, l3_high;
    uint32_t l3_orig_ctx;
} synth_preset;

const synth_preset *synth_preset_find(const char *name);
const synth_preset *synth_preset_at(int i); /* NULL past the last */
const char *synth_preset_names(void);

/* How a tensor's values are made. */
typedef enum synth_kind {
    SK_MATRIX,     /* uniform, standard deviation `scale` */
    SK_NORM,       /* around 1 */
    SK_BIAS,       /* small, standard deviation `scale` */
    SK_ROPE_FREQS, /* Llama 3 frequency factors (not random) */
} synth_kind;

#define SYNTH_NAME_MAX 64

typedef struct synth_tensor {
    char name[SYNTH_NAME_MAX];
    uint32_t n_dims;        /* 1 or 2 */
    int64_t ne[2];          /* ne[0] is the row length */
    synth_kind kind;
    float scale;
} synth_tensor;

/* The tensors of a preset, in file order (malloc'd; *n set), with
 * `extra_layers` more layers after the preset's own: the same kinds and
 * scales, but attn_output and ffn_down times `extra_scale`. The preset's
 * tensors are the same with or without extra layers. */
mf_status synth_tensor_list(const synth_preset *p, uint32_t extra_layers, float extra_scale, synth_tensor **out,
                            int64_t *n);

/* Row `row` of tensor t (ne[0] floats) for `seed`: a pure function of
 * (seed, tensor name, row), so rows can be made in any order on any thread. */
void synth_fill_row(const synth_preset *p, const synth_tensor *t, uint64_t seed, int64_t row, float *dst);

/* Sets the tokenizer.* keys of a generated SentencePiece-style vocabulary of
 * n_vocab tokens: <unk>, <s>, </s>, the 256 byte tokens, then filler pieces. */
mf_status synth_vocab_generate(gguf_writer *w, int32_t n_vocab);

/* Copies every tokenizer.* key of the GGUF at `path`, after checking that
 * minfer can load it as a vocabulary. Fewer tokens than n_vocab: padded with
 * unused "[PADn]" tokens; more: refused. *n_source = its own token count. */
mf_status synth_vocab_copy(gguf_writer *w, const char *path, int32_t n_vocab, const char *preset, int32_t *n_source);

#endif
