#include "collective/completion_words.h"

#ifdef CCLZ_HAVE_CUDA

#include <cuda.h>  // the driver's types and flags only: nothing of libcuda is linked
#include <cuda_runtime_api.h>

#include <atomic>
#include <string>

#include "codec/device.h"
#include "common/error.h"
#include "common/trace.h"

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

// With lazy loading (CUDA_MODULE_LOADING=LAZY, the default on Linux since CUDA 12.2) a kernel's
// code is loaded at its first launch, and that load may wait for all work on the device to stop
// (CUDA Programming Guide, "Lazy Loading"). The proxy launches a job's kernels while the caller's
// stream waits for the job's completion word, so a first launch there would wait for a wait that
// only the job ends: the proxy hangs in its first launch of every kernel. Eager loading loads every
// kernel when the context is created, before any word can be waited for.
void requireEagerLoading() {
  using GetLoadingMode = CUresult (*)(CUmoduleLoadingMode*);
  const auto get = reinterpret_cast<GetLoadingMode>(driverFunction("cuModuleGetLoadingMode"));
  CUmoduleLoadingMode mode = CU_MODULE_LAZY_LOADING;
  checkDriver(get(&mode), "cuModuleGetLoadingMode");
  CCLZ_REQUIRE(mode == CU_MODULE_EAGER_LOADING, cclzNotSupported,
               "CCLZ_ASYNC=1 needs CUDA_MODULE_LOADING=EAGER in the environment before CUDA "
               "starts: with lazy loading, the proxy thread's first launch of a kernel may wait "
               "for the caller's stream, which waits for the proxy");
}

}  // namespace

CompletionWords::CompletionWords() {
  requireEagerLoading();
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
  CCLZ_TRACE("words: stream %p waits for word %u >= %u (now %u)", static_cast<void*>(stream),
             job % kWords, job, reinterpret_cast<volatile uint32_t*>(host_)[job % kWords]);
  checkDriver(reinterpret_cast<StreamValue32>(wait_)(reinterpret_cast<CUstream>(stream), word,
                                                      job, CU_STREAM_WAIT_VALUE_GEQ),
              "cuStreamWaitValue32");
}

void CompletionWords::writeOn(cclzStream_t stream, uint32_t job) {
  const CUdeviceptr word = device_ + (job % kWords) * sizeof(uint32_t);
  CCLZ_TRACE("words: stream %p will write word %u = %u", static_cast<void*>(stream), job % kWords,
             job);
  checkDriver(reinterpret_cast<StreamValue32>(write_)(reinterpret_cast<CUstream>(stream), word,
                                                       job, CU_STREAM_WRITE_VALUE_DEFAULT),
              "cuStreamWriteValue32");
}

void CompletionWords::writeFromHost(uint32_t job) noexcept {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  reinterpret_cast<volatile uint32_t*>(host_)[job % kWords] = job;
  std::atomic_thread_fence(std::memory_order_seq_cst);
  CCLZ_TRACE("words: host wrote word %u = %u", job % kWords, job);
}

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
