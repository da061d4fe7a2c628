/* backend.h - the op boundary between the forward pass and a device
 * (ARCHITECTURE.md principle 2).
 *
 * The forward pass (engine/forward.c) is written once against this table. It
 * only does pointer arithmetic on activation buffers and never dereferences
 * them, so a backend may keep them in device memory. Buffers come from
 * `alloc`; the KV cache lives inside the backend. Fusions and kernel choices
 * are backend decisions. */
#ifndef MF_ENGINE_BACKEND_H
#define MF_ENGINE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "minfer.h"
#include "model/model.h"

typedef struct mf_rope_params {
    mf_rope_type type;
    int n_rot;        /* rotated dims per head (the rest pass through) */
    float base;
    float freq_scale; /* linear position scaling */
    const float *freq_factors; /* n_rot/2 divisors of the frequencies (Llama 3.1 rope_freqs), or NULL */
    /* YaRN: blend interpolated and extrapolated angles between corr_dims, scale cos/sin */
    float ext_factor;  /* 0 = off */
    float attn_factor; /* magnitude scale of cos/sin (1 = none) */
    float corr_dims[2];
} mf_rope_params;

typedef struct mf_attn_params {
    int n_head, n_head_kv;
    int head_dim_k, head_dim_v;
    float scale;      /* applied to q.k before softmax */
    float softcap;    /* tanh soft-capping of scores, 0 = off */
    int window;       /* sliding window (keys with pos > query_pos - window), 0 = off */
} mf_attn_params;

/* Shape of the KV cache a context asks its backend for. */
typedef struct mf_kv_desc {
    mf_kv_type type;
    uint32_t n_ctx;
    uint32_t n_layer;
    uint32_t k_width;  /* n_head_kv * head_dim_k */
    uint32_t v_width;  /* n_head_kv * head_dim_v */
    uint32_t head_dim_k, head_dim_v;
} mf_kv_desc;

typedef struct mf_backend mf_backend;

typedef struct mf_backend_ops {
    const char *name;
    /* activation buffers are ordinary host memory: the forward pass may then
     * hand an op a host buffer as its output (the logits) and skip a download */
    bool host_memory;
    void (*destroy)(mf_backend *be);
    /* activation buffer of n floats; NULL on failure */
    float *(*alloc)(mf_backend *be, size_t n);
    mf_status (*kv_init)(mf_backend *be, const mf_kv_desc *desc);

    /* out[i] = row ids[i] of w, as f32 (ids are host memory, validated) */
    void (*get_rows)(mf_backend *be, mf_weight w, const mf_token *ids, int n, float *out);
    /* out = norm(x) * w (+ b); RMS or LayerNorm per row of n; w/b may be NULL */
    void (*norm)(mf_backend *be, mf_norm_type type, const float *x, mf_weight w, mf_weight b, int rows, int n,
                 float eps, float *out);
    /* out[rows][w->ne[1]] = x[rows][w->ne[0]] . W^T */
    void (*matmul)(mf_backend *be, mf_weight w, const float *x, int rows, float *out);
    /* nw (<= 4) products of the same input (Q/K/V, gate/up), which the
     * backend may convert once and run as one job, with their epilogue:
     *   out[i] = x . w[i]^T, then out[i][r][j] += b[i][j]  (b NULL or b[i] NULL: no bias)
     *   then, when res is given, res += out[0]  (the residual add; same shape as out[0])
     * in that order, so a fused epilogue gives the bits of the separate ops */
    void (*matmul_n)(mf_backend *be, const mf_weight *w, const mf_weight *b, int nw, const float *x, int rows,
                     float *const *out, float *res);
    /* a[i] += b[i] */
    void (*add)(mf_backend *be, float *a, const float *b, size_t n);
    /* dst[r][0..n) = src[r][col0..col0+n) for rows of src_width */
    void (*copy_cols)(mf_backend *be, const float *src, int src_width, int col0, int n, int rows, float *dst);
    /* dst[i] = src[idx[i]], rows of width n (idx in host memory) */
    void (*gather_rows)(mf_backend *be, const float *src, const int32_t *idx, int count, int n, float *dst);
    /* dst[idx[i]] = src[i] * scale[i], rows of width n (idx/scale in host memory; dst may be src) */
    void (*scatter_rows)(mf_backend *be, const float *src, const int32_t *idx, const float *scale, int count, int n,
                         float *dst);
    /* out[t] = sum over k of src[t][k] (k in order), rows of width n */
    void (*sum_slots)(mf_backend *be, const float *src, int rows, int k, int n, float *out);
    /* x = cap * tanh(x / cap) */
    void (*softcap)(mf_backend *be, float *x, float cap, size_t n);
    /* x[i] *= s */
    void (*scale)(mf_backend *be, float *x, float s, size_t n);
    /* rotate n_head heads of width head_dim in each of n_tok rows; pos[t] is row t's position */
    void (*rope)(mf_backend *be, float *x, int n_tok, int n_head, int head_dim, const int32_t *pos,
                 const mf_rope_params *p);
    /* out = act(gate) * up, elementwise over n (SiLU or GELU-tanh); MF_FFN_GELU: out = gelu(gate), up unused */
    void (*glu)(mf_backend *be, mf_ffn_type act, const float *gate, const float *up, size_t n, float *out);
    /* write k/v rows of n_tok tokens at positions pos0.. into layer's cache */
    void (*kv_store)(mf_backend *be, int layer, const float *k, const float *v, int n_tok, uint32_t pos0);
    /* raw cache bytes of positions [pos0, pos0+n) of one layer, in the cache
     * type: the n K rows, then the n V rows; dst NULL only counts. Returns the
     * byte count. Sessions save and restore the cache through this pair, so a
     * restored cache is bitwise the saved one whatever the device. */
    size_t (*kv_read)(mf_backend *be, int layer, uint32_t pos0, uint32_t n, void *dst);
    /* the inverse: overwrite those rows from bytes laid out as kv_read gives them */
    void (*kv_write)(mf_backend *be, int layer, uint32_t pos0, uint32_t n, const void *src);
    /* causal attention of n_tok queries at positions pos0.. over cache[0, pos0+n_tok) */
    void (*attention)(mf_backend *be, int layer, const float *q, int n_tok, uint32_t pos0, const mf_attn_params *p,
                      float *out);
    /* copy n floats from a backend buffer to host memory */
    void (*download)(mf_backend *be, const float *src, size_t n, float *dst);
} mf_backend_ops;

struct mf_backend {
    const mf_backend_ops *ops;
};

/* The CPU backend: n_threads workers (0 = all CPUs), scratch sized for
 * batches of up to max_rows rows of up to max_width floats. */
mf_backend *mf_cpu_backend_new(int n_threads, int max_rows, int max_width, uint32_t max_ctx, bool verbose);

#endif
