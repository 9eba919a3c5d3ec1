#include "gpu.h"

#include <algorithm>
#include <vector>

#include "timing.h"

namespace perf::gpu {

int deviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: clear the error, report none
    return 0;
  }
  return n;
}

uint64_t deviceBytesInUse() {
  size_t free = 0, total = 0;
  PERF_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total - free;
}

std::string deviceName(int device) {
  cudaDeviceProp prop{};
  PERF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return prop.name;
}

Buffer::Buffer(size_t bytes) : bytes_(bytes) {
  const cudaError_t err = cudaMalloc(&ptr_, std::max<size_t>(bytes, 1));
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    fail("cudaMalloc of {} bytes failed: {}", bytes, cudaGetErrorString(err));
  }
}

Buffer::~Buffer() { (void)cudaFree(ptr_); }

Stream::Stream() { PERF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() { (void)cudaStreamDestroy(stream_); }

namespace {
size_t flushBytes() {
  int device = 0, l2 = 0;
  PERF_CUDA_CHECK(cudaGetDevice(&device));
  PERF_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  return std::max<size_t>(4 * static_cast<size_t>(l2), 64u << 20);
}
}  // namespace

L2Flusher::L2Flusher() : scratch_(flushBytes()) {}

void L2Flusher::flush(cudaStream_t stream) {
  PERF_CUDA_CHECK(cudaMemsetAsync(scratch_.data(), 0x5a, scratch_.size(), stream));
}

namespace {
// After `warmup` untimed calls, `rounds` rounds of `callsPerRound` calls, one event pair around
// each round; the median round's time per call in microseconds. Calls are numbered on from 0.
double timeRounds(cudaStream_t stream, int warmup, int rounds, int callsPerRound,
                  const std::function<void(int)>& fn) {
  std::vector<cudaEvent_t> events(2 * static_cast<size_t>(rounds));
  for (auto& e : events) PERF_CUDA_CHECK(cudaEventCreate(&e));
  struct Destroy {
    std::vector<cudaEvent_t>& events;
    ~Destroy() {
      for (auto e : events) (void)cudaEventDestroy(e);
    }
  } destroy{events};

  for (int i = 0; i < warmup; ++i) fn(i);
  int call = warmup;
  for (int r = 0; r < rounds; ++r) {
    PERF_CUDA_CHECK(cudaEventRecord(events[2 * r], stream));
    for (int i = 0; i < callsPerRound; ++i) fn(call++);
    PERF_CUDA_CHECK(cudaEventRecord(events[2 * r + 1], stream));
  }
  PERF_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> us(rounds);
  for (int r = 0; r < rounds; ++r) {
    float ms = 0;
    PERF_CUDA_CHECK(cudaEventElapsedTime(&ms, events[2 * r], events[2 * r + 1]));
    us[r] = 1e3 * ms / callsPerRound;
  }
  return median(us);
}
}  // namespace

double timeOnStream(cudaStream_t stream, int warmup, int iters,
                    const std::function<void(int)>& fn) {
  return timeRounds(stream, warmup, iters, 1, fn);
}

double timeBatchOnStream(cudaStream_t stream, int warmup, int iters,
                         const std::function<void(int)>& fn) {
  return timeRounds(stream, warmup, kBatchRounds, iters, fn);
}

}  // namespace perf::gpu
