/*
 * threads.h - a small fork-join thread pool for the forward pass.
 *
 * A decode is a sequence of parallel steps (a matrix product, the attention of a layer,
 * ...). Each step is cut into n_chunks fixed pieces: sift__pool_run(pool, n_chunks, fn,
 * arg) calls fn(arg, chunk, n_chunks, thread) once for every chunk, on whichever threads
 * are running, and returns when all chunks are done. The calling thread works too, and
 * threads claim chunks one at a time, so a worker the OS has descheduled (the machine may
 * be shared, the threads outnumber the cores) costs at most the chunk it holds: the others,
 * the caller included, take the rest. Chunk boundaries never depend on which thread runs a
 * chunk, so results do not depend on the thread count or the schedule.
 *
 * Steps last microseconds on small models, so waking threads through the kernel for each
 * would cost more than the work: idle workers spin on the job word for a while
 * (SIFT_POOL_SPIN_US) and only then sleep on a condition variable. `thread` (0 = the
 * caller) indexes per-thread scratch. One pool belongs to one context and is driven by one
 * thread at a time.
 */
#ifndef SIFT_MODEL_THREADS_H
#define SIFT_MODEL_THREADS_H

#define SIFT_POOL_MAX_THREADS 256
#define SIFT_POOL_SPIN_US 200

typedef void (*sift__task_fn)(void *arg, int chunk, int n_chunks, int thread);
typedef struct sift__pool sift__pool;

/* A pool of n_threads (the caller counts as one: n_threads - 1 workers are started).
 * NULL when a thread cannot be created or memory runs out. */
sift__pool *sift__pool_new(int n_threads);
/* Stops and joins the workers (NULL-safe). */
void sift__pool_free(sift__pool *pool);
int sift__pool_size(const sift__pool *pool);
/* Run fn over n_chunks chunks using up to n_threads threads (n_threads <= 1, or a NULL or
 * one-thread pool: all on the caller, in order). */
void sift__pool_run(sift__pool *pool, int n_threads, int n_chunks, sift__task_fn fn, void *arg);

#endif
