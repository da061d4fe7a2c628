/* split.c - which side of a split model reads each tensor (mf_model.n_cpu_layers,
 * llama.cpp's -ngl N below the layer count): the first layers and the token
 * lookup on the CPU, the remaining layers and the output head on the device,
 * the residual stream crossing once per forward pass. Both weight loaders ask
 * here, so the two never disagree about a tensor. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

int mf_tensor_layer(const mf_tensor *t) {
    if (!t->name || strncmp(t->name, "blk.", 4)) return -1;
    char *end;
    const long l = strtol(t->name + 4, &end, 10);
    return end != t->name + 4 && *end == '.' && l >= 0 && l < (1L << 30) ? (int)l : -1;
}

/* globals only the embedding stage reads (the first layer's side) */
static bool lookup_only(const mf_model *m, const mf_tensor *t) {
    return (t == m->token_embd && t != m->output) || t == m->pos_embd;
}

bool mf_split_on_device(const mf_model *m, const mf_tensor *t) {
    if (!m->n_cpu_layers) return true;
    const int l = mf_tensor_layer(t);
    if (l >= 0) return (uint32_t)l >= m->n_cpu_layers;
    return !lookup_only(m, t);
}

bool mf_split_on_host(const mf_model *m, const mf_tensor *t) {
    if (!m->n_cpu_layers) return false;
    const int l = mf_tensor_layer(t);
    if (l >= 0) return (uint32_t)l < m->n_cpu_layers;
    /* the output head and its norm are the device's; a tied head is also the
     * CPU's lookup table, read there in the file's bytes */
    return t == m->token_embd || (t != m->output && t != m->output_norm && t != m->output_norm_b);
}
