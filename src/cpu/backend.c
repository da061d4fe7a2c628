/* backend.c - the CPU backend's op table, construction and teardown. */
#include "cpu/cpu.h"
#include "core/log.h"
#include "core/alloc.h"
#include "cpu/kern/features.h"
#include "core/error.h"
#include "quant/types.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void cpu_destroy(mf_backend *be) {
    mf_cpu *cpu = (mf_cpu *)be;
    if (!cpu) return;
    if (!cpu->pool_shared) mf_pool_free(cpu->pool);
    for (int i = 0; i < cpu->n_bufs; i++) free(cpu->bufs[i]);
    free(cpu->bufs);
    if (cpu->k)
        for (uint32_t l = 0; l < cpu->kv.n_layer; l++) free(cpu->k[l]);
    if (cpu->v)
        for (uint32_t l = 0; l < cpu->kv.n_layer; l++) free(cpu->v[l]);
    free(cpu->k);
    free(cpu->v);
    free(cpu->act_buf);
    free(cpu->att_scratch);
    free(cpu->task_seq);
    free(cpu->moe_slots);
    free(cpu);
}

static float *cpu_alloc(mf_backend *be, size_t n) {
    mf_cpu *cpu = (mf_cpu *)be;
    void **nb = realloc(cpu->bufs, (size_t)(cpu->n_bufs + 1) * sizeof *nb);
    if (!nb) return NULL;
    cpu->bufs = nb;
    float *p = mf_alloc_aligned(mf_mul_size(n ? n : 1, sizeof(float)));
    if (p) cpu->bufs[cpu->n_bufs++] = p;
    return p;
}

static void cpu_download(mf_backend *be, const float *src, size_t n, float *dst) {
    (void)be;
    if (src != dst) memmove(dst, src, n * sizeof(float)); /* a decode's logits: 0.6 MB for a 152k vocabulary */
}

/* the step-reading ops over their pointer-taking kernels */
static void cpu_get_rows(mf_backend *be, mf_weight w, mf_step_ids which, float *out) {
    const mf_step *st = ((mf_cpu *)be)->step;
    mf_cpu_get_rows(be, w, which == MF_STEP_TOKENS ? st->tokens : st->pos, st->n_tok, out);
}

static void cpu_rope(mf_backend *be, float *x, int n_head, int head_dim, const mf_rope_params *p) {
    const mf_step *st = ((mf_cpu *)be)->step;
    mf_cpu_rope(be, x, st->n_tok, n_head, head_dim, st->pos, p);
}

static void cpu_gather_out(mf_backend *be, const float *src, int first, int count, int n, float *dst) {
    mf_cpu_gather_rows(be, src, ((mf_cpu *)be)->step->out_rows + first, count, n, dst);
}

static mf_status cpu_begin_step(mf_backend *be, const mf_step *st) {
    ((mf_cpu *)be)->step = st;
    return MF_OK;
}

static mf_status cpu_end_step(mf_backend *be) {
    ((mf_cpu *)be)->step = NULL;
    return MF_OK;
}

/* every op returns when its work is done */
static void cpu_synchronize(mf_backend *be) { (void)be; }

static bool cpu_supports_type(mf_backend *be, mf_type t) {
    const mf_type_traits *tr = mf_cpu_traits((const mf_cpu *)be, t);
    return tr && tr->vec_dot;
}

static int cpu_n_threads(mf_backend *be) { return ((mf_cpu *)be)->n_threads; }

void mf_cpu_share_pool(mf_backend *be, mf_pool *pool) {
    mf_cpu *cpu = (mf_cpu *)be;
    if (!cpu->pool_shared) mf_pool_free(cpu->pool);
    cpu->pool = pool;
    cpu->pool_shared = true;
    cpu->n_threads = mf_pool_size(pool);
}

mf_status mf_cpu_set_threads(mf_backend *be, int n_threads) {
    mf_cpu *cpu = (mf_cpu *)be;
    if (cpu->pool_shared)
        return mf_err(MF_ERR_INVALID_ARG, "this context runs on a shared thread pool: its size is the pool's");
    mf_pool *np = mf_pool_new(n_threads);
    if (!np) return mf_err(MF_ERR_NOMEM, "cannot start %d worker threads", n_threads);
    const int nt = mf_pool_size(np);
    /* attention scratch is per thread */
    if (nt > cpu->n_threads && cpu->att_scratch) {
        float *ns = mf_alloc_aligned(mf_mul_size(mf_mul_size(cpu->att_scratch_per_thread, (size_t)nt), sizeof(float)));
        if (!ns) {
            mf_pool_free(np);
            return mf_err(MF_ERR_NOMEM, "out of memory for attention scratch of %d threads", nt);
        }
        free(cpu->att_scratch);
        cpu->att_scratch = ns;
    }
    mf_pool_free(cpu->pool);
    cpu->pool = np;
    cpu->n_threads = nt;
    return MF_OK;
}

