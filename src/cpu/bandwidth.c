/* bandwidth.c - the memory-bandwidth probe behind `minfer bench`'s ceiling
 * line: a multi-threaded streaming read of a buffer far larger than the
 * caches, best of a few passes. Decode at batch 1 reads every weight once per
 * token, so bandwidth / bytes-per-token is its ceiling. */
#include "minfer.h"
#include "core/alloc.h"
#include "core/threadpool.h"
#include "core/timer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct bw_task {
    const uint64_t *buf;
    size_t n;
    uint64_t sink[512];
} bw_task;

static void read_fn(void *arg, int ith, int nth) {
    bw_task *t = arg;
    long i0, i1;
    mf_split((long)(t->n / 8), ith, nth, &i0, &i1);
    /* 8 independent accumulators: the loads, not the adds, bound the loop */
    uint64_t a[8] = {0};
    for (long i = i0; i < i1; i++) {
        const uint64_t *p = t->buf + (size_t)i * 8;
        for (int j = 0; j < 8; j++) a[j] ^= p[j];
    }
    t->sink[ith % 512] = a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}

double mf_read_bandwidth(int n_threads, size_t bytes) {
    if (bytes < (64u << 20)) bytes = 64u << 20;
    uint64_t *buf = mf_alloc_aligned(bytes);
    mf_pool *pool = mf_pool_new(n_threads);
    if (!buf || !pool) {
        free(buf);
        mf_pool_free(pool);
        return 0;
    }
    memset(buf, 1, bytes); /* fault every page in before timing */
    bw_task t = {buf, bytes / sizeof(uint64_t), {0}};
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = mf_now();
        mf_pool_run(pool, read_fn, &t);
        double dt = mf_now() - t0;
        double gbs = (double)bytes / dt / 1e9;
        if (gbs > best) best = gbs;
    }
    mf_pool_free(pool);
    free(buf);
    return best;
}
