/* weights.c - the CUDA backend's weight loader: every tensor the device side
 * reads (all of them, or with a split model the last layers', the output
 * head and the shared vectors: model/split.c) is copied once into one device
 * allocation, in the file's encoding (the kernels decode blocks as they read
 * them, cuda/dequant.cuh), except Q8_0 rows of whole super-blocks, whose
 * scales and levels are regrouped for aligned loads (kernels.h,
 * MFC_T_Q8_0R), and Q6_K rows of an even number of super-blocks, every odd
 * one's parts reversed for the same reason (MFC_T_Q6_KP); each tensor's
 * `dev` is its device address. Types the
 * kernels do not take, and models the backend cannot run yet, are refused
 * here, before anything is copied. */
#include "cuda/cuda.h"
#include "core/error.h"
#include "core/log.h"
#include "core/timer.h"
#include "model/model.h"
#include "quant/types.h"

#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>

#define ALIGN(n) (((n) + 255) & ~(size_t)255)

_Static_assert(MF_TYPE_Q8_0 == 8 && MF_TYPE_Q6_K == 14, "mfc_dev_type names Q8_0 and Q6_K by their ids");

/* t's bytes to d: as in the file, or repacked (MFC_T_Q8_0R, MFC_T_Q6_KP)
 * through a host buffer of whole rows */
static bool upload(const mf_tensor *t, uint8_t *d, size_t *n_repacked) {
    const int dt = mfc_dev_type((int)t->type, t->ne[0]);
    if (dt == (int)t->type)
        return cudaMemcpy(d, t->data, t->nbytes, cudaMemcpyHostToDevice) == cudaSuccess;
    const size_t rb = mf_row_size(t->type, t->ne[0]), n_rows = t->nbytes / rb;
    size_t chunk = ((size_t)16 << 20) / rb;
    if (chunk < 1) chunk = 1;
    if (chunk > n_rows) chunk = n_rows;
    uint8_t *buf = malloc(chunk * rb);
    if (!buf) return false;
    bool ok = true;
    for (size_t r = 0; ok && r < n_rows; r += chunk) {
        const size_t nr = n_rows - r < chunk ? n_rows - r : chunk;
        ok = mfc_dev_pack(dt, (const uint8_t *)t->data + r * rb, buf, nr, (int)t->ne[0]) &&
             cudaMemcpy(d + r * rb, buf, nr * rb, cudaMemcpyHostToDevice) == cudaSuccess;
    }
    free(buf);
    (*n_repacked)++;
    return ok;
}

static void weights_free(mf_model *m) {
    if (m->dev_weights) cudaFree(m->dev_weights);
    m->dev_weights = NULL;
    for (uint64_t i = 0; m->tensors && i < m->gguf->n_tensors; i++) m->tensors[i].dev = NULL;
    for (size_t i = 0; m->expert_views && i < (size_t)m->hp.n_layer * 3 * m->hp.n_expert; i++) m->expert_views[i].dev = NULL;
}

static mf_status have_device(void) {
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess || n_dev == 0) {
        cudaGetLastError();
        return mf_err(MF_ERR_UNSUPPORTED, "backend cuda: no CUDA device (%s)",
                      e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    }
    return MF_OK;
}

/* Free device memory in bytes into *out; MINFER_CUDA_MEM_MIB=N caps it at
 * N MiB, so -ngl auto can be tried on a model larger than "the device" (a
 * value that is not a number is an error, not ignored) */
static mf_status free_bytes(size_t *out) {
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
        cudaGetLastError();
        fr = SIZE_MAX; /* unknown: cudaMalloc will say */
    }
    const char *lim = getenv("MINFER_CUDA_MEM_MIB");
    if (lim && *lim) {
        char *end;
        const unsigned long long mib = strtoull(lim, &end, 10);
        if (*end || *lim == '-')
            return mf_err(MF_ERR_INVALID_ARG, "MINFER_CUDA_MEM_MIB=%s: expected a number of MiB", lim);
        if (mib * (1ull << 20) < fr) fr = (size_t)(mib * (1ull << 20));
    }
    *out = fr;
    return MF_OK;
}

