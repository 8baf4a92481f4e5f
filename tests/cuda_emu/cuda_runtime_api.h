/*
 * cuda_runtime_api.h (emulation) - the part of the CUDA runtime API that sift's device chain
 * and its tests use, implemented on the host (emu.cpp), so that src/gpu/chain.c and
 * src/gpu/kernels.cu run on machines without a GPU. See README.md beside this file.
 *
 * Device memory is host memory; every stream operation runs at once, in order, except inside
 * a stream capture, where it is recorded into the graph and run at each cudaGraphLaunch.
 * Calls a capture forbids (synchronizations) fail with cudaErrorStreamCaptureUnsupported.
 */
#ifndef SIFT_CUDA_EMU_RUNTIME_API_H
#define SIFT_CUDA_EMU_RUNTIME_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidDevice = 101,
    cudaErrorNoDevice = 100,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorLaunchFailure = 719,
} cudaError_t;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
enum cudaStreamCaptureStatus { cudaStreamCaptureStatusNone = 0, cudaStreamCaptureStatusActive = 1 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1, cudaStreamCaptureModeRelaxed = 2 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
#define cudaStreamNonBlocking 0x01

struct cudaDeviceProp {
    char name[256];
    int multiProcessorCount;
};

cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaGetDevice(int *device);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *status);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *ge, cudaGraph_t g, unsigned long long flags);
cudaError_t cudaGraphLaunch(cudaGraphExec_t ge, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t ge);
cudaError_t cudaGraphDestroy(cudaGraph_t g);

/* emulation statistics: kernels launched, blocks run, barriers passed */
void sift_emu_stats(unsigned long long *launches, unsigned long long *blocks, unsigned long long *barriers);

#ifdef __cplusplus
}
#endif

#endif
