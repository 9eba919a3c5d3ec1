#include "collective/device_kernels.h"
#include "collective/reduce.h"
#include "codec/device.h"

namespace cclz::reduce {
namespace {

// NOTE: memory-bound elementwise passes; a grid-stride loop over 256-thread blocks, capped so a
// launch stays cheap for small pieces and fills the GPU for large ones.
constexpr int kThreads = 256;

unsigned gridFor(uint64_t count) {
  const uint64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 4096 ? (blocks ? blocks : 1) : 4096);
}

__global__ void storeKernel(const float* acc, uint64_t count, float divisor, int dtype,
                            void* dst) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x)
    storeElement(acc, i, divisor, dtype, dst);
}

__global__ void accumulateKernel(float* acc, const void* src, uint64_t count, int dtype) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x)
    accumulateElement(acc, i, src, dtype);
}

__global__ void foldKernel(Residual residual, const void* intended, const void* got,
                           uint64_t count, int dtype, float factor) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x)
    foldElement(residual, i, intended, got, dtype, factor);
}

__global__ void addResidualKernel(void* dst, const void* src, Residual residual, uint64_t count,
                                  int dtype) {
  for (uint64_t i = blockIdx.x * uint64_t{blockDim.x} + threadIdx.x; i < count;
       i += uint64_t{gridDim.x} * blockDim.x)
    addResidualElement(dst, src, residual, i, dtype);
}

}  // namespace

void storeDevice(const float* acc, uint64_t count, float divisor, int dtype, void* dst,
                 cudaStream_t stream) {
  if (!count) return;
  storeKernel<<<gridFor(count), kThreads, 0, stream>>>(acc, count, divisor, dtype, dst);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void accumulateDevice(float* acc, const void* src, uint64_t count, int dtype,
                      cudaStream_t stream) {
  if (!count) return;
  accumulateKernel<<<gridFor(count), kThreads, 0, stream>>>(acc, src, count, dtype);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void foldDevice(Residual residual, const void* intended, const void* got, uint64_t count,
                int dtype, float factor, cudaStream_t stream) {
  if (!count) return;
  foldKernel<<<gridFor(count), kThreads, 0, stream>>>(residual, intended, got, count, dtype,
                                                      factor);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void addResidualDevice(void* dst, const void* src, Residual residual, uint64_t count, int dtype,
                       cudaStream_t stream) {
  if (!count) return;
  addResidualKernel<<<gridFor(count), kThreads, 0, stream>>>(dst, src, residual, count, dtype);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cclz::reduce