/* What -ngl auto leaves free besides the weights: activation buffers, the
 * attention's split buffers, the step tables and the CUDA context's own
 * working memory (measured at 200-400 MiB for 8B shapes with n_batch 512,
 * before the f16 prompt tiles' buffers: 79 MiB more there, of which 64 MiB
 * of partial sums, 128 KiB per row of n_batch). */
#define AUTO_RESERVE ((size_t)768 << 20)
/* ... and the KV cache it plans for per layer: 4096 positions in f16 (the
 * context size is not known at load; a larger cache that does not fit is
 * refused when the context is made, with its size) */
#define AUTO_KV_CELLS 4096

mf_status mf_cuda_plan_layers(mf_model *m, int32_t gpu_layers) {
    const uint32_t L = m->hp.n_layer;
    m->n_cpu_layers = 0;
    if (gpu_layers > 0) {
        m->n_cpu_layers = (uint32_t)gpu_layers >= L ? 0 : L - (uint32_t)gpu_layers;
        return MF_OK;
    }
    if (gpu_layers < 0 && gpu_layers != MF_GPU_LAYERS_AUTO)
        return mf_err(MF_ERR_INVALID_ARG, "gpu_layers %d: a layer count (0: all) or MF_GPU_LAYERS_AUTO", (int)gpu_layers);
    if (gpu_layers != MF_GPU_LAYERS_AUTO) return MF_OK;
    mf_status s = have_device();
    size_t fr = 0;
    if (!s) s = free_bytes(&fr);
    if (s) return s;
    size_t *layer = calloc(L ? L : 1, sizeof *layer);
    if (!layer) return mf_err(MF_ERR_NOMEM, "out of memory");
    size_t global = 0, lookup = 0; /* lookup: the tables a split model looks up on the CPU */
    for (uint64_t i = 0; i < m->gguf->n_tensors; i++) {
        const mf_tensor *t = &m->tensors[i];
        const int l = mf_tensor_layer(t);
        if (l >= 0 && (uint32_t)l < L) layer[l] += ALIGN(t->nbytes);
        else if (t == m->pos_embd || (t == m->token_embd && t != m->output)) lookup += ALIGN(t->nbytes);
        else global += ALIGN(t->nbytes);
    }
    const size_t kv = (size_t)AUTO_KV_CELLS * m->hp.n_head_kv * (m->hp.head_dim_k + m->hp.head_dim_v) * 2;
    size_t used = global + AUTO_RESERVE;
    uint32_t n = 0;
    while (n < L && used + layer[L - 1 - n] + kv <= fr) used += layer[L - 1 - n++] + kv;
    /* every layer on the device takes the lookup tables there too */
    if (n == L && used + lookup > fr) n--;
    free(layer);
    if (n == 0)
        return mf_err(MF_ERR_NOMEM, "-ngl auto: not one layer fits in the device's %.0f MiB free (the output head and "
                                    "buffers need %.0f MiB); run on the CPU (-ngl 0)", (double)fr / (1 << 20),
                      (double)(global + AUTO_RESERVE) / (1 << 20));
    m->n_cpu_layers = L - n;
    mf_log(MF_LOG_INFO, "minfer: -ngl auto: %.0f MiB of device memory free%s: %u of %u layers fit\n",
           (double)fr / (1 << 20), getenv("MINFER_CUDA_MEM_MIB") ? " (MINFER_CUDA_MEM_MIB)" : "", n, L);
    return MF_OK;
}

