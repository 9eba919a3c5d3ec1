// Device memory for GPU tests, with guard bytes on both sides filled with a pattern the tests
// check; used by every GPU suite.
// NOTE: the codec runs on a non-blocking stream, which does not wait for the legacy default stream
// that cudaMemcpy/cudaMemset use, so every change made here ends with a device synchronization.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace cclz::test {

inline bool haveCudaDevice() {
  static const bool have = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) (void)cudaGetLastError();
    return e == cudaSuccess && n > 0;
  }();
  return have;
}

class GuardedDeviceBuffer {
 public:
  static constexpr size_t kGuard = 256;  // keeps data() 256-byte aligned
  static constexpr uint8_t kPattern = 0xC3;

  explicit GuardedDeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (cudaMalloc(&base_, bytes + 2 * kGuard) != cudaSuccess) {
      base_ = nullptr;
      return;
    }
    cudaMemset(base_, kPattern, bytes + 2 * kGuard);
    cudaDeviceSynchronize();
  }
  ~GuardedDeviceBuffer() { cudaFree(base_); }
  GuardedDeviceBuffer(const GuardedDeviceBuffer&) = delete;
  GuardedDeviceBuffer& operator=(const GuardedDeviceBuffer&) = delete;

  bool ok() const { return base_ != nullptr; }
  uint8_t* data() { return static_cast<uint8_t*>(base_) + kGuard; }
  size_t size() const { return bytes_; }

  void upload(const void* src, size_t bytes, size_t offset = 0) {
    ASSERT_LE(offset + bytes, bytes_);
    if (!bytes) return;
    ASSERT_EQ(cudaMemcpy(data() + offset, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  std::vector<uint8_t> download(size_t bytes, size_t offset = 0) {
    std::vector<uint8_t> out(bytes);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (bytes) {
      EXPECT_EQ(cudaMemcpy(out.data(), data() + offset, bytes, cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
    return out;
  }
  void fill(uint8_t value) {
    EXPECT_EQ(cudaMemset(data(), value, bytes_), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  bool guardsIntact() {
    std::vector<uint8_t> all(bytes_ + 2 * kGuard);
    if (cudaDeviceSynchronize() != cudaSuccess) return false;
    if (cudaMemcpy(all.data(), base_, all.size(), cudaMemcpyDeviceToHost) != cudaSuccess)
      return false;
    for (size_t i = 0; i < kGuard; ++i)
      if (all[i] != kPattern || all[kGuard + bytes_ + i] != kPattern) return false;
    return true;
  }

 private:
  void* base_ = nullptr;
  size_t bytes_;
};

struct TestStream {
  cudaStream_t s = nullptr;
  TestStream() { cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); }
  ~TestStream() {
    if (s) cudaStreamDestroy(s);
  }
  cclzStream_t get() const { return reinterpret_cast<cclzStream_t>(s); }
};

}  // namespace cclz::test
