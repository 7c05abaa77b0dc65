// CBATCH_HOST_DEVICE: marks a function callable from host and device code when nvcc compiles it, and is
// empty for the host compiler, so that plain headers can share small functions with the kernels.
#pragma once

#if defined(__CUDACC__)
#define CBATCH_HOST_DEVICE __host__ __device__
#else
#define CBATCH_HOST_DEVICE
#endif
