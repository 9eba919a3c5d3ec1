// What the two fused NVLink paths (fused_nvlink.cpp: frames stored by a kernel;
// fused_copy_engines.cpp: frames copied by the copy engines) share on the host: device memory of
// this rank alone, the copy of staged output parts to their places, and a reduce-scatter's sum
// of a piece's frames.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstdint>

#include "codec/codec.h"
#include "codec/device.h"

namespace cclz::fused {

inline uint64_t roundUp(uint64_t v, uint64_t unit) { return (v + unit - 1) / unit * unit; }

inline bool isCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CCLZ_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// Device memory of this rank alone (cudaMalloc). The caller grows it outside captures only, once
// no queued work uses it.
class LocalArea {
 public:
  LocalArea() = default;
  LocalArea(const LocalArea&) = delete;
  LocalArea& operator=(const LocalArea&) = delete;
  ~LocalArea() { cudaFree(p_); }
  uint8_t* get() const { return p_; }
  bool covers(uint64_t bytes) const { return bytes <= bytes_; }
  void grow(uint64_t bytes) {
    if (covers(bytes)) return;
    cudaFree(p_);
    p_ = nullptr, bytes_ = 0;
    CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), bytes));
    bytes_ = bytes;
  }

 private:
  uint8_t* p_ = nullptr;
  uint64_t bytes_ = 0;
};

// Output parts decoded into an aligned staging area (n parts of `bytes`, stagedPitch apart) to
// their places (pitch apart): one 2D copy, or one copy per part where the output's pitch is above
// what a 2D copy takes (2^31 - 1 bytes: cudaDevAttrMaxPitch).
inline void copyStagedOut(uint8_t* out, uint64_t pitch, const uint8_t* staged, uint64_t stagedPitch,
                          uint64_t bytes, int n, cudaStream_t stream) {
  if (pitch <= 0x7FFFFFFFull) {
    CCLZ_CUDA_CHECK(cudaMemcpy2DAsync(out, pitch, staged, stagedPitch, bytes, n,
                                      cudaMemcpyDeviceToDevice, stream));
    return;
  }
  for (int r = 0; r < n; ++r)
    CCLZ_CUDA_CHECK(cudaMemcpyAsync(out + r * pitch, staged + r * stagedPitch, bytes,
                                    cudaMemcpyDeviceToDevice, stream));
}

// A piece's sum over its n frames, frameOf(r) in rank order (so that every rank and path sums
// alike; frameBytes each), stored at `store` (16-byte aligned) as round(sum / divisor): the
// codec's one pass where it has one (Codec::sumsInOnePass; acc may then be NULL), else one step
// per frame through acc (the first from zero, the last stored).
template <typename FrameOf>
void decodeSum(const Codec& codec, const cclzCodecConfig_t& config, int dtype, int n,
               FrameOf frameOf, uint64_t frameBytes, uint64_t count, float* acc, void* store,
               float divisor, const DeviceWorkspace& ws, cudaStream_t stream) {
  if (codec.sumsInOnePass(config, n)) {
    FrameSum sum;
    for (int r = 0; r < n; ++r) sum.frames[r] = frameOf(r);
    sum.n = n, sum.frameBytes = frameBytes, sum.store = store, sum.divisor = divisor;
    codec.decodeSumDevice(config, sum, dtype, count, ws, stream);
    return;
  }
  for (int r = 0; r < n; ++r) {
    const ReduceStep step{acc, r == 0, r == n - 1 ? store : nullptr, divisor};
    codec.decodeReduceDevice(config, frameOf(r), frameBytes, dtype, count, step, ws, stream);
  }
}

}  // namespace cclz::fused

#endif  // CCLZ_HAVE_CUDA
