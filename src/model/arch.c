/* arch.c - one row per supported family. Adding a model should be a row here
 * plus, at most, the handful of metadata keys it introduces in load.c. */
#include "model/arch.h"

#include <string.h>

#define R(n, ROPE, NORM_, FFN) .name = n, .rope = MF_ROPE_##ROPE, .norm = MF_NORM_##NORM_, .ffn = MF_FFN_##FFN

static const mf_arch g_arches[] = {
    {R("llama", NORM, RMS, SWIGLU), .moe_norm_topk = true,
     .traits = "RMSNorm, RoPE normal, SwiGLU"},
    {R("qwen2", NEOX, RMS, SWIGLU), .traits = "RMSNorm, RoPE NeoX, SwiGLU"},
    {R("qwen2moe", NEOX, RMS, SWIGLU), .moe_norm_topk = false,
     .traits = "RMSNorm, RoPE NeoX, SwiGLU experts"},
    {R("qwen3", NEOX, RMS, SWIGLU), .qk_norm = true, .traits = "RMSNorm, RoPE NeoX, QK-norm, SwiGLU"},
    {R("qwen3moe", NEOX, RMS, SWIGLU), .qk_norm = true, .moe_norm_topk = true,
     .traits = "RMSNorm, RoPE NeoX, QK-norm, SwiGLU experts"},
    {R("gemma", NEOX, RMS, GEGLU), .embd_scale = true, .traits = "RMSNorm, RoPE NeoX, GeGLU, embeddings x sqrt(n_embd)"},
    {R("gemma2", NEOX, RMS, GEGLU), .post_norms = true, .embd_scale = true, .swa_period = 2, .swa_default = true,
     .big_layers = 46,
     .traits = "RMSNorm pre+post, RoPE NeoX, GeGLU, embeddings x sqrt(n_embd)"},
    {R("gemma3", NEOX, RMS, GEGLU), .qk_norm = true, .post_norms = true, .embd_scale = true, .swa_period = 6,
     .swa_own_rope = true, .big_layers = 62,
     .traits = "RMSNorm pre+post, QK-norm, RoPE NeoX (own base on sliding layers), GeGLU, "
               "embeddings x sqrt(n_embd)"},
    {R("phi3", NEOX, RMS, SWIGLU), .traits = "RMSNorm, RoPE NeoX, SwiGLU"},
    {R("granite", NORM, RMS, SWIGLU),
     .traits = "RMSNorm, RoPE normal, SwiGLU"},
    {R("gpt2", NONE, LAYER, GELU),
     .traits = "LayerNorm with bias, learned absolute positions, GELU FFN (not gated)"},
    {R("starcoder2", NEOX, LAYER, GELU), .traits = "LayerNorm with bias, RoPE NeoX, GELU FFN (not gated)"},
};

const mf_arch *mf_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof g_arches / sizeof g_arches[0]; i++)
        if (!strcmp(g_arches[i].name, name)) return &g_arches[i];
    return NULL;
}

const char *mf_arch_supported(void) {
    return "llama, qwen2, qwen2moe, qwen3, qwen3moe, gemma, gemma2, gemma3, phi3, granite, gpt2, starcoder2";
}
