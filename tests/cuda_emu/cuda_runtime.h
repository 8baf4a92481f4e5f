/*
 * cuda_runtime.h (emulation) - enough of CUDA C++ to compile src/gpu/kernels.cu with a host
 * C++ compiler and run it: a kernel launch runs the grid's blocks one after another; a block's
 * threads are coroutines (emu.cpp) that switch only at __syncthreads and warp shuffles, so
 * shared memory, barriers, shuffles and atomics behave as CUDA specifies for one block, and
 * a barrier some threads can never reach is reported (a deadlock) instead of hanging.
 *
 * Not emulated: concurrency between blocks (they run in order, so cross-block races and
 * missing fences cannot show), timing, the memory model, out-of-bounds accesses (no checks),
 * and the device's own math library (expf is the host's).
 */
#ifndef SIFT_CUDA_EMU_RUNTIME_H
#define SIFT_CUDA_EMU_RUNTIME_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <functional>

#include "cuda_runtime_api.h"

#define __global__ static
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 {
    unsigned x, y, z;
};
struct alignas(16) float4 {
    float x, y, z, w;
};

uint3 sift_emu_thread_idx(void);
extern uint3 sift_emu_block_idx;
#define threadIdx (sift_emu_thread_idx())
#define blockIdx (sift_emu_block_idx)

void sift_emu_barrier(int scope); /* 0..7: a warp, 8: the block */
void sift_emu_launch(cudaStream_t stream, dim3 grid, unsigned threads, size_t smem, std::function<void()> body);
unsigned char *sift_emu_dyn_smem(void);
unsigned sift_emu_tid(void);

#define SIFT_GPU_LAUNCH(kernel, grid, smem, stream, ...)                                                              \
    sift_emu_launch((cudaStream_t)(stream), (grid), NT, (smem), [=]() { kernel(__VA_ARGS__); })
#define SIFT_GPU_DYN_SMEM(name) unsigned char *name = sift_emu_dyn_smem()

inline void __syncthreads(void) { sift_emu_barrier(8); }
inline void __threadfence(void) { __sync_synchronize(); }
[[noreturn]] inline void __trap(void) { abort(); }

template <typename V> inline V __ldcg(const V *p) { return *(const volatile V *)p; }
template <typename V> inline V atomicAdd(V *p, V v)
{
    const V old = *p; /* coroutines switch only at barriers: a plain update is atomic */
    *p = old + v;
    return old;
}

extern unsigned long long sift_emu_shfl[8][32];

template <typename V> inline V sift_emu_shfl_from(V v, int src)
{
    const unsigned t = sift_emu_tid(), w = t >> 5, lane = t & 31;
    static_assert(sizeof(V) <= sizeof(unsigned long long), "shuffle of a value wider than 64 bits");
    memcpy(&sift_emu_shfl[w][lane], &v, sizeof v);
    sift_emu_barrier((int)w);
    V r = v;
    if (src >= 0 && src < 32) memcpy(&r, &sift_emu_shfl[w][src], sizeof r);
    sift_emu_barrier((int)w);
    return r;
}
template <typename V> inline V __shfl_up_sync(unsigned mask, V v, int delta)
{
    (void)mask;
    const int lane = (int)(sift_emu_tid() & 31);
    return sift_emu_shfl_from(v, lane >= delta ? lane - delta : lane);
}
template <typename V> inline V __shfl_xor_sync(unsigned mask, V v, int m)
{
    (void)mask;
    return sift_emu_shfl_from(v, (int)(sift_emu_tid() & 31) ^ m);
}

template <typename F> inline cudaError_t cudaFuncSetAttribute(F *f, enum cudaFuncAttribute a, int v)
{
    (void)f, (void)a, (void)v;
    return cudaSuccess;
}

#endif
