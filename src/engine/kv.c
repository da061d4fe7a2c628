/* kv.c - pages, block tables and reference counts of the KV cache (kv.h). */
#include "engine/kv.h"
#include "core/error.h"

#include <stdlib.h>
#include <string.h>

mf_status mf_kv_init(mf_kv *kv, uint32_t n_cells, uint32_t n_ctx, uint32_t n_seq) {
    memset(kv, 0, sizeof *kv);
    if (!n_seq) n_seq = 1;
    kv->n_ctx = n_ctx;
    kv->n_seq = n_seq;
    kv->max_pages = (n_ctx + MF_KV_PAGE - 1) / MF_KV_PAGE;
    kv->n_pages = (n_cells + MF_KV_PAGE - 1) / MF_KV_PAGE + n_seq - 1;
    const size_t np = kv->n_pages, tp = (size_t)n_seq * kv->max_pages;
    kv->ref = calloc(np, sizeof *kv->ref);
    kv->free_pages = malloc(np * sizeof *kv->free_pages);
    kv->seq = calloc(n_seq, sizeof *kv->seq);
    kv->save_ref = malloc(np * sizeof *kv->save_ref);
    kv->save_free = malloc(np * sizeof *kv->save_free);
    kv->save_pages = malloc(tp * sizeof *kv->save_pages);
    kv->save_npos = malloc(n_seq * sizeof *kv->save_npos);
    int32_t *pages = malloc(tp * sizeof *pages);
    if (!kv->ref || !kv->free_pages || !kv->seq || !kv->save_ref || !kv->save_free || !kv->save_pages ||
        !kv->save_npos || !pages) {
        free(pages);
        mf_kv_free(kv);
        return mf_err(MF_ERR_NOMEM, "out of memory for the KV cache's page tables (%u sequences)", n_seq);
    }
    for (uint32_t s = 0; s < n_seq; s++) kv->seq[s].pages = pages + (size_t)s * kv->max_pages;
    /* the stack hands out page 0 first, so one sequence's pages lie in order */
    for (uint32_t i = 0; i < kv->n_pages; i++) kv->free_pages[i] = (int32_t)(kv->n_pages - 1 - i);
    kv->n_free = kv->n_pages;
    return MF_OK;
}

void mf_kv_free(mf_kv *kv) {
    if (kv->seq) free(kv->seq[0].pages);
    free(kv->seq);
    free(kv->ref);
    free(kv->free_pages);
    free(kv->save_ref);
    free(kv->save_free);
    free(kv->save_pages);
    free(kv->save_npos);
    memset(kv, 0, sizeof *kv);
}

uint32_t mf_kv_n_used(const mf_kv *kv) { return kv->n_pages - kv->n_free; }

void mf_kv_save(mf_kv *kv) {
    memcpy(kv->save_ref, kv->ref, kv->n_pages * sizeof *kv->ref);
    memcpy(kv->save_free, kv->free_pages, kv->n_free * sizeof *kv->free_pages);
    kv->save_n_free = kv->n_free;
    for (uint32_t s = 0; s < kv->n_seq; s++) {
        const mf_kv_seq *q = &kv->seq[s];
        kv->save_npos[s] = q->n_pos;
        memcpy(kv->save_pages + (size_t)s * kv->max_pages, q->pages,
               (q->n_pos + MF_KV_PAGE - 1) / MF_KV_PAGE * sizeof *q->pages);
    }
}

void mf_kv_restore(mf_kv *kv) {
    memcpy(kv->ref, kv->save_ref, kv->n_pages * sizeof *kv->ref);
    memcpy(kv->free_pages, kv->save_free, kv->save_n_free * sizeof *kv->free_pages);
    kv->n_free = kv->save_n_free;
    for (uint32_t s = 0; s < kv->n_seq; s++) {
        mf_kv_seq *q = &kv->seq[s];
        q->n_pos = kv->save_npos[s];
        memcpy(q->pages, kv->save_pages + (size_t)s * kv->max_pages,
               (q->n_pos + MF_KV_PAGE - 1) / MF_KV_PAGE * sizeof *q->pages);
    }
}

static void release(mf_kv *kv, int32_t page) {
    if (--kv->ref[page] == 0) kv->free_pages[kv->n_free++] = page;
}

static bool take(mf_kv *kv, int32_t *page) {
    if (!kv->n_free) return false;
    *page = kv->free_pages[--kv->n_free];
    kv->ref[*page] = 1;
    return true;
}

mf_status mf_kv_append(mf_kv *kv, int s, int32_t *cell, int32_t *copy_src) {
    mf_kv_seq *q = &kv->seq[s];
    const uint32_t p = q->n_pos, pi = p / MF_KV_PAGE;
    *copy_src = -1;
    if (p >= kv->n_ctx)
        return mf_err(MF_ERR_CONTEXT_FULL, "context full: sequence %d holds %u positions, the most n_ctx allows", s, p);
    if (p % MF_KV_PAGE == 0) {
        if (!take(kv, &q->pages[pi])) goto full;
    } else if (kv->ref[q->pages[pi]] > 1) {
        /* another sequence holds this page too: write into a copy of it */
        int32_t own;
        if (!take(kv, &own)) goto full;
        *copy_src = q->pages[pi];
        release(kv, q->pages[pi]);
        q->pages[pi] = own;
    }
    q->n_pos = p + 1;
    *cell = mf_kv_cell(kv, s, p);
    return MF_OK;
full:
    return mf_err(MF_ERR_CONTEXT_FULL, "context full: all %u KV pages (%u positions each) are in use", kv->n_pages,
                  MF_KV_PAGE);
}

void mf_kv_truncate_seq(mf_kv *kv, int s, uint32_t p0) {
    mf_kv_seq *q = &kv->seq[s];
    if (p0 >= q->n_pos) return;
    const uint32_t keep = (p0 + MF_KV_PAGE - 1) / MF_KV_PAGE, held = (q->n_pos + MF_KV_PAGE - 1) / MF_KV_PAGE;
    for (uint32_t i = keep; i < held; i++) release(kv, q->pages[i]);
    q->n_pos = p0;
}

void mf_kv_share(mf_kv *kv, int src, int dst, uint32_t n) {
    if (src == dst) return;
    mf_kv_truncate_seq(kv, dst, 0);
    mf_kv_seq *a = &kv->seq[src], *b = &kv->seq[dst];
    if (n > a->n_pos) n = a->n_pos;
    const uint32_t np = (n + MF_KV_PAGE - 1) / MF_KV_PAGE;
    for (uint32_t i = 0; i < np; i++) {
        b->pages[i] = a->pages[i];
        kv->ref[a->pages[i]]++;
    }
    b->n_pos = n;
}
