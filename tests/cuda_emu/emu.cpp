/*
 * emu.cpp - the CUDA emulator behind tests/cuda_emu/cuda_runtime*.h: a runtime (memory, copies,
 * capture into graphs) and a block scheduler that runs a block's threads as coroutines.
 *
 * A launch runs its blocks one at a time, in a shuffled order (a fixed pseudo-random
 * permutation per launch: the device chain's results must not depend on the order blocks
 * finish in). A block's 256 threads are ucontext coroutines; each runs until it reaches a
 * barrier (__syncthreads, or a warp's for a shuffle) or returns, in a shuffled order per
 * round. When every live thread of a scope has arrived the barrier opens; a returned thread
 * no longer counts (as on Volta and later). If no thread can run and some still wait, the
 * barrier can never open: the emulator reports the deadlock and aborts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

#include "cuda_runtime.h"

/* ---- runtime -------------------------------------------------------------------------------- */

static cudaError_t last_error = cudaSuccess;
static int current_device = 0;
static unsigned long long n_launches, n_blocks, n_barriers;

static cudaError_t fail(cudaError_t e)
{
    last_error = e;
    return e;
}

static int n_devices(void)
{
    const char *s = getenv("SIFT_EMU_DEVICES");
    return s ? atoi(s) : 1;
}

struct CUgraph_st {
    std::vector<std::function<void()>> ops;
};
struct CUgraphExec_st {
    std::vector<std::function<void()>> ops;
};
struct CUstream_st {
    int dummy;
};

static cudaStream_t capturing = NULL; /* the stream being captured, if any */
static bool capture_any = false;      /* capturing the legacy default stream (NULL) */
static CUgraph_st *capture_graph = NULL;

static bool captured(cudaStream_t s) { return capture_graph && (s == capturing || (s == NULL && capture_any)); }

/* run an operation of stream s now, or record it */
static void stream_op(cudaStream_t s, std::function<void()> op)
{
    if (captured(s)) capture_graph->ops.push_back(op);
    else op();
}

extern "C" {

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = n_devices();
    return *count > 0 ? cudaSuccess : fail(cudaErrorNoDevice);
}

cudaError_t cudaGetDevice(int *device)
{
    *device = current_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    if (device < 0 || device >= n_devices()) return fail(cudaErrorInvalidDevice);
    current_device = device;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    if (device < 0 || device >= n_devices()) return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "sift CUDA emulator (host)");
    prop->multiProcessorCount = 1;
    return cudaSuccess;
}

cudaError_t cudaGetLastError(void)
{
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    default: return "unknown error";
    }
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (captured(NULL) || capturing) return fail(cudaErrorStreamCaptureUnsupported);
    *p = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    if (!*p) return fail(cudaErrorMemoryAllocation);
    memset(*p, 0xA5, bytes); /* device memory starts with garbage */
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes) { return cudaMalloc(p, bytes); }
cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
    if (capture_graph) return fail(cudaErrorStreamCaptureUnsupported);
    memset(p, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s)
{
    stream_op(s, [=]() { memset(p, value, bytes); });
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind)
{
    (void)kind;
    if (capture_graph) return fail(cudaErrorStreamCaptureUnsupported);
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s)
{
    (void)kind;
    stream_op(s, [=]() { memmove(dst, src, bytes); });
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (captured(s)) return fail(cudaErrorStreamCaptureUnsupported);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    if (capture_graph) return fail(cudaErrorStreamCaptureUnsupported);
    return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status)
{
    *status = captured(s) ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    (void)flags;
    *s = new CUstream_st();
    return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    delete s;
    return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode)
{
    (void)mode;
    if (capture_graph) return fail(cudaErrorStreamCaptureUnsupported);
    capture_graph = new CUgraph_st();
    capturing = s;
    capture_any = s == NULL;
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    if (!capture_graph || s != capturing) return fail(cudaErrorInvalidValue);
    *g = capture_graph;
    capture_graph = NULL;
    capturing = NULL;
    capture_any = false;
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *ge, cudaGraph_t g, unsigned long long flags)
{
    (void)flags;
    *ge = new CUgraphExec_st();
    (*ge)->ops = g->ops;
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t ge, cudaStream_t s)
{
    (void)s;
    for (auto &op : ge->ops) op();
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t ge)
{
    delete ge;
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    delete g;
    return cudaSuccess;
}

void sift_emu_stats(unsigned long long *launches, unsigned long long *blocks, unsigned long long *barriers)
{
    *launches = n_launches;
    *blocks = n_blocks;
    *barriers = n_barriers;
}

} /* extern "C" */

/* ---- the block scheduler ---------------------------------------------------------------- */

enum { MAXT = 1024, STACK = 256 * 1024, SCOPES = 9 /* 8 warps + the block */ };

/* Coroutines. A thread slot keeps its coroutine for the whole program: it runs the current
 * kernel body, marks itself done and yields, forever. On x86-64 a switch is six pushes and
 * a stack swap (glibc's swapcontext makes two system calls per switch, which dominated the
 * emulator's time); elsewhere ucontext does it. */
#if defined(__x86_64__)
extern "C" void sift_emu_switch(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl sift_emu_switch\n"
        ".type sift_emu_switch,@function\n"
        "sift_emu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size sift_emu_switch, .-sift_emu_switch\n");
typedef void *coro_ctx;
#else
typedef ucontext_t coro_ctx;
#endif

struct ethread {
    coro_ctx ctx;
    int started, done, waiting, scope;
};

static ethread thr[MAXT];
static char *stacks;
static coro_ctx sched;
static unsigned n_threads, cur;
static int live[SCOPES], arrived[SCOPES];
static std::function<void()> *body;
static std::vector<unsigned char> dyn_smem;
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

