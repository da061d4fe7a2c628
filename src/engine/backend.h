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
    mf_weight freq_factors; /* f32 weight of n_rot/2 divisors of the frequencies (Llama 3.1 rope_freqs), or NULL */
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

/* Shape of the KV cache a context asks its backend for: n_pages pages of
 * page_size positions each (engine/kv.c owns which sequence holds which
 * page). A cell is page * page_size + slot. */
typedef struct mf_kv_desc {
    mf_kv_type type;
    uint32_t n_pages;
    uint32_t page_size;
    uint32_t n_layer;
    uint32_t k_width;  /* n_head_kv * head_dim_k */
    uint32_t v_width;  /* n_head_kv * head_dim_v */
    uint32_t head_dim_k, head_dim_v;
} mf_kv_desc;

/* One sequence's rows in a step: rows [row0, row0 + n_rows) of the step are
 * its tokens at positions pos0, pos0 + 1, ...; its keys at positions
 * [0, pos0 + n_rows) are in the cells its block table names (position p in
 * page pages[p / page_size], slot p % page_size). */
typedef struct mf_step_seq {
    int32_t row0, n_rows;
    int32_t pos0;
    const int32_t *pages;
} mf_step_seq;

/* Everything a forward pass needs per token, handed to the backend once in
 * begin_step: a device backend copies it over once and replays a captured
 * step; ops that need per-token inputs read them from here. Rows of one
 * sequence are consecutive and in position order (the engine sorts them). */
typedef struct mf_step {
    int32_t n_tok;
    const mf_token *tokens;  /* [n_tok] */
    const int32_t *pos;      /* [n_tok] position of each row */
    const int32_t *cell;     /* [n_tok] KV cell each row's K/V go to */
    int32_t n_seq;
    const mf_step_seq *seqs; /* [n_seq] */
    int32_t n_out;
    const int32_t *out_rows; /* [n_out] rows whose output (logits, embeddings) is wanted */
} mf_step;

/* Mixture-of-experts routing of one layer. */
#define MF_MAX_EXPERTS 1024
#define MF_MAX_EXPERTS_USED 64
typedef struct mf_moe_route {
    int n_expert, k;
    bool sigmoid;    /* sigmoid instead of softmax over the router's logits */
    bool norm_topk;  /* renormalise the k selected weights to sum 1 */
    float scale;     /* multiply the weights (1 = none) */
} mf_moe_route;

