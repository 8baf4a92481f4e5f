/*
 * threads.c - the fork-join pool (see threads.h).
 *
 * Protocol. The caller publishes a job (fn, arg, nth), sets `pending` to the number of
 * workers and bumps `gen`. Every worker, busy or not, notices the new generation, runs its
 * part if its index is below nth, and decrements `pending`; the caller runs part 0 and
 * spins until `pending` is zero. A worker that has seen no new generation for
 * SIFT_POOL_SPIN_US goes to sleep: it registers in `sleeping` under the mutex and re-checks
 * `gen` before waiting. The caller bumps `gen` before it reads `sleeping` (both sequentially
 * consistent), so either it sees the sleeper and broadcasts, or the sleeper sees the new
 * generation: no wake-up is lost.
 */
#include "model/threads.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "core/perf.h"

typedef struct worker {
    struct sift_pool *pool;
    int index;
    pthread_t thread;
} worker;

struct sift_pool {
    int n_threads;
    worker *workers; /* [n_threads - 1] */
    /* the current job */
    sift_task_fn fn;
    void *arg;
    int nth;
    atomic_uint gen;
    atomic_int pending;
    atomic_int sleeping;
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* Wait for a generation other than `seen`; returns it. */
static unsigned wait_gen(sift_pool *p, unsigned seen)
{
    int64_t t0 = sift__now_ns();
    for (unsigned spins = 0;; spins++) {
        unsigned g = atomic_load(&p->gen);
        if (g != seen || atomic_load(&p->stop)) return g;
        _mm_pause();
        if ((spins & 63) == 63 && sift__now_ns() - t0 > SIFT_POOL_SPIN_US * 1000LL) break;
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleeping, 1);
    unsigned g;
    while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    sift_pool *p = w->pool;
    unsigned seen = 0; /* the generation at creation, not a fresh read: a job may already be out */
    for (;;) {
        seen = wait_gen(p, seen);
        if (atomic_load(&p->stop)) break;
        if (w->index < p->nth) p->fn(p->arg, w->index, p->nth);
        atomic_fetch_sub(&p->pending, 1);
    }
    return NULL;
}

sift_pool *sift_pool_new(int n_threads)
{
    if (n_threads < 1 || n_threads > SIFT_POOL_MAX_THREADS) return NULL;
    sift_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            sift_pool_free(p);
            return NULL;
        }
        for (int i = 1; i < n_threads; i++) {
            worker *w = &p->workers[i - 1];
            w->pool = p;
            w->index = i;
            if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
                sift_pool_free(p);
                return NULL;
            }
            p->n_threads++;
        }
    }
    return p;
}

void sift_pool_free(sift_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->workers[i - 1].thread, NULL);
    free(p->workers);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

int sift_pool_size(const sift_pool *p)
{
    return p ? p->n_threads : 1;
}

void sift_pool_run(sift_pool *p, int nth, sift_task_fn fn, void *arg)
{
    if (!p || nth <= 1 || p->n_threads == 1) {
        fn(arg, 0, 1);
        return;
    }
    if (nth > p->n_threads) nth = p->n_threads;
    p->fn = fn;
    p->arg = arg;
    p->nth = nth;
    atomic_store(&p->pending, p->n_threads - 1);
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, nth);
    while (atomic_load(&p->pending) > 0) _mm_pause();
}
