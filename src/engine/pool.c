/* pool.c - a thread pool several contexts share (mf_threadpool in
 * minfer.h): one set of workers for all of them, so a process with many
 * contexts does not start a pool per context. A decode on a context that
 * uses it holds the pool's lock, so decodes of different contexts take turns
 * on the workers instead of corrupting each other's jobs. */
#include "engine/context.h"
#include "core/error.h"

#include <stdlib.h>

mf_status mf_threadpool_new(int32_t n_threads, mf_threadpool **out) {
    *out = NULL;
    if (n_threads < 0 || n_threads > 1024) return mf_err(MF_ERR_INVALID_ARG, "thread count %d is out of range", n_threads);
    mf_threadpool *tp = calloc(1, sizeof *tp);
    if (!tp) return mf_err(MF_ERR_NOMEM, "out of memory");
    tp->pool = mf_pool_new(n_threads);
    if (!tp->pool || pthread_mutex_init(&tp->lock, NULL)) {
        mf_pool_free(tp->pool);
        free(tp);
        return mf_err(MF_ERR_NOMEM, "cannot start %d worker threads", n_threads);
    }
    *out = tp;
    return MF_OK;
}

void mf_threadpool_free(mf_threadpool *tp) {
    if (!tp) return;
    mf_pool_free(tp->pool);
    pthread_mutex_destroy(&tp->lock);
    free(tp);
}

int32_t mf_threadpool_n_threads(const mf_threadpool *tp) { return tp ? mf_pool_size(tp->pool) : 0; }
