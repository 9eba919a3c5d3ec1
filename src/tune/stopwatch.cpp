#include "tune/stopwatch.h"

#include <chrono>

#include "common/error.h"

#ifdef CCLZ_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "codec/device.h"  // CCLZ_CUDA_CHECK
#endif

namespace cclz {
namespace {

class HostStopwatch final : public Stopwatch {
 public:
  void start(cclzStream_t) override { begin_ = Clock::now(); }
  void stop(cclzStream_t) override { end_ = Clock::now(); }
  double seconds() override { return std::chrono::duration<double>(end_ - begin_).count(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point begin_{}, end_{};
};

#ifdef CCLZ_HAVE_CUDA
class DeviceStopwatch final : public Stopwatch {
 public:
  DeviceStopwatch() {
    CCLZ_CUDA_CHECK(cudaEventCreate(&begin_));
    const cudaError_t made = cudaEventCreate(&end_);
    if (made != cudaSuccess) cudaEventDestroy(begin_);
    CCLZ_CUDA_CHECK(made);
  }
  ~DeviceStopwatch() override {
    cudaEventDestroy(begin_);
    cudaEventDestroy(end_);
  }
  void start(cclzStream_t stream) override {
    CCLZ_CUDA_CHECK(cudaEventRecord(begin_, static_cast<cudaStream_t>(stream)));
  }
  void stop(cclzStream_t stream) override {
    CCLZ_CUDA_CHECK(cudaEventRecord(end_, static_cast<cudaStream_t>(stream)));
  }
  double seconds() override {
    CCLZ_CUDA_CHECK(cudaEventSynchronize(end_));
    float ms = 0;
    CCLZ_CUDA_CHECK(cudaEventElapsedTime(&ms, begin_, end_));
    return ms * 1e-3;
  }

 private:
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
};
#endif

}  // namespace

std::unique_ptr<Stopwatch> makeStopwatch(MemoryKind memory) {
  if (memory == MemoryKind::Host) return std::make_unique<HostStopwatch>();
#ifdef CCLZ_HAVE_CUDA
  return std::make_unique<DeviceStopwatch>();
#else
  CCLZ_FAIL(cclzInternalError, "a device stopwatch needs a build with CUDA");
#endif
}

}  // namespace cclz
