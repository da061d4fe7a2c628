/* tensor.h - a weight as the engine and the backends see it: backend-neutral
 * (name, type, shape, the file's bytes) plus one backend-private handle.
 *
 * The model binds one mf_tensor per GGUF tensor (model/load.c); the GGUF
 * reader's records stay read-only views of the file. A backend's weight
 * loader (registered by name in backends/registry.c) fills `handle`: the
 * CPU's interleaved copy (cpu/weights.c). A device backend's loader fills
 * `dev` (the tensor's device address) instead, so that with a split model
 * (the first layers on the CPU, the rest on a GPU) a tensor both sides read
 * (a tied embedding: looked up on the CPU, the output head on the GPU) has
 * each side's copy. `data` always names the file's bytes, which a device
 * backend uploads; where the CPU released those pages after interleaving,
 * every CPU reader goes through the handle instead. */
#ifndef MF_ENGINE_TENSOR_H
#define MF_ENGINE_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "quant/types.h"

typedef struct mf_tensor {
    const char *name;
    mf_type type;
    uint32_t n_dims;
    int64_t ne[4];      /* ne[0] is the row length; unused dims are 1 */
    size_t nbytes;
    const void *data;   /* the file's bytes (inside the mapping) */
    void *handle;       /* the host backend's copy (CPU x16); NULL: read `data` */
    void *dev;          /* a device backend's copy; NULL when no device holds it */
} mf_tensor;

#endif
