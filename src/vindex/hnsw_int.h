/* hnsw_int.h - one layer's HNSW graph as hnsw.c builds and searches it and
 * hnsw_file.c saves and maps it back (the cache file's layout is there). */
#ifndef MF_VINDEX_HNSW_INT_H
#define MF_VINDEX_HNSW_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vindex/vindex.h"

#define HN_MAX_LEVEL 15
/* The build's version: a graph saved by another version of the build would
 * answer differently from a fresh one, so a cache file of another version is
 * refused. Raise it whenever hnsw.c's build changes its output (seed, level
 * draw, batches, link selection). */
#define HN_ALGO 1

struct vx_hnsw {
    int32_t n, m, m0, max_level, entry;
    uint8_t *level;     /* [n] */
    int32_t *link0;     /* [n][1 + m0]: count, then ids */
    float *sim0;        /* [n][m0]: build similarity of each link (for pruning); NULL when mapped */
    int64_t *up_off;    /* [n]: start in up/up_sim of levels 1.. (each 1 + m slots), -1 if none */
    int32_t *up;
    int64_t n_up;       /* slots in up */
    float *up_sim;      /* NULL when mapped */
    float *aug;         /* [n] a_i of the transform (0 without mips_transform); NULL when mapped */
    bool mapped;        /* the arrays point into the vindex's cache file map: nothing to free but the struct */
    double build_ms;
};

void vx_hnsw_free(vx_hnsw *g);
/* Allocates the graphs' table and the per-thread search scratch. */
mf_status vx_hnsw_need_graphs(mf_vindex *v);

/* hnsw_file.c: a 64-bit checksum of the cache file (not cryptographic: it
 * catches damage, the structural checks catch hostility). */
typedef struct vx_cksum {
    uint64_t lane[4], n;
    uint8_t buf[32];
    size_t fill;
} vx_cksum;
void vx_cksum_init(vx_cksum *c);
void vx_cksum_update(vx_cksum *c, const void *p, size_t n);
uint64_t vx_cksum_final(const vx_cksum *c);

/* Header offsets of the cache file, for the hostile-input tests. */
#define HN_FILE_HEADER 256
#define HN_FILE_ENTRY 48
#define HN_OFF_CKSUM 128

#endif
