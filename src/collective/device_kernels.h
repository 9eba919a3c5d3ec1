// The kernels of the device engine (device_kernels.cu): the element operations of reduce.h over
// whole buffers, queued on a stream. Device memory throughout.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstdint>

#include "codec/residual.h"

namespace cclz::reduce {

void storeDevice(const float* acc, uint64_t count, float divisor, int dtype, void* dst,
                 cudaStream_t stream);
void accumulateDevice(float* acc, const void* src, uint64_t count, int dtype,
                      cudaStream_t stream);
void addResidualDevice(void* dst, const void* src, Residual residual, uint64_t count, int dtype,
                       cudaStream_t stream);
void foldDevice(Residual residual, const void* intended, const void* got, uint64_t count,
                int dtype, float factor, cudaStream_t stream);

}  // namespace cclz::reduce

#endif  // CCLZ_HAVE_CUDA