static const mf_backend_ops g_cpu_ops = {
    .name = "cpu",
    .host_memory = true,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .kv_init = mf_cpu_kv_init,
    .begin_step = cpu_begin_step,
    .end_step = cpu_end_step,
    .synchronize = cpu_synchronize,
    .n_threads = cpu_n_threads,
    .set_threads = mf_cpu_set_threads,
    .supports_type = cpu_supports_type,
    .get_rows = cpu_get_rows,
    .norm = mf_cpu_norm,
    .matmul = mf_cpu_matmul,
    .matmul_n = mf_cpu_matmul_n,
    .add = mf_cpu_add,
    .copy_cols = mf_cpu_copy_cols,
    .gather_out = cpu_gather_out,
    .sum_slots = mf_cpu_sum_slots,
    .moe_route = mf_cpu_moe_route,
    .matmul_id = mf_cpu_matmul_id,
    .scale_rows = mf_cpu_scale_rows,
    .softcap = mf_cpu_softcap,
    .scale = mf_cpu_scale,
    .rope = cpu_rope,
    .glu = mf_cpu_glu,
    .kv_store = mf_cpu_kv_store,
    .kv_read = mf_cpu_kv_read,
    .kv_write = mf_cpu_kv_write,
    .kv_copy_page = mf_cpu_kv_copy_page,
    .attention = mf_cpu_attention,
    .download = cpu_download,
    .upload = cpu_download,
};

/* the reference backend: the same ops under its own name */
static mf_backend_ops g_ref_ops;
static pthread_once_t g_ref_once = PTHREAD_ONCE_INIT;
static void ref_ops_init(void) {
    g_ref_ops = g_cpu_ops;
    g_ref_ops.name = "cpu-ref";
}

static mf_backend *cpu_new(bool ref, int n_threads, int max_rows, int max_width, uint32_t max_ctx, bool verbose) {
    mf_cpu *cpu = calloc(1, sizeof *cpu);
    if (!cpu) return NULL;
    pthread_once(&g_ref_once, ref_ops_init);
    cpu->base.ops = ref ? &g_ref_ops : &g_cpu_ops;
    cpu->ref = ref;
    cpu->verbose = verbose;
    cpu->pool = mf_pool_new(n_threads);
    if (!cpu->pool) goto fail;
    cpu->n_threads = mf_pool_size(cpu->pool);
    /* converted activations take at most 2 bytes per element (f16/bf16); room
     * for two distinct conversions of one input (e.g. f16 and q8_0 weights
     * reading the same activations in a mixed-type file) */
    cpu->act_cap = mf_mul_size(mf_mul_size((size_t)max_rows, (size_t)max_width), 4) + 4096;
    /* (a GEMM whose panels need more grows it: mf_cpu_matmul_n) */
    cpu->act_buf = mf_alloc_aligned(cpu->act_cap);
    (void)max_ctx; /* the KV cache's size comes with kv_init */
    cpu->task_seq = malloc(((size_t)max_rows + 1) * sizeof *cpu->task_seq);
    cpu->moe_slots = malloc((size_t)max_rows * MF_MAX_EXPERTS_USED * sizeof *cpu->moe_slots);
    if (!cpu->act_buf || !cpu->task_seq || !cpu->moe_slots) goto fail;
    /* the chosen SIMD level's kernels, bitwise the references' results, so
     * instances of different levels never disagree */
    const mf_cpu_level lv = mf_cpu_init();
    cpu->swiglu_simd = lv >= MF_CPU_AVX2 && !ref;
    for (int t = 0; t < MF_TYPE_COUNT; t++) cpu->tab[t] = ref ? mf_type_traits_ref(t) : mf_cpu_traits_for_level(t, lv);
    if (verbose && ref)
        mf_log(MF_LOG_INFO, "minfer: cpu-ref backend, %d threads, scalar reference kernels, no GEMM", cpu->n_threads);
    else if (verbose)
        mf_log(MF_LOG_INFO, "minfer: cpu backend, %d threads, %s; prefill: %s; %s\n", cpu->n_threads,
               mf_cpu_kernels_note(), mf_cpu_init() == MF_CPU_AVX512_VNNI ? mf_amx_note() : "no AMX: needs the AVX-512 VNNI level",
               mf_cpu_init() == MF_CPU_AVX512_VNNI ? mf_amx_bf16_note() : "no AMX bf16");
    return &cpu->base;
fail:
    cpu_destroy(&cpu->base);
    return NULL;
}

mf_backend *mf_cpu_backend_new(int n_threads, int max_rows, int max_width, uint32_t max_ctx, bool verbose) {
    return cpu_new(false, n_threads, max_rows, max_width, max_ctx, verbose);
}

mf_backend *mf_cpu_backend_new_ref(int n_threads, int max_rows, int max_width, uint32_t max_ctx, bool verbose) {
    return cpu_new(true, n_threads, max_rows, max_width, max_ctx, verbose);
}
