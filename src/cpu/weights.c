/* weights.c - the CPU backend's weight loader: at load, interleave the
 * weight matrices 16 rows at a time (quant/interleave.h) when the CPU has an
 * x16 decode kernel for their type. The copy of each matrix becomes its
 * tensor's backend handle (engine/tensor.h).
 *
 * The copies live in one anonymous buffer advised for 2 MiB pages. The
 * original pages of each repacked matrix are then released (replaced by an
 * inaccessible reservation), so the model is held once (with an mmapped
 * file they would otherwise stay resident after being read here); every CPU reader of a matrix goes through its handle when
 * it is set (cpu/matmul.c, cpu/ops.c), and a stray read of the old bytes faults
 * instead of returning garbage. Matrices whose row count is not a multiple of
 * 16, expert stacks and token-embedding tables that are not also the output
 * head stay as they are. MINFER_NO_REPACK=1 (or no_repack) turns it off. */
#include "cpu/cpu.h"
#include "model/model.h"
#include "core/log.h"
#include "core/env.h"
#include "core/error.h"
#include "core/threadpool.h"
#include "core/timer.h"
#include "cpu/kern/features.h"
#include "quant/interleave.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAX_REPACK 4096

typedef struct repack_job {
    mf_tensor *t[MAX_REPACK];
    uint8_t *dst[MAX_REPACK];
    int n;
    int cur; /* the tensor being packed */
} repack_job;

/* the 16-row groups of tensor cur, split across the threads */
static void pack_fn(void *arg, int ith, int nth) {
    repack_job *j = arg;
    const mf_tensor *t = j->t[j->cur];
    const size_t row = mf_row_size(t->type, t->ne[0]), grp = row * MF_X16;
    long g0, g1;
    mf_split((long)(t->ne[1] / MF_X16), ith, nth, &g0, &g1);
    for (long g = g0; g < g1; g++)
        mf_x16_pack(t->type, (const uint8_t *)t->data + (size_t)g * grp, row, t->ne[0], j->dst[j->cur] + (size_t)g * grp);
}

/* Release a tensor's original whole pages by mapping an inaccessible
 * reservation over them: the memory goes back, a stray read faults, and the
 * address range stays ours (a plain munmap would leave holes that later
 * mappings could land in, and closing the file would unmap those). Done
 * right after each tensor is packed, so the peak is the copy plus one
 * tensor, not twice the model. */
static void release_pages(const mf_tensor *t) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)t->data + page - 1) & ~(page - 1);
    const uintptr_t b = ((uintptr_t)t->data + t->nbytes) & ~(page - 1);
    if (b > a) (void)mmap((void *)a, b - a, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
}

static void add(mf_model *m, repack_job *j, mf_weight w) {
    if (!w || j->n == MAX_REPACK) return;
    /* a split model: only the CPU's layers (its head is the device's, and a
     * tied one is a lookup table here, read in the file's bytes) */
    if (m->n_cpu_layers && (w == m->output || !mf_split_on_host(m, w))) return;
    if (w->n_dims > 2 || w->ne[2] != 1 || w->ne[1] % MF_X16 || !mf_x16_layout(w->type, w->ne[0])) return;
    const mf_type_traits *tr = mf_cpu_traits_for_level(w->type, mf_cpu_init());
    if (!tr || !tr->vec_dot_x16) return;
    if (w == m->token_embd && w != m->output) return; /* only looked up by row */
    for (int i = 0; i < j->n; i++)
        if (j->t[i] == w) return;
    j->t[j->n++] = (mf_tensor *)w; /* the model owns its tensors */
}

static void weights_free(mf_model *m) {
    if (m->be_weights) munmap(m->be_weights, m->be_weights_size);
    m->be_weights = NULL;
}

mf_status mf_cpu_weights_load(mf_model *m, bool no_repack) {
    if (no_repack || mf_env_on("MINFER_NO_REPACK")) return MF_OK;
    repack_job *j = calloc(1, sizeof *j);
    if (!j) return mf_err(MF_ERR_NOMEM, "out of memory");
    for (uint32_t l = 0; l < m->hp.n_layer; l++) {
        const mf_layer *L = &m->layers[l];
        const mf_weight ws[] = {L->wq,          L->wk,         L->wv,           L->wo,           L->wqkv,
                                L->ffn_gate,    L->ffn_up,     L->ffn_down,     L->ffn_gate_up,  L->ffn_gate_shexp,
                                L->ffn_up_shexp, L->ffn_down_shexp};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) add(m, j, ws[i]);
    }
    add(m, j, m->output);
    size_t total = 0, need = 0; /* bytes, and bytes with each copy 64-byte aligned */
    for (int i = 0; i < j->n; i++) {
        total += j->t[i]->nbytes;
        need += (j->t[i]->nbytes + 63) & ~(size_t)63;
    }
    if (!total) {
        free(j);
        return MF_OK;
    }
    const double t0 = mf_now();
    const size_t huge = (size_t)2 << 20, size = (need + huge - 1) & ~(huge - 1);
    void *buf = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED) {
        free(j);
        return mf_err(MF_ERR_NOMEM, "cannot allocate %zu bytes for the interleaved weights (MINFER_NO_REPACK=1 keeps "
                                    "the file's layout)", total);
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(buf, size, MADV_HUGEPAGE);
#endif
    size_t off = 0;
    for (int i = 0; i < j->n; i++) {
        j->dst[i] = (uint8_t *)buf + off;
        off += (j->t[i]->nbytes + 63) & ~(size_t)63;
    }
    mf_pool *pool = mf_pool_new(0);
    for (j->cur = 0; j->cur < j->n; j->cur++) {
        if (pool) mf_pool_run(pool, pack_fn, j);
        else pack_fn(j, 0, 1);
        release_pages(j->t[j->cur]);
        j->t[j->cur]->handle = j->dst[j->cur];
    }
    mf_pool_free(pool);
    (void)mprotect(buf, size, PROT_READ);
    m->be_weights = buf;
    m->be_weights_size = size;
    m->be_weights_free = weights_free;
    if (m->verbose)
        mf_log(MF_LOG_INFO, "minfer: %d weight matrices (%.1f MiB) interleaved 16 rows at a time for the decode kernels in "
                        "%.2f s (MINFER_NO_REPACK=1 keeps the file's layout)\n",
                j->n, (double)total / (1 << 20), mf_now() - t0);
    free(j);
    return MF_OK;
}
