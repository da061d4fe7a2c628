/* kv.h - the engine's bookkeeping of the KV cache: which pages each sequence
 * holds (ARCHITECTURE.md principle 9: the engine owns bookkeeping, the
 * backend owns bytes).
 *
 * The cache is n_pages pages of MF_KV_PAGE positions. A sequence holds the
 * positions 0..n_pos-1, position p in page pages[p / MF_KV_PAGE]. Pages carry
 * reference counts: a prefix shared between sequences (mf_kv_seq_cp) is one
 * set of pages, and a sequence about to write into a page someone else also
 * holds first gets its own copy (copy on write). */
#ifndef MF_ENGINE_KV_H
#define MF_ENGINE_KV_H

#include <stdbool.h>
#include <stdint.h>

#include "minfer.h"

/* Positions per page. A multiple of the CPU attention's key chunk (64), so a
 * chunk never straddles two pages and the chunking of a sequence's keys is
 * the same however its pages lie. */
#define MF_KV_PAGE 64

typedef struct mf_kv_seq {
    int32_t *pages;   /* [max_pages] */
    uint32_t n_pos;   /* positions held: 0..n_pos-1 */
} mf_kv_seq;

typedef struct mf_kv {
    uint32_t n_pages, n_seq, max_pages; /* max_pages: pages one sequence may hold (n_ctx) */
    uint32_t n_ctx;                     /* most positions one sequence may hold */
    int32_t *ref;                       /* [n_pages] holders of each page */
    int32_t *free_pages;                /* stack of unheld pages */
    uint32_t n_free;
    mf_kv_seq *seq;                     /* [n_seq] */
    /* the state before the current decode, restored if it fails */
    int32_t *save_ref, *save_free, *save_pages;
    uint32_t *save_npos;
    uint32_t save_n_free;
} mf_kv;

/* n_ctx: the most positions a sequence may hold; the cache gets enough pages
 * for n_cells positions in all plus one partly filled page per extra
 * sequence. */
mf_status mf_kv_init(mf_kv *kv, uint32_t n_cells, uint32_t n_ctx, uint32_t n_seq);
void mf_kv_free(mf_kv *kv);

uint32_t mf_kv_n_used(const mf_kv *kv);

/* The cell holding position p of sequence s (p < its n_pos). */
static inline int32_t mf_kv_cell(const mf_kv *kv, int s, uint32_t p) {
    return kv->seq[s].pages[p / MF_KV_PAGE] * MF_KV_PAGE + (int32_t)(p % MF_KV_PAGE);
}

/* Snapshot / restore of the whole bookkeeping around one decode. */
void mf_kv_save(mf_kv *kv);
void mf_kv_restore(mf_kv *kv);

/* Gives sequence s a writable cell for position p = its n_pos (appending):
 * a fresh page at a page boundary, or a private copy of a shared page
 * (*copy_src >= 0 then names the page whose bytes the backend must copy into
 * *cell's page first). MF_ERR_CONTEXT_FULL when no page is free. */
mf_status mf_kv_append(mf_kv *kv, int s, int32_t *cell, int32_t *copy_src);

/* Drops positions [p0, end) of sequence s (releasing pages it no longer
 * needs). */
void mf_kv_truncate_seq(mf_kv *kv, int s, uint32_t p0);

/* dst becomes a sequence holding src's first n positions, sharing its pages. */
void mf_kv_share(mf_kv *kv, int src, int dst, uint32_t n);

#endif