mf_status mf_cuda_weights_load(mf_model *m, const mf_model_params *p) {
    mf_status s = have_device();
    if (s) return s;
    const uint64_t n = m->gguf->n_tensors;
    size_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        const mf_tensor *t = &m->tensors[i];
        if (!mf_split_on_device(m, t)) continue;
        /* matrices go through the product kernels (and the embedding lookup);
         * vectors (norms, biases, RoPE factors) are f32 */
        if (t->ne[1] > 1 || t->n_dims > 1) {
            if (!mfc_type_ok((int)t->type))
                return mf_err(MF_ERR_UNSUPPORTED, "backend cuda: tensor %s has type %s, which the cuda kernels do not "
                                                  "take yet (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, "
                                                  "Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)", t->name, mf_type_name(t->type));
        } else if (t->type != MF_TYPE_F32) {
            return mf_err(MF_ERR_UNSUPPORTED, "backend cuda: vector %s has type %s (only F32 vectors are supported)",
                          t->name, mf_type_name(t->type));
        }
        total += ALIGN(t->nbytes);
    }
    const double t0 = mf_now();
    void *base = NULL;
    size_t fr = 0;
    if ((s = free_bytes(&fr))) return s;
    if (total > fr || cudaMalloc(&base, total ? total : 256) != cudaSuccess) {
        cudaGetLastError();
        return mf_err(MF_ERR_NOMEM, "backend cuda: %.1f MiB of weights do not fit in the device's %.1f MiB free "
                                    "(-ngl N keeps the first layers on the CPU; -ngl auto fits as many as it can)",
                      (double)total / (1 << 20), (double)fr / (1 << 20));
    }
    size_t off = 0, n_rp = 0;
    uint64_t n_up = 0;
    for (uint64_t i = 0; i < n; i++) {
        mf_tensor *t = &m->tensors[i];
        if (!mf_split_on_device(m, t)) continue;
        uint8_t *d = (uint8_t *)base + off;
        if (!upload(t, d, &n_rp)) {
            cudaGetLastError();
            cudaFree(base);
            for (uint64_t j = 0; j < n; j++) m->tensors[j].dev = NULL;
            return mf_err(MF_ERR_IO, "backend cuda: upload of %s failed", t->name);
        }
        t->dev = d;
        off += ALIGN(t->nbytes);
        n_up++;
    }
    /* each expert's 2-D view: its slice of the uploaded stack */
    for (uint32_t l = 0; m->hp.n_expert && l < m->hp.n_layer; l++) {
        const mf_layer *L = &m->layers[l];
        const mf_weight st[3] = {L->ffn_gate_exps, L->ffn_up_exps, L->ffn_down_exps};
        mf_tensor *vw[3] = {(mf_tensor *)L->gate_exp, (mf_tensor *)L->up_exp, (mf_tensor *)L->down_exp};
        for (int i = 0; i < 3; i++)
            for (uint32_t e = 0; st[i] && st[i]->dev && vw[i] && e < m->hp.n_expert; e++)
                vw[i][e].dev = (uint8_t *)st[i]->dev + (size_t)e * vw[i][e].nbytes;
    }
    m->dev_weights = base;
    m->dev_weights_size = total;
    m->dev_weights_free = weights_free;
    const uint32_t L = m->hp.n_layer;
    if (m->n_cpu_layers)
        mf_log(MF_LOG_INFO, "minfer: cuda: layers %u..%u and the output head on the GPU (%.1f MiB), layers 0..%u and "
                            "the token lookup on the CPU\n", m->n_cpu_layers, L - 1, (double)total / (1 << 20),
               m->n_cpu_layers - 1);
    if (m->verbose || p->verbose)
        mf_log(MF_LOG_INFO, "minfer: cuda: %llu tensors (%.1f MiB) uploaded once in the file's encoding, %zu of them "
                            "repacked for aligned loads (Q8_0 rows of whole super-blocks: each 8 blocks' scales, "
                            "then their levels; Q6_K rows of an even count of super-blocks: every odd one's parts "
                            "reversed); in %.2f s\n",
               (unsigned long long)n_up, (double)total / (1 << 20), n_rp, mf_now() - t0);
    return MF_OK;
}
