/* arch.c - one row per supported family. Adding a model should be a row here
 * plus, at most, the handful of metadata keys it introduces in load.c. */
#include "model/arch.h"

#include <string.h>

static const mf_arch g_arches[] = {
    /* name      rope          norm          ffn            qk_norm post_norms embd_scale moe */
    {"llama",    MF_ROPE_NORM, MF_NORM_RMS,  MF_FFN_SWIGLU, false,  false,     false,     true},
};

const mf_arch *mf_arch_find(const char *name) {
    for (size_t i = 0; i < sizeof g_arches / sizeof g_arches[0]; i++)
        if (!strcmp(g_arches[i].name, name)) return &g_arches[i];
    return NULL;
}

const char *mf_arch_supported(void) { return "llama"; }
