/*
 * threads.c - the fork-join pool (see threads.h).
 *
 * The job word. `state` packs the job's generation (high 32 bits) and the next unclaimed
 * chunk (low 32 bits). The caller writes the job (fn, arg, n_chunks, how many workers may
 * join) and then publishes it by storing (gen + 1, 0). A thread claims chunk c of
 * generation g by a compare-and-swap (g, c) -> (g, c + 1) with c < n_chunks, and counts it
 * in `done` when finished; the caller returns once done == n_chunks.
 *
 * Why a stale worker is harmless: it read the job fields after loading (g, c) with c <
 * n_chunks, so job g was not finished, so the caller had not yet written the next job's
 * fields; if the caller has moved on since, the state's generation differs and the CAS
 * fails. A successful CAS therefore always pairs chunk c with the fields of its own job,
 * whose arg stays valid until the caller has seen that chunk counted.
 *
 * Sleeping: a worker that has seen no new job for SIFT_POOL_SPIN_US registers in
 * `sleeping` under the mutex and re-checks the state before waiting; the caller publishes
 * before it reads `sleeping` (both sequentially consistent), so either the caller sees the
 * sleeper and broadcasts, or the sleeper sees the new job.
 */
#include "model/threads.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#elif defined(__aarch64__)
#define cpu_relax() __asm__ __volatile__("yield" ::: "memory") /* the spin-wait hint */
#else
#define cpu_relax() ((void)0)
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/perf.h"

typedef struct worker {
    struct sift__pool *pool;
    int index;
    pthread_t thread;
} worker;

struct sift__pool {
    int n_threads;
    worker *workers; /* [n_threads - 1] */
    /* The current job. Relaxed atomics: a stale worker may read them while the caller writes
     * the next job (harmless, see the top comment: its CAS then fails), and in C11 such a
     * read of a plain field is a data race all the same (ThreadSanitizer reports it).
     * Relaxed loads and stores compile to plain moves on x86. */
    _Atomic(sift__task_fn) fn;
    _Atomic(void *) arg;
    atomic_int n_chunks;
    atomic_int n_helpers; /* workers 1..n_helpers may take chunks */
    _Atomic uint64_t state;
    atomic_int done;
    atomic_int sleeping;
    atomic_bool stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static inline uint32_t gen_of(uint64_t s) { return (uint32_t)(s >> 32); }

/* Take chunks of the job whose generation is `gen` until none is left. */
static void work(sift__pool *p, uint32_t gen, int thread)
{
    for (;;) {
        uint64_t s = atomic_load(&p->state);
        if (gen_of(s) != gen) return;
        const sift__task_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *const arg = atomic_load_explicit(&p->arg, memory_order_relaxed);
        const int n = atomic_load_explicit(&p->n_chunks, memory_order_relaxed);
        const uint32_t c = (uint32_t)s;
        if (c >= (uint32_t)n) return;
        if (!atomic_compare_exchange_weak(&p->state, &s, s + 1)) continue;
        fn(arg, (int)c, n, thread);
        atomic_fetch_add(&p->done, 1);
    }
}

/* Wait for a job generation other than `seen`; returns it. */
static uint32_t wait_job(sift__pool *p, uint32_t seen)
{
    const int64_t t0 = sift__now_ns();
    for (unsigned spins = 0;; spins++) {
        const uint32_t g = gen_of(atomic_load(&p->state));
        if (g != seen || atomic_load(&p->stop)) return g;
        cpu_relax();
        if ((spins & 63) == 63 && sift__now_ns() - t0 > SIFT_POOL_SPIN_US * 1000LL) break;
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleeping, 1);
    uint32_t g;
    while ((g = gen_of(atomic_load(&p->state))) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleeping, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    sift__pool *p = w->pool;
    uint32_t seen = 0; /* the generation at creation (a job may already be out: do not re-read) */
    for (;;) {
        seen = wait_job(p, seen);
        if (atomic_load(&p->stop)) break;
        if (w->index <= atomic_load_explicit(&p->n_helpers, memory_order_relaxed)) work(p, seen, w->index);
    }
    return NULL;
}

sift__pool *sift__pool_new(int n_threads)
{
    if (n_threads < 1 || n_threads > SIFT_POOL_MAX_THREADS) return NULL;
    sift__pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = 1;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            sift__pool_free(p);
            return NULL;
        }
        for (int i = 1; i < n_threads; i++) {
            worker *w = &p->workers[i - 1];
            w->pool = p;
            w->index = i;
            if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
                sift__pool_free(p);
                return NULL;
            }
            p->n_threads++;
        }
    }
    return p;
}

void sift__pool_free(sift__pool *p)
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

int sift__pool_size(const sift__pool *p)
{
    return p ? p->n_threads : 1;
}

void sift__pool_run(sift__pool *p, int n_threads, int n_chunks, sift__task_fn fn, void *arg)
{
    if (n_chunks <= 0) return;
    if (!p || n_threads <= 1 || p->n_threads == 1 || n_chunks == 1) {
        for (int c = 0; c < n_chunks; c++) fn(arg, c, n_chunks, 0);
        return;
    }
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&p->n_chunks, n_chunks, memory_order_relaxed);
    atomic_store_explicit(&p->n_helpers, (n_threads < p->n_threads ? n_threads : p->n_threads) - 1,
                          memory_order_relaxed);
    atomic_store(&p->done, 0);
    const uint32_t gen = gen_of(atomic_load(&p->state)) + 1;
    atomic_store(&p->state, (uint64_t)gen << 32);
    if (atomic_load(&p->sleeping) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    work(p, gen, 0);
    /* a worker may still be inside its last chunk */
    for (unsigned spins = 0; atomic_load(&p->done) < n_chunks; spins++) {
        if (spins < 4096) cpu_relax();
        else sched_yield();
    }
}
