// Lets one function serve the CPU reference and the CUDA kernels (DESIGN.md: one definition of
// each format). Under nvcc these become __host__ __device__; in plain C++ they vanish.
#pragma once

#if defined(__CUDACC__)
#define CCLZ_HD __host__ __device__ __forceinline__
#else
#define CCLZ_HD inline
#endif
