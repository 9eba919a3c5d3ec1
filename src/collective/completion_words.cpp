#include "collective/completion_words.h"

#ifdef CCLZ_HAVE_CUDA

#include <cuda.h>  // the driver's types and flags only: nothing of libcuda is linked
#include <cuda_runtime_api.h>

#include <atomic>
#include <string>

#include "codec/device.h"
#include "common/error.h"

namespace cclz {
namespace {

using StreamValue32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

// The driver's function `name` in the form of CUDA 12.0 (the _v2 memory operations, available
// without the old opt-in).
void* driverFunction(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  CCLZ_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found));
  CCLZ_REQUIRE(found == cudaDriverEntryPointSuccess && fn, cclzNotSupported,
               std::string("CCLZ_ASYNC=1 needs the driver's ") + name + ", which it does not have");
  return fn;
}

void checkDriver(CUresult result, const char* call) {
  CCLZ_REQUIRE(result == CUDA_SUCCESS, cclzUnhandledCudaError,
               std::string(call) + " failed (CUresult " + std::to_string(result) + ")");
}

}  // namespace

CompletionWords::CompletionWords() {
  wait_ = driverFunction("cuStreamWaitValue32");
  write_ = driverFunction("cuStreamWriteValue32");
  CCLZ_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&host_), kWords * sizeof(uint32_t),
                                cudaHostAllocMapped));
  for (uint32_t i = 0; i < kWords; ++i) host_[i] = 0;
  void* device = nullptr;
  const cudaError_t mapped = cudaHostGetDevicePointer(&device, host_, 0);
  if (mapped != cudaSuccess) {
    cudaFreeHost(host_);
    CCLZ_CUDA_CHECK(mapped);
  }
  device_ = reinterpret_cast<uint64_t>(device);
}

// cudaFreeHost waits for the device: a caller's stream still waiting on a word is not left
// reading freed memory (the communicator drains its jobs first, so every word is written).
CompletionWords::~CompletionWords() { cudaFreeHost(host_); }

void CompletionWords::waitOn(cclzStream_t stream, uint32_t job) {
  const CUdeviceptr word = device_ + (job % kWords) * sizeof(uint32_t);
  checkDriver(reinterpret_cast<StreamValue32>(wait_)(reinterpret_cast<CUstream>(stream), word,
                                                      job, CU_STREAM_WAIT_VALUE_GEQ),
              "cuStreamWaitValue32");
}

void CompletionWords::writeOn(cclzStream_t stream, uint32_t job) {
  const CUdeviceptr word = device_ + (job % kWords) * sizeof(uint32_t);
  checkDriver(reinterpret_cast<StreamValue32>(write_)(reinterpret_cast<CUstream>(stream), word,
                                                       job, CU_STREAM_WRITE_VALUE_DEFAULT),
              "cuStreamWriteValue32");
}

void CompletionWords::writeFromHost(uint32_t job) noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  reinterpret_cast<volatile uint32_t*>(host_)[job % kWords] = job;
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