uint3 sift_emu_block_idx;
unsigned long long sift_emu_shfl[8][32];

uint3 sift_emu_thread_idx(void) { return uint3{cur, 0, 0}; }
unsigned sift_emu_tid(void) { return cur; }
unsigned char *sift_emu_dyn_smem(void) { return dyn_smem.data(); }

static void to_sched(void)
{
#if defined(__x86_64__)
    sift_emu_switch(&thr[cur].ctx, sched);
#else
    swapcontext(&thr[cur].ctx, &sched);
#endif
}

static void to_thread(unsigned i)
{
    cur = i;
#if defined(__x86_64__)
    sift_emu_switch(&sched, thr[i].ctx);
#else
    swapcontext(&sched, &thr[i].ctx);
#endif
}

static uint64_t next_rand(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void shuffle(std::vector<unsigned> &v)
{
    for (size_t i = v.size(); i > 1; i--) std::swap(v[i - 1], v[next_rand() % i]);
}

/* open scope s's barrier when everyone alive in it has arrived */
static void maybe_release(int s)
{
    if (arrived[s] == 0 || arrived[s] < live[s]) return;
    arrived[s] = 0;
    n_barriers++;
    for (unsigned i = 0; i < n_threads; i++)
        if (thr[i].waiting && thr[i].scope == s) thr[i].waiting = 0;
}

void sift_emu_barrier(int scope)
{
    ethread &t = thr[cur];
    arrived[scope]++;
    t.waiting = 1;
    t.scope = scope;
    maybe_release(scope);
    if (t.waiting) to_sched();
}

/* a thread slot's whole life: run the block's body, end, wait for the next block */
static void coro_main(void)
{
    for (;;) {
        (*body)();
        thr[cur].done = 1;
        live[8]--;
        live[cur >> 5]--;
        maybe_release(8);
        maybe_release((int)(cur >> 5));
        to_sched();
    }
}

static void start_slot(unsigned i)
{
    ethread &t = thr[i];
    char *top = stacks + (size_t)(i + 1) * STACK;
#if defined(__x86_64__)
    /* what sift_emu_switch pops: six registers, then coro_main as the return address, at a
     * 16-byte aligned slot (so coro_main starts with rsp = 8 mod 16, as after a call) */
    uintptr_t slot = ((uintptr_t)top - 64) & ~(uintptr_t)15;
    void **sp = (void **)slot;
    sp[0] = (void *)coro_main;
    sp -= 6;
    for (int k = 0; k < 6; k++) sp[k] = NULL;
    t.ctx = sp;
#else
    getcontext(&t.ctx);
    t.ctx.uc_stack.ss_sp = top - STACK;
    t.ctx.uc_stack.ss_size = STACK;
    t.ctx.uc_link = NULL;
    makecontext(&t.ctx, coro_main, 0);
#endif
    t.started = 1;
}

static void run_block(unsigned threads)
{
    n_threads = threads;
    for (int s = 0; s < SCOPES; s++) live[s] = arrived[s] = 0;
    live[8] = (int)threads;
    for (unsigned i = 0; i < threads; i++) {
        live[i >> 5]++;
        ethread &t = thr[i];
        if (!t.started) start_slot(i);
        t.done = t.waiting = 0;
        t.scope = -1;
    }
    static std::vector<unsigned> order;
    order.resize(threads);
    for (unsigned i = 0; i < threads; i++) order[i] = i;
    for (;;) {
        shuffle(order);
        int alive = 0, ran = 0;
        for (unsigned k = 0; k < threads; k++) {
            const unsigned i = order[k];
            if (thr[i].done) continue;
            alive++;
            if (thr[i].waiting) continue;
            to_thread(i);
            ran++;
        }
        if (!alive) break;
        if (!ran) {
            int w = -1;
            for (unsigned i = 0; i < threads && w < 0; i++)
                if (!thr[i].done) w = (int)i;
            fprintf(stderr,
                    "cuda emulator: deadlock in block (%u, %u): thread %d waits at a %s barrier that can never open "
                    "(a barrier or shuffle not reached by every live thread)\n",
                    sift_emu_block_idx.x, sift_emu_block_idx.y, w, thr[w].scope == 8 ? "block" : "warp");
            abort();
        }
    }
}

void sift_emu_launch(cudaStream_t stream, dim3 grid, unsigned threads, size_t smem, std::function<void()> fn)
{
    if (threads == 0 || threads > MAXT || threads % 32 || grid.x == 0 || grid.y == 0) {
        last_error = cudaErrorInvalidValue;
        return;
    }
    stream_op(stream, [=]() {
        if (!stacks && !(stacks = (char *)malloc((size_t)MAXT * STACK))) abort();
        n_launches++;
        std::function<void()> f = fn;
        body = &f;
        dyn_smem.assign(smem + 16, 0xA5); /* shared memory starts with garbage */
        std::vector<unsigned> order(grid.x * grid.y);
        for (unsigned i = 0; i < order.size(); i++) order[i] = i;
        shuffle(order);
        for (unsigned b : order) {
            sift_emu_block_idx = uint3{b % grid.x, b / grid.x, 0};
            n_blocks++;
            run_block(threads);
            for (size_t i = smem; i < smem + 16; i++) /* a canary right past the dynamic shared memory */
                if (dyn_smem[i] != 0xA5) {
                    fprintf(stderr, "cuda emulator: block (%u, %u) wrote past its %zu bytes of dynamic shared memory\n",
                            sift_emu_block_idx.x, sift_emu_block_idx.y, smem);
                    abort();
                }
        }
        body = NULL;
    });
}
