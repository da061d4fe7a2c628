/* threadpool.c - see threadpool.h. One generation counter publishes a task;
 * a done counter collects the workers. Sleep/wake uses the classic store/load
 * handshake on two seq_cst atomics (gen, n_sleeping) so a wake-up is never lost. */
#include "core/threadpool.h"
#include "core/timer.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* How long a worker spins for the next task before sleeping. */
#define SPIN_US 300

struct mf_pool {
    int n;
    pthread_t *threads;
    mf_task_fn fn;
    void *arg;
    _Atomic unsigned gen;
    _Atomic int done;
    _Atomic int n_sleeping;
    _Atomic int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct worker_arg { mf_pool *pool; int ith; } *args;
};

static void *worker_main(void *p) {
    struct worker_arg *wa = p;
    mf_pool *pool = wa->pool;
    /* gen is 0 when the pool is created; reading it here instead would lose
     * a task published before this thread got scheduled */
    unsigned seen = 0;
    for (;;) {
        /* spin, then sleep, until a new generation is published */
        int64_t t0 = mf_now_us();
        unsigned g;
        for (int i = 0;; i++) {
            g = atomic_load_explicit(&pool->gen, memory_order_acquire);
            if (g != seen || atomic_load(&pool->stop)) break;
            if ((i & 255) == 255 && mf_now_us() - t0 > SPIN_US) {
                pthread_mutex_lock(&pool->mu);
                atomic_fetch_add(&pool->n_sleeping, 1);
                while ((g = atomic_load(&pool->gen)) == seen && !atomic_load(&pool->stop))
                    pthread_cond_wait(&pool->cv, &pool->mu);
                atomic_fetch_sub(&pool->n_sleeping, 1);
                pthread_mutex_unlock(&pool->mu);
                break;
            }
            CPU_RELAX();
            if ((i & 1023) == 1023) sched_yield(); /* oversubscribed CPUs: let the producer run */
        }
        if (atomic_load(&pool->stop)) return NULL;
        seen = g;
        pool->fn(pool->arg, wa->ith, pool->n);
        atomic_fetch_add_explicit(&pool->done, 1, memory_order_release);
    }
}

mf_pool *mf_pool_new(int n_threads) {
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    if (n_threads > 512) n_threads = 512;
    mf_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return NULL;
    pool->n = n_threads;
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv, NULL);
    pool->threads = calloc((size_t)n_threads, sizeof *pool->threads);
    pool->args = calloc((size_t)n_threads, sizeof *pool->args);
    if (!pool->threads || !pool->args) {
        free(pool->threads);
        free(pool->args);
        free(pool);
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        pool->args[i].pool = pool;
        pool->args[i].ith = i;
        if (pthread_create(&pool->threads[i], NULL, worker_main, &pool->args[i]) != 0) {
            pool->n = i; /* shut down the ones already started */
            mf_pool_free(pool);
            return NULL;
        }
    }
    return pool;
}

void mf_pool_free(mf_pool *pool) {
    if (!pool) return;
    pthread_mutex_lock(&pool->mu);
    atomic_store(&pool->stop, 1);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
    for (int i = 1; i < pool->n; i++) pthread_join(pool->threads[i], NULL);
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
    free(pool->threads);
    free(pool->args);
    free(pool);
}

int mf_pool_size(const mf_pool *pool) { return pool ? pool->n : 1; }

void mf_pool_run(mf_pool *pool, mf_task_fn fn, void *arg) {
    if (!pool || pool->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->done, 0, memory_order_relaxed);
    atomic_fetch_add(&pool->gen, 1); /* seq_cst: pairs with the sleepers' check */
    if (atomic_load(&pool->n_sleeping) > 0) {
        pthread_mutex_lock(&pool->mu);
        pthread_cond_broadcast(&pool->cv);
        pthread_mutex_unlock(&pool->mu);
    }
    fn(arg, 0, pool->n);
    /* wait for the workers; yield now and then in case one of them was
     * preempted on an oversubscribed machine (spinning would only delay it) */
    for (unsigned i = 1; atomic_load_explicit(&pool->done, memory_order_acquire) != pool->n - 1; i++) {
        CPU_RELAX();
        if ((i & 1023) == 0) sched_yield();
    }
}
