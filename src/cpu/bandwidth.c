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

/* The probe must not be the bottleneck itself: 64-bit scalar loads (what
 * the plain build vectorises this to at best: 16-byte SSE2) measured 10-20%
 * below what a decode actually streams. The AVX2 version issues 32-byte
 * loads, four cache lines per step, into independent accumulators. */
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, long n64) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (long i = 0; i + 32 <= n64; i += 32) {
        const __m256i *v = (const __m256i *)(p + i);
        a0 = _mm256_xor_si256(a0, _mm256_xor_si256(_mm256_load_si256(v + 0), _mm256_load_si256(v + 1)));
        a1 = _mm256_xor_si256(a1, _mm256_xor_si256(_mm256_load_si256(v + 2), _mm256_load_si256(v + 3)));
        a2 = _mm256_xor_si256(a2, _mm256_xor_si256(_mm256_load_si256(v + 4), _mm256_load_si256(v + 5)));
        a3 = _mm256_xor_si256(a3, _mm256_xor_si256(_mm256_load_si256(v + 6), _mm256_load_si256(v + 7)));
    }
    const __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    return (uint64_t)_mm256_extract_epi64(a, 0) ^ (uint64_t)_mm256_extract_epi64(a, 3);
}
#define HAVE_AVX2_READ 1
#endif

static void read_fn(void *arg, int ith, int nth) {
    bw_task *t = arg;
    long i0, i1;
    /* in units of 256 bytes (four cache lines), so every range is aligned */
    mf_split((long)(t->n / 32), ith, nth, &i0, &i1);
#ifdef HAVE_AVX2_READ
    if (__builtin_cpu_supports("avx2")) {
        t->sink[ith % 512] = read_avx2(t->buf + (size_t)i0 * 32, (i1 - i0) * 32);
        return;
    }
#endif
    /* 8 independent accumulators: the loads, not the adds, bound the loop */
    uint64_t a[8] = {0};
    for (long i = i0 * 4; i < i1 * 4; i++) {
        const uint64_t *p = t->buf + (size_t)i * 8;
        for (int j = 0; j < 8; j++) a[j] ^= p[j];
    }
    t->sink[ith % 512] = a[0] ^ a[1] ^ a[2] ^ a[3] ^ a[4] ^ a[5] ^ a[6] ^ a[7];
}

struct mf_bw_probe {
    uint64_t *buf;
    size_t bytes;
    mf_pool *pool;
    bw_task task;
};

mf_bw_probe *mf_bw_probe_new(int n_threads, size_t bytes) {
    if (bytes < (64u << 20)) bytes = 64u << 20;
    mf_bw_probe *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->bytes = bytes;
    p->buf = mf_alloc_aligned(bytes);
    p->pool = mf_pool_new(n_threads);
    if (!p->buf || !p->pool) {
        mf_bw_probe_free(p);
        return NULL;
    }
    memset(p->buf, 1, bytes); /* fault every page in before timing */
    p->task.buf = p->buf;
    p->task.n = bytes / sizeof(uint64_t);
    return p;
}

double mf_bw_probe_run(mf_bw_probe *p, int passes) {
    double best = 0;
    for (int rep = 0; p && rep < passes; rep++) {
        double t0 = mf_now();
        mf_pool_run(p->pool, read_fn, &p->task);
        double gbs = (double)p->bytes / (mf_now() - t0) / 1e9;
        if (gbs > best) best = gbs;
    }
    return best;
}

void mf_bw_probe_free(mf_bw_probe *p) {
    if (!p) return;
    mf_pool_free(p->pool);
    free(p->buf);
    free(p);
}

double mf_read_bandwidth(int n_threads, size_t bytes) {
    mf_bw_probe *p = mf_bw_probe_new(n_threads, bytes);
    const double gbs = mf_bw_probe_run(p, 5);
    mf_bw_probe_free(p);
    return gbs;
}
