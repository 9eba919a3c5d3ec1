// What the two fused NVLink paths (fused_nvlink.cpp: frames stored by a kernel;
// fused_copy_engines.cpp: frames copied by the copy engines) share on the host: device memory of
// this rank alone, the copy of staged output parts to their places, and a reduction's encode of
// a piece's blocks and sum of a piece's frames.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <algorithm>
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

// One destination's block of a reduction's piece: count values at src, encoded into dst.
struct EncodeBlock {
  const void* src = nullptr;
  uint64_t count = 0;
  uint8_t* dst = nullptr;
};

// A reduction's encode of one piece: blockOf(d) for the n destinations (blocks of no values are
// skipped). Blocks of one count, at most kMaxBatchFrames of them, go as one batch
// (Codec::encodeBatchDevice: each of the codec's kernels launched once for all of them, where the
// fp8 codec's fixed chain of sampling kernels would otherwise run once per destination); others
// one encode each. The bytes are the same either way. ws.scratch holds batchScratchBytes.
template <typename BlockOf>
void encodeBlocks(const Codec& codec, const cclzCodecConfig_t& config, int dtype, int n,
                  BlockOf blockOf, const DeviceWorkspace& ws, cudaStream_t stream) {
  FrameBatch batch;
  uint64_t count = 0;
  bool oneBatch = n <= kMaxBatchFrames;
  for (int d = 0; d < n && oneBatch; ++d) {
    const EncodeBlock b = blockOf(d);
    if (!b.count) continue;
    oneBatch = batch.n == 0 || b.count == count;
    count = b.count;
    batch.src[batch.n] = b.src, batch.dst[batch.n] = b.dst, ++batch.n;
  }
  if (oneBatch) {
    if (batch.n) codec.encodeBatchDevice(config, dtype, batch, count, ws, stream);
    return;
  }
  for (int d = 0; d < n; ++d) {
    const EncodeBlock b = blockOf(d);
    if (b.count) codec.encodeDevice(config, dtype, b.src, b.count, b.dst, nullptr, ws, stream);
  }
}

// The scratch encodeBlocks needs for n blocks of at most `count` values.
inline uint64_t batchScratchBytes(const Codec& codec, const cclzCodecConfig_t& config, int dtype,
                                  uint64_t count, int n) {
  return codec.encodeBatchScratchBytes(config, dtype, count, std::min(n, kMaxBatchFrames));
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
