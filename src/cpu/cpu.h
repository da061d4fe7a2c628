/* cpu.h - the CPU backend's state and its op kernels (plain C for now;
 * SIMD variants are chosen at run time where they exist). */
#ifndef MF_CPU_H
#define MF_CPU_H

#include <stdbool.h>
#include <stdint.h>

#include "core/threadpool.h"
#include "engine/backend.h"
#include "quant/types.h"

typedef struct mf_cpu {
    mf_backend base;
    mf_pool *pool;
    bool pool_shared;  /* the pool is a shared one (mf_threadpool): not ours to free or resize */
    int n_threads;
    bool verbose;
    bool swiglu_simd;  /* SwiGLU through mf_cpu_swiglu_avx2 (the SIMD level allows it) */
    bool ref;          /* the reference backend: quant/'s scalar kernels, no GEMM, scalar attention */
    const mf_type_traits *tab[MF_TYPE_COUNT]; /* this instance's kernels per type (its level's, or the references) */
    /* activations converted to a weight's vec_dot_type, once per matmul input */
    uint8_t *act_buf;
    size_t act_cap;
    /* per-thread attention scratch: accumulators of one task's queries */
    float *att_scratch;
    size_t att_scratch_per_thread;
    const struct mf_attn_kernels *attn; /* inner loops for the cache type and SIMD level */
    /* KV cache: per layer, [page][slab][slot][slab width] elements of
     * kv.type (attention.c says why) */
    mf_kv_desc kv;
    uint8_t **k, **v;
    uint32_t k_slab, v_slab;          /* elements per slab (whole heads, whole blocks) */
    size_t k_slab_bytes, v_slab_bytes; /* one position's slab row */
    size_t k_page_bytes, v_page_bytes; /* one page of one layer */
    /* the step between begin_step and end_step */
    const mf_step *step;
    int32_t *task_seq;                /* [max_rows + 1] attention tasks per sequence */
    int32_t *moe_slots;               /* [max_rows * MF_MAX_EXPERTS_USED] slots routed to one expert */
    /* activation buffers handed out by alloc, freed with the backend */
    void **bufs;
    int n_bufs;
} mf_cpu;

/* Ops touching fewer elements than this run on the calling thread: a decode
 * step's norms, adds, RoPE and GLU take about a microsecond or less, less
 * than a pool round trip between cores (about 0.6-1 us). Every op computes
 * each element the same way whatever its split, so results do not change. */
#define MF_CPU_INLINE_WORK 16384

static inline void mf_cpu_run(const mf_cpu *cpu, mf_task_fn fn, void *arg, size_t work) {
    if (work < MF_CPU_INLINE_WORK)
        fn(arg, 0, 1);
    else
        mf_pool_run(cpu->pool, fn, arg);
}

/* The CPU backend: n_threads workers (0 = all CPUs), scratch sized for
 * batches of up to max_rows rows of up to max_width floats. */
mf_backend *mf_cpu_backend_new(int n_threads, int max_rows, int max_width, uint32_t max_ctx, bool verbose);
/* The same backend on the scalar reference kernels ("cpu-ref"). */
mf_backend *mf_cpu_backend_new_ref(int n_threads, int max_rows, int max_width, uint32_t max_ctx, bool verbose);
/* The kernels of a type for this instance. */
static inline const mf_type_traits *mf_cpu_traits(const mf_cpu *cpu, int type) {
    return (unsigned)type < MF_TYPE_COUNT ? cpu->tab[type] : NULL;
}
/* The weight loader (cpu/weights.c): interleaves the matrices the CPU has
 * x16 decode kernels for; each copy becomes its tensor's handle. */
mf_status mf_cpu_weights_load(mf_model *m, bool no_repack);
/* A matrix's interleaved copy, or NULL when it is in the file's layout. */
static inline const void *mf_cpu_x16(mf_weight w) { return w->handle; }

/* Makes the backend use a shared pool (freeing its own); call before kv_init. */
void mf_cpu_share_pool(mf_backend *be, mf_pool *pool);
/* Resizes the worker pool between steps (results do not depend on it). */
mf_status mf_cpu_set_threads(mf_backend *be, int n_threads);

void mf_cpu_matmul(mf_backend *be, mf_weight w, const float *x, int rows, float *out);
void mf_cpu_matmul_n(mf_backend *be, const mf_weight *w, const mf_weight *b, int nw, const float *x, int rows,
                     float *const *out, float *res);
void mf_cpu_attention(mf_backend *be, int layer, const float *q, const mf_attn_params *p, float *out);
void mf_cpu_kv_store(mf_backend *be, int layer, const float *k, const float *v);
mf_status mf_cpu_kv_init(mf_backend *be, const mf_kv_desc *desc);
size_t mf_cpu_kv_read(mf_backend *be, int layer, const int32_t *cells, uint32_t n, void *dst);
void mf_cpu_kv_write(mf_backend *be, int layer, const int32_t *cells, uint32_t n, const void *src);
void mf_cpu_kv_copy_page(mf_backend *be, int32_t src, int32_t dst);
size_t mf_cpu_attn_scratch_floats(int head_dim_k, int head_dim_v);

void mf_cpu_moe_route(mf_backend *be, const float *logits, int n, const mf_moe_route *p, int32_t *sel, float *w);
void mf_cpu_matmul_id(mf_backend *be, mf_weight experts, int n_expert, const float *x, bool x_per_slot, int rows, int k,
                      const int32_t *sel, float *out, float *tmp_in, float *tmp_out);
void mf_cpu_scale_rows(mf_backend *be, float *x, const float *s, bool sigmoid, int rows, int n);
void mf_cpu_get_rows(mf_backend *be, mf_weight w, const mf_token *ids, int n, float *out);
void mf_cpu_norm(mf_backend *be, mf_norm_type type, const float *x, mf_weight w, mf_weight b, int rows, int n,
                 float eps, float *out);
void mf_cpu_add(mf_backend *be, float *a, const float *b, size_t n);
void mf_cpu_scale(mf_backend *be, float *x, float s, size_t n);
void mf_cpu_rope(mf_backend *be, float *x, int n_tok, int n_head, int head_dim, const int32_t *pos,
                 const mf_rope_params *p);
void mf_cpu_copy_cols(mf_backend *be, const float *src, int src_width, int col0, int n, int rows, float *dst);
void mf_cpu_gather_rows(mf_backend *be, const float *src, const int32_t *idx, int count, int n, float *dst);
void mf_cpu_sum_slots(mf_backend *be, const float *src, int rows, int k, int n, float *out);
void mf_cpu_softcap(mf_backend *be, float *x, float cap, size_t n);
void mf_cpu_glu(mf_backend *be, mf_ffn_type act, const float *gate, const float *up, size_t n, float *out);
/* SiLU (ops.c), and SwiGLU out = silu(g) * u on 8 lanes (act_avx2.c, AVX2 +
 * FMA CPUs only) giving the same bits as mf_silu_ref(g) * u */
float mf_silu_ref(float x);
void mf_cpu_swiglu_avx2(const float *g, const float *u, float *out, long n);

#endif
