/* cuda.h - the CUDA backend's state (one per context: its own stream, KV
 * cache, activation buffers and step buffers) and its entry points for the
 * registry (backends/registry.c). Host code is C; kernels are in k_*.cu
 * behind kernels.h. */
#ifndef MF_CUDA_H
#define MF_CUDA_H

#include <stdbool.h>
#include <stdint.h>

#include "engine/backend.h"
#include "backends/registry.h"
#include "cuda/kernels.h"

/* How a step's ops run: queued as they come (eager), queued while the
 * stream is being captured into a graph (capture), or not run at all because
 * a graph captured earlier for the same op sequence replays them (replay). */
typedef enum mfc_mode { MFC_EAGER, MFC_CAPTURE, MFC_REPLAY } mfc_mode;

#define ATT_SPLIT_ROWS 64

#define MFC_HEAD_PARTS_MAX 8

typedef struct mf_cuda {
    mf_backend base;
    cudaStream_t stream;
    int device;
    bool verbose;
    int max_rows;
    uint32_t max_ctx;
    mf_status err; /* first failure since the last end_step */
    char err_msg[256];
    void **bufs;
    int n_bufs;
    /* activations of a decode product quantized to int8 (k_mmvq.cu), and
     * which input they hold (reused across the products of one matmul_n) */
    mfc_q8 q8b[2]; /* two, so a kernel can read one and quantize its output into the other */
    int q8_i;      /* q8b[q8_i] holds the quantization of q8_x */
    const float *q8_x;
    size_t q8_cap; /* int8 elements each holds */
    bool q8_hold;     /* the last op wrote q8_x and its quantization together */
    bool q8_hold_now; /* q8_hold as the op now running found it */
    /* the scales the next quantization of pin_x takes (mfc_q8.g8), as the
     * op that wrote it decided, fused with its quantization or not, so
     * both give the same bits (attention: per 32; the gated activation:
     * by gate's and up's types); the next quantization clears it */
    const float *pin_x;
    bool pin_g8;
    /* one op held back so the next can fuse with it (MINFER_CUDA_FUSE=0:
     * none): a norm (into norm+quantize, or QK-norm+RoPE), or a gate/up
     * pair of decode products (into gate/up+activation+quantize) */
    bool fuse;
    struct {
        enum { PEND_NONE, PEND_NORM, PEND_GATE_UP } kind;
        bool layer;
        const float *x, *w, *b;
        int rows, n, k;
        float eps;
        float *out;
        mfc_mm_seg seg[2];
    } pend;
    /* RoPEs held back (older than pend): Q's and K's, each with its QK-norm,
     * taken into the KV store that follows (mfc_rope_store) */
    struct {
        int n, rows, head_dim;
        mfc_rope r;
        mfc_rope_grp g[2];
    } rp;
    bool mmvq; /* MINFER_CUDA_MMVQ=0 takes the f32 path for every type */
    bool tc;   /* MINFER_CUDA_TC=0: prefill on the f32 tiles for every type */
    /* a prompt's activations in f16 for k_gemm_h.cu (none when max_rows is
     * below mfc_gemm_h_rows) */
    mfc_xh xh;
    size_t xh_cap; /* halves */
    /* KV cache: per layer, one row per cell in f16 or f32 (k_attn.cu) */
    mf_kv_desc kv;
    void **k, **v;
    size_t k_row_bytes, v_row_bytes;
    /* flash-decoding: steps of up to ATT_SPLIT_ROWS rows split each query's
     * keys in shares (mfc_att_share), at most att_split of them (at
     * max_ctx); their states go to att_part */
    int att_split;
    bool att_early; /* MINFER_CUDA_ATT_EARLY=0: the tile and mma attention copy nothing before their wait */
    float *att_part;
    int att_heads; /* query heads att_part has room for */
    int max_width;
    /* the step: host arrays in pinned memory, copied to dev in begin_step */
    const mf_step *step;
    int32_t *h_step, *d_step;
    size_t step_cap; /* int32s */
    mfc_step_dev sd;
    /* decode graphs: one captured op sequence (for one-row steps), replayed
     * while the forward asks for the same ops with the same arguments */
    bool graphs;
    mfc_mode mode;
    uint64_t hash;
    cudaGraphExec_t exec;
    uint64_t exec_hash;
    int graph_nout; /* output rows of the one-row steps the graph is for (-1: none yet) */
    int n_dl;    /* downloads so far in this step */
    float *h_dl; /* pinned staging of a graph's download */
    size_t dl_cap;
    float *h_ul; /* pinned staging of uploads (a split model's residual stream) */
    size_t ul_cap;
    int n_captures, n_replays;
    /* the output head's logits copied down in parts (cu_matmul_download):
     * MINFER_CUDA_HEAD_PARTS (1 = one product, then one copy) */
    int head_parts;
    cudaStream_t dl_stream;
    cudaEvent_t head_ev[MFC_HEAD_PARTS_MAX];
    /* the op profiler's timestamps in this step (cu_mark), events reused */
    cudaEvent_t *ev;
    int n_ev, n_mark;
} mf_cuda;

mf_backend *mf_cuda_backend_new(const mf_backend_config *cfg, char *why, size_t why_len);
/* Upload every tensor of the model to the device once, in the file's
 * encoding; refuses types the kernels do not take, naming the tensor. */
mf_status mf_cuda_weights_load(mf_model *m, const mf_model_params *p);
/* Sets m->n_cpu_layers from mf_model_params.gpu_layers (N, or
 * MF_GPU_LAYERS_AUTO: as many of the last layers as fit), before the loaders run. */
mf_status mf_cuda_plan_layers(mf_model *m, int32_t gpu_layers);

/* GB/s (read + written) of a device-to-device copy of `bytes`; -1 on failure */
double mf_cuda_copy_bandwidth(size_t bytes);

#endif
