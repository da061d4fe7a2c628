/* arch.h - the architecture traits table (ARCHITECTURE.md principle 1).
 * A family is a row of traits; the single forward pass branches on them.
 * Traits that only some files of a family carry (biases, fused tensors, MoE,
 * sliding windows, scales) are detected from tensors and metadata at load. */
#ifndef MF_MODEL_ARCH_H
#define MF_MODEL_ARCH_H

#include <stdbool.h>
#include <stdint.h>

typedef enum mf_rope_type {
    MF_ROPE_NONE = 0,   /* learned absolute positions instead (gpt2) */
    MF_ROPE_NORM,       /* rotate adjacent pairs (x0,x1), (x2,x3) ... (llama) */
    MF_ROPE_NEOX,       /* rotate halves (x_i, x_{i+n_rot/2}) (gpt-neox, qwen, gemma, phi3) */
} mf_rope_type;

typedef enum mf_norm_type {
    MF_NORM_RMS = 0,
    MF_NORM_LAYER,      /* LayerNorm: mean subtracted, weight and bias */
} mf_norm_type;

typedef enum mf_ffn_type {
    MF_FFN_SWIGLU = 0,  /* down(silu(gate(x)) * up(x)) */
    MF_FFN_GEGLU,       /* down(gelu_tanh(gate(x)) * up(x)) */
    MF_FFN_GELU,        /* down(gelu_tanh(up(x) + b) + b), not gated */
} mf_ffn_type;

typedef struct mf_arch {
    const char *name;     /* general.architecture */
    mf_rope_type rope;
    mf_norm_type norm;
    mf_ffn_type ffn;
    bool qk_norm;         /* per-head RMSNorm of q and k before RoPE (qwen3, gemma3) */
    bool post_norms;      /* norms after attention and after the FFN (gemma2/3) */
    bool embd_scale;      /* token embeddings times sqrt(n_embd) (gemma) */
    bool moe_norm_topk;   /* renormalise the selected experts' weights (default; metadata may override) */
    uint32_t swa_period;  /* sliding-window layer pattern period (0: no SWA by default) */
    bool swa_default;     /* the family always slides (gemma2: window 4096 when the key is absent) */
    bool swa_own_rope;    /* sliding layers use rope.freq_base_swa and no RoPE scaling (gemma3) */
    uint32_t big_layers;  /* layer count of the size whose attention scale is 1/sqrt(n_embd/n_head) (gemma 27B) */
    const char *traits;   /* for `minfer info` */
} mf_arch;

/* NULL for an architecture minfer does not implement. */
const mf_arch *mf_arch_find(const char *name);
/* Comma-separated list of supported architecture names (for messages). */
const char *mf_arch_supported(void);

#endif
