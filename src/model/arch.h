/* arch.h - the architecture traits table (ARCHITECTURE.md principle 1).
 * A family is a row of traits; the single forward pass branches on them. */
#ifndef MF_MODEL_ARCH_H
#define MF_MODEL_ARCH_H

#include <stdbool.h>

typedef enum mf_rope_type {
    MF_ROPE_NONE = 0,   /* learned absolute positions instead */
    MF_ROPE_NORM,       /* rotate adjacent pairs (x0,x1), (x2,x3) ... (llama) */
    MF_ROPE_NEOX,       /* rotate halves (x_i, x_{i+n_rot/2}) (gpt-neox, qwen, gemma) */
} mf_rope_type;

typedef enum mf_norm_type {
    MF_NORM_RMS = 0,
    MF_NORM_LAYER,      /* LayerNorm with mean subtraction and optional bias */
} mf_norm_type;

typedef enum mf_ffn_type {
    MF_FFN_SWIGLU = 0,  /* down(silu(gate(x)) * up(x)) */
    MF_FFN_GEGLU,       /* down(gelu_tanh(gate(x)) * up(x)) */
    MF_FFN_GELU,        /* down(gelu(up(x) + b) + b), not gated */
} mf_ffn_type;

typedef struct mf_arch {
    const char *name;   /* general.architecture */
    mf_rope_type rope;
    mf_norm_type norm;
    mf_ffn_type ffn;
    bool qk_norm;       /* per-head RMSNorm of q and k before RoPE */
    bool post_norms;    /* extra norms after attention and after FFN (gemma2/3) */
    bool embd_scale;    /* scale token embeddings by sqrt(n_embd) (gemma) */
    bool moe;           /* mixture-of-experts FFN when the expert tensors exist */
} mf_arch;

/* NULL for an architecture minfer does not implement. */
const mf_arch *mf_arch_find(const char *name);
/* Comma-separated list of supported architecture names (for messages). */
const char *mf_arch_supported(void);

#endif
