/* threadpool.h - persistent worker threads owned by a context.
 *
 * mf_pool_run(pool, fn, arg) calls fn(arg, ith, nth) once on each of the nth
 * threads (the caller is ith 0) and returns when all have finished. Work is
 * split by ith/nth inside fn, so a result never depends on scheduling, only
 * on how fn partitions it. Workers spin briefly after a task (the next op
 * usually follows within microseconds) and then sleep on a condition
 * variable so an idle context costs no CPU. */
#ifndef MF_CORE_THREADPOOL_H
#define MF_CORE_THREADPOOL_H

typedef struct mf_pool mf_pool;
typedef void (*mf_task_fn)(void *arg, int ith, int nth);

/* n_threads <= 0: number of online CPUs. Returns NULL on failure. */
mf_pool *mf_pool_new(int n_threads);
void mf_pool_free(mf_pool *pool);
int mf_pool_size(const mf_pool *pool);
void mf_pool_run(mf_pool *pool, mf_task_fn fn, void *arg);

/* Split [0, n) into nth contiguous ranges; range of thread ith. */
static inline void mf_split(long n, int ith, int nth, long *begin, long *end) {
    long per = n / nth, rem = n % nth;
    *begin = ith * per + (ith < rem ? ith : rem);
    *end = *begin + per + (ith < rem ? 1 : 0);
}

#endif
