// The probes' checks of a CUDA call (CK) and a cclz call (CZ): on failure, print the call and
// the error, and return 1 from the enclosing function (main).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>

#include "cclz/cclz.h"

#define CK(x)                                               \
  do {                                                      \
    cudaError_t e_ = (x);                                   \
    if (e_ != cudaSuccess) {                                \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e_)); \
      return 1;                                             \
    }                                                       \
  } while (0)
#define CZ(x)                                                 \
  do {                                                        \
    if ((x) != cclzSuccess) {                                 \
      std::printf("%s: %s\n", #x, cclzGetLastError(nullptr)); \
      return 1;                                               \
    }                                                         \
  } while (0)
