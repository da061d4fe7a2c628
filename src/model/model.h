/* model.h - a loaded model: hyperparameters, architecture traits and weights
 * bound by name to tensors of the (validated, mmapped) GGUF file. */
#ifndef MF_MODEL_H
#define MF_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "minfer.h"
#include "gguf/gguf.h"
#include "model/arch.h"
#include "engine/tensor.h"
#include "token/vocab.h"

#define MF_MAX_LAYERS 512

/* A weight: the model's record of one GGUF tensor (engine/tensor.h). */
typedef const mf_tensor *mf_weight;

typedef struct mf_layer {
    mf_weight attn_norm, attn_norm_b;
    mf_weight wq, wk, wv, wo, wqkv;
    mf_weight bq, bk, bv, bo, bqkv;
    mf_weight q_norm, k_norm;
    mf_weight post_attn_norm;
    mf_weight ffn_norm, ffn_norm_b;
    mf_weight ffn_gate, ffn_up, ffn_down, ffn_gate_up;
    mf_weight ffn_up_b, ffn_down_b;
    mf_weight post_ffn_norm;
    /* mixture of experts */
    mf_weight ffn_gate_inp;
    mf_weight ffn_gate_exps, ffn_up_exps, ffn_down_exps;  /* stacked [.., .., n_expert] */
    const mf_tensor *gate_exp, *up_exp, *down_exp;         /* per-expert 2-D views of the stacks */
    mf_weight ffn_gate_shexp, ffn_up_shexp, ffn_down_shexp, ffn_gate_inp_shexp;
    /* per-layer attention shape (sliding-window layers may differ) */
    bool swa;            /* this layer uses the sliding window */
    float rope_base;     /* RoPE frequency base for this layer */
    float rope_scale;    /* linear frequency scale (1 = none) */
    float yarn_corr[2];  /* YaRN correction dims for this layer's base */
} mf_layer;

typedef struct mf_hparams {
    uint32_t n_vocab;
    uint32_t n_ctx_train;
    uint32_t n_embd;
    uint32_t n_layer;
    uint32_t n_head;
    uint32_t n_head_kv;
    uint32_t head_dim_k;  /* per-head width of q and k */
    uint32_t head_dim_v;
    uint32_t n_ff;
    uint32_t n_rot;       /* rotated dimensions per head */
    float norm_eps;
    float rope_base;
    float rope_scale;     /* frequency scale: 1 / scaling factor (linear and YaRN) */
    float yarn_ext_factor;  /* 0 = no YaRN */
    float yarn_attn_factor; /* cos/sin magnitude (YaRN's mscale correction) */
    uint32_t n_ctx_orig;    /* the context the RoPE was trained for (rope.scaling.original_context_length) */
    uint32_t n_expert, n_expert_used;
    uint32_t n_ff_exp, n_ff_shexp; /* expert / shared-expert FFN widths */
    bool moe_norm_topk;   /* renormalise the k selected weights to sum 1 */
    bool moe_sigmoid;     /* router uses sigmoid instead of softmax */
    float moe_scale;      /* multiply expert weights (1 = none) */
    uint32_t n_swa;       /* sliding window size, 0 = none */
    float rope_base_swa;  /* RoPE base of sliding layers (swa_own_rope families) */
    float attn_scale;     /* q.k scale, default 1/sqrt(head_dim_k) */
    float attn_softcap, final_softcap; /* 0 = none */
    float embd_scale;     /* multiply token embeddings (1 = none) */
    float residual_scale; /* multiply attention / FFN outputs before the residual add (1 = none) */
    float logit_scale;    /* divide logits (1 = none) */
    int32_t pooling;      /* the file's pooling_type (mf_pooling; 0 = none, -2 = one we do not run) */
} mf_hparams;

struct mf_model {
    gguf_file *gguf;
    mf_vocab *vocab;
    const mf_arch *arch;
    mf_hparams hp;
    mf_weight token_embd, pos_embd;
    mf_weight output_norm, output_norm_b;
    mf_weight output;     /* == token_embd when tied */
    mf_weight rope_freqs; /* per-dimension RoPE frequency factors (Llama 3.1 style), or NULL */
    mf_weight rope_long, rope_short; /* Phi-3 "longrope" factors: long beyond the original context */
    mf_layer *layers;
    mf_tensor *tensors;   /* [gguf->n_tensors]: one per GGUF tensor, in file order */
    mf_tensor *expert_views; /* storage behind the layers' per-expert views */
    /* what the backend's weight loader made (cpu/weights.c: the interleaved
     * copies), and how it is released */
    const char *backend;
    void *be_weights;
    size_t be_weights_size;
    void (*be_weights_free)(struct mf_model *m);
    /* a device loader's allocation, and how it is released */
    void *dev_weights;
    size_t dev_weights_size;
    void (*dev_weights_free)(struct mf_model *m);
    /* a split model (device backends): layers [0, n_cpu_layers) and the
     * token embedding run on the CPU, the rest and the output head on the
     * device; 0 = every layer on the backend */
    uint32_t n_cpu_layers;
    mf_type ftype;        /* dominant weight type, for descriptions */
    uint64_t n_params;
    bool verbose;
    char desc[256];
    char traits[768];    /* "qwen3: RMSNorm, ...; decoupled head dim 32 (...)" for `minfer info` */
};

/* The layer of a "blk.N." tensor, or -1 for the model's global ones. */
int mf_tensor_layer(const mf_tensor *t);
/* With n_cpu_layers set: whether the device side, or the CPU side, reads t
 * (model/split.c). Unsplit, the device reads everything. */
bool mf_split_on_device(const mf_model *m, const mf_tensor *t);
bool mf_split_on_host(const mf_model *m, const mf_tensor *t);

/* Parses the file and binds the weights (no backend work): the first half
 * of mf_model_load (backends/model_load.c), which then runs the backend's
 * weight loader. */
mf_status mf_model_open(const char *path, const mf_model_params *params, mf_model **out);
/* The same over a parsed file, which the model then owns (closed on failure
 * too): a vindex hands in its weights joined behind the stored header. */
mf_status mf_model_open_gguf(gguf_file *g, const mf_model_params *params, mf_model **out);

#endif