/* Which per-row ids of the step an op reads. */
typedef enum mf_step_ids { MF_STEP_TOKENS, MF_STEP_POSITIONS } mf_step_ids;

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
    /* bracket one forward pass; the step (and what it points to) stays valid
     * until end_step, which returns once the step's results are final. Ops
     * between them return nothing: a device backend queues them on a stream
     * (and may replay a captured step), so a failure inside one is known only
     * later; the backend keeps the first and end_step (or synchronize's
     * caller through end_step) reports it. The CPU's ops cannot fail: their
     * memory is planned when the context is made. */
    mf_status (*begin_step)(mf_backend *be, const mf_step *step);
    mf_status (*end_step)(mf_backend *be);
    /* wait for every queued op (a no-op where ops are synchronous) */
    void (*synchronize)(mf_backend *be);
    /* worker threads, and changing their number between steps */
    int (*n_threads)(mf_backend *be);
    mf_status (*set_threads)(mf_backend *be, int n_threads);
    /* whether matmul takes weights of this type */
    bool (*supports_type)(mf_backend *be, mf_type t);

    /* out[r] = row ids[r] of w as f32 for each step row r, where ids are the
     * step's token ids (MF_STEP_TOKENS) or positions (MF_STEP_POSITIONS) */
    void (*get_rows)(mf_backend *be, mf_weight w, mf_step_ids which, float *out);
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
    /* dst[j] = src[out_rows[first + j]] for j < count: the step's output
     * rows (width n) gathered for the output head */
    void (*gather_out)(mf_backend *be, const float *src, int first, int count, int n, float *dst);
    /* routing: for each of n rows of router logits [n][n_expert], the k
     * experts chosen (sel [n][k], ties to the lower id) and their weights
     * (w [n][k]); sel and w are backend buffers, never read by the host */
    void (*moe_route)(mf_backend *be, const float *logits, int n, const mf_moe_route *p, int32_t *sel, float *w);
    /* expert-indexed product: out[t][j] = x[t or (t, j)] . experts[sel[t][j]]^T
     * for each of the k slots j of rows t; x holds one row per token
     * (x_per_slot false) or one per slot. tmp_in / tmp_out: scratch of
     * rows * k rows of the input / output width */
    void (*matmul_id)(mf_backend *be, mf_weight experts, int n_expert, const float *x, bool x_per_slot, int rows, int k,
                      const int32_t *sel, float *out, float *tmp_in, float *tmp_out);
    /* x[r][:] *= s[r] (or sigmoid(s[r])) for rows of width n */
    void (*scale_rows)(mf_backend *be, float *x, const float *s, bool sigmoid, int rows, int n);
    /* out[t] = sum over k of src[t][k] (k in order), rows of width n */
    void (*sum_slots)(mf_backend *be, const float *src, int rows, int k, int n, float *out);
    /* x = cap * tanh(x / cap) */
    void (*softcap)(mf_backend *be, float *x, float cap, size_t n);
    /* x[i] *= s */
    void (*scale)(mf_backend *be, float *x, float s, size_t n);
    /* rotate n_head heads of width head_dim in each step row, at the row's
     * position in the step */
    void (*rope)(mf_backend *be, float *x, int n_head, int head_dim, const mf_rope_params *p);
    /* out = act(gate) * up, elementwise over n (SiLU or GELU-tanh); MF_FFN_GELU: out = gelu(gate), up unused */
    void (*glu)(mf_backend *be, mf_ffn_type act, const float *gate, const float *up, size_t n, float *out);
    /* write the step's k/v rows (one per step row) into its cells of the layer */
    void (*kv_store)(mf_backend *be, int layer, const float *k, const float *v);
    /* raw cache bytes of cells[0..n) of one layer, in the cache type: the n
     * K rows, then the n V rows; dst NULL only counts. Returns the byte
     * count. Sessions save and restore the cache through this pair, so a
     * restored cache is bitwise the saved one whatever the device. */
    size_t (*kv_read)(mf_backend *be, int layer, const int32_t *cells, uint32_t n, void *dst);
    /* the inverse: overwrite those cells from bytes laid out as kv_read gives them */
    void (*kv_write)(mf_backend *be, int layer, const int32_t *cells, uint32_t n, const void *src);
    /* copy page src to page dst in every layer (copy-on-write of a shared page) */
    void (*kv_copy_page)(mf_backend *be, int32_t src, int32_t dst);
    /* causal attention of the step's queries, each over its own sequence's
     * cached keys at positions <= its own (and inside the window) */
    void (*attention)(mf_backend *be, int layer, const float *q, const mf_attn_params *p, float *out);
    /* copy n floats from a backend buffer to host memory */
    void (*download)(mf_backend *be, const float *src, size_t n, float *dst);
    /* Optional (NULL: matmul, then download of its rows x w->ne[1]
     * floats): the same product, its result copied into host memory dst,
     * where a device backend may copy parts while it computes the rest (the
     * output head of many rows). out is the backend's scratch of that size,
     * in a layout of the backend's own afterwards. */
    void (*matmul_download)(mf_backend *be, mf_weight w, const float *x, int rows, float *out, float *dst);
    /* the inverse, queued as an op of the step: n floats of host memory into
     * a backend buffer (a split model's residual stream, from the CPU's
     * layers to the device's). src may be reused once upload returns. */
    void (*upload)(mf_backend *be, const float *src, size_t n, float *dst);
    /* host memory that download fills fastest (a device's pinned memory),
     * for the context's logits and embeddings; NULL on failure. Both NULL:
     * the engine uses malloc and free. */
    void *(*host_alloc)(mf_backend *be, size_t bytes);
    void (*host_free)(mf_backend *be, void *p);
    /* Device time for the op profiler (MINFER_OP_PROFILE=1); both NULL
     * where ops run on the host. Inside a step, mark queues a timestamp
     * behind every op queued so far (held-back fusions launched first) and
     * returns its number in the step (-1 if none was queued); once end_step
     * has returned, mark_ms gives the device time between marks a and b in
     * milliseconds (negative if unknown). Numbers restart at begin_step. */
    int (*mark)(mf_backend *be);
    double (*mark_ms)(mf_backend *be, int a, int b);
} mf_backend_ops;

struct mf_backend {
    const mf_backend_ops *ops;
};

/* A step of one sequence (id 0) of n_tok rows at positions pos0.. over a
 * cache whose pages are 0, 1, 2, ... in order: what tests of single ops and
 * benchmarks hand to begin_step. The arrays are the caller's (tokens may be
 * NULL); pages, pos and cell need n_tok (pos/cell) and (pos0 + n_tok) /
 * page_size + 1 (pages) entries. */
void mf_step_linear(mf_step *st, mf_step_seq *seq, int32_t *pos, int32_t *cell, int32_t *pages, const mf_token *tokens,
                    int n_tok, uint32_t pos0, uint32_t page_size);

#endif
