/*
 * threads.h - a small fork-join thread pool for the forward pass.
 *
 * A decode is a sequence of parallel steps (a matrix product, the attention of a layer,
 * ...), each split into nth equal parts: sift_pool_run(pool, nth, fn, arg) calls
 * fn(arg, ith, nth) for ith = 0..nth-1, part 0 on the calling thread, and returns when all
 * parts are done. Steps last tens of microseconds on small models, so waking threads
 * through the kernel each time would cost more than the work: workers spin on a
 * generation counter for a short while after each step (up to SIFT_POOL_SPIN_US) and only
 * then sleep on a condition variable. One pool belongs to one context and is driven by one
 * thread at a time.
 */
#ifndef SIFT_MODEL_THREADS_H
#define SIFT_MODEL_THREADS_H

#define SIFT_POOL_MAX_THREADS 256
#define SIFT_POOL_SPIN_US 300

typedef void (*sift_task_fn)(void *arg, int ith, int nth);
typedef struct sift_pool sift_pool;

/* A pool of n_threads (the caller counts as one: n_threads - 1 workers are started).
 * NULL when a thread cannot be created or memory runs out. */
sift_pool *sift_pool_new(int n_threads);
/* Stops and joins the workers (NULL-safe). */
void sift_pool_free(sift_pool *pool);
int sift_pool_size(const sift_pool *pool);
/* Run fn on nth threads (1 <= nth <= size; nth == 1 calls fn directly). */
void sift_pool_run(sift_pool *pool, int nth, sift_task_fn fn, void *arg);

#endif
