/* weights.c - the CUDA backend's weight loader: every tensor of the file is
 * copied once into one device allocation, in the file's encoding (the
 * kernels decode blocks as they read them, cuda/dequant.cuh); each tensor's
 * handle is its device address. Types the kernels do not take, and models
 * the backend cannot run yet, are refused here, before anything is copied. */
#include "cuda/cuda.h"
#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "model/model.h"
#include "quant/types.h"

#include <stdio.h>

static void weights_free(mf_model *m) {
    if (m->be_weights) cudaFree(m->be_weights);
    m->be_weights = NULL;
}

mf_status mf_cuda_weights_load(mf_model *m, const mf_model_params *p) {
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess || n_dev == 0) {
        cudaGetLastError();
        return mf_err(MF_ERR_UNSUPPORTED, "backend cuda: no CUDA device (%s)",
                      e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    }
    if (m->hp.n_expert)
        return mf_err(MF_ERR_UNSUPPORTED, "backend cuda: mixture-of-experts models (%u experts) are not supported yet",
                      m->hp.n_expert);
    const uint64_t n = m->gguf->n_tensors;
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const mf_tensor *t = &m->tensors[i];
        /* matrices go through the product kernels (and the embedding lookup);
         * vectors (norms, biases, RoPE factors) are f32 */
        if (t->ne[1] > 1 || t->n_dims > 1) {
            if (!mfc_type_ok((int)t->type))
                return mf_err(MF_ERR_UNSUPPORTED, "backend cuda: tensor %s has type %s, which the cuda kernels do not "
                                                  "take yet (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, "
                                                  "Q6_K)", t->name, mf_type_name(t->type));
        } else if (t->type != MF_TYPE_F32) {
            return mf_err(MF_ERR_UNSUPPORTED, "backend cuda: vector %s has type %s (only F32 vectors are supported)",
                          t->name, mf_type_name(t->type));
        }
        total += (t->nbytes + 255) & ~(size_t)255;
    }
    const double t0 = mf_now();
    void *base = NULL;
    if (cudaMalloc(&base, total ? total : 256) != cudaSuccess) {
        cudaGetLastError();
        size_t fr = 0, tot = 0;
        cudaMemGetInfo(&fr, &tot);
        return mf_err(MF_ERR_NOMEM, "backend cuda: %.1f MiB of weights do not fit in the device's %.1f MiB free "
                                    "(partial offload is not supported yet)", (double)total / (1 << 20),
                      (double)fr / (1 << 20));
    }
    size_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        mf_tensor *t = &m->tensors[i];
        uint8_t *d = (uint8_t *)base + off;
        if (cudaMemcpy(d, t->data, t->nbytes, cudaMemcpyHostToDevice) != cudaSuccess) {
            cudaGetLastError();
            cudaFree(base);
            for (uint64_t j = 0; j < n; j++) m->tensors[j].handle = NULL;
            return mf_err(MF_ERR_IO, "backend cuda: upload of %s failed", t->name);
        }
        t->handle = d;
        off += (t->nbytes + 255) & ~(size_t)255;
    }
    m->be_weights = base;
    m->be_weights_size = total;
    m->be_weights_free = weights_free;
    if (m->verbose || p->verbose)
        mf_log(MF_LOG_INFO, "minfer: cuda: %llu tensors (%.1f MiB) uploaded once in the file's encoding (no repack) in "
                            "%.2f s\n", (unsigned long long)n, (double)total / (1 << 20), mf_now() - t0);
    return MF_OK;
}
