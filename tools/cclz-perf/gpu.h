// CUDA helpers of cclz-perf: device discovery, owned buffers, L2 eviction and event timing.
// Compiled only when cclz has CUDA (CCLZ_HAVE_CUDA, defined by cclz_core).
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "error.h"
#include "options.h"

#define PERF_CUDA_CHECK(call) ::perf::gpu::checkCuda((call), #call)

namespace perf::gpu {

inline void checkCuda(cudaError_t err, const char* call) {
  if (err != cudaSuccess) fail("{} failed: {}", call, cudaGetErrorString(err));
}

// CUDA devices usable now; 0 when there are none or no driver (never fails).
int deviceCount();
std::string deviceName(int device);
// Bytes of the current device's memory in use (cudaMemGetInfo: by every process on it).
uint64_t deviceBytesInUse();

// Device memory owned by one object (cudaMalloc is 256-byte aligned).
class Buffer {
 public:
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(ptr_); }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Writes a scratch buffer several times the L2 size, so that the timed loop that follows reads
// its data from HBM and not from a cache warmed by the previous loop.
class L2Flusher {
 public:
  L2Flusher();
  void flush(cudaStream_t stream);

 private:
  Buffer scratch_;
};

// Calls fn(i) for i in [0, warmup + iters) on stream, with an event pair around each of the last
// iters calls; returns the median elapsed time of one call in microseconds. fn must enqueue its
// work on stream.
// NOTE: each call is timed alone, so where the host takes longer to make a call than the GPU to
// run it, the time includes the host's part (the GPU waits for the launch).
double timeOnStream(cudaStream_t stream, int warmup, int iters, const std::function<void(int)>& fn);

// --batch: after the warm-up calls, kBatchRounds rounds of iters calls queued back to back with
// one event pair around each round (nccl-tests' timing, and a pipeline's: the host queues a call
// while the GPU runs the one before); returns the median over the rounds of the time per call.
double timeBatchOnStream(cudaStream_t stream, int warmup, int iters,
                         const std::function<void(int)>& fn);

}  // namespace perf::gpu

#endif  // CCLZ_HAVE_CUDA
