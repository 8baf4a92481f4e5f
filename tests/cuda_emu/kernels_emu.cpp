/* src/gpu/kernels.cu compiled as C++ against the CUDA emulator (see README.md). */
#include "../../src/gpu/kernels.cu"
