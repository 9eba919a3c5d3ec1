// Device pieces shared by the version 2 encode and decode kernels (docs/formats.md, "lossless
// payload, version 2"): the static codes in device memory and warp-wide reductions.
#pragma once

#include <atomic>
#include <cstdint>

#include "codec/lossless/device.cuh"
#include "codec/lossless/format_v2.h"

namespace cclz::lossless::v2::device {

// The codes, derived from the lengths at compile time (format_v2.h), as device data.
__device__ const Codes kDeviceCodes = makeCodes();

constexpr uint32_t kFullMask = 0xffffffffu;
constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = 32 * kWarpsPerBlock;
constexpr uint32_t kMaxGroupsPerLane = kMaxChunkElems / (kGroup * kLanes);  // 16
// A warp's staging area: the largest block of a chunk (stored mode), 16-byte aligned.
constexpr uint32_t kStageBytes = (kBlockHeaderBytes + kMaxChunkElems + 15) / 16 * 16;

__device__ inline uint32_t warpMax(uint32_t v) { return __reduce_max_sync(kFullMask, v); }
__device__ inline uint32_t warpMin(uint32_t v) { return __reduce_min_sync(kFullMask, v); }
__device__ inline uint32_t warpSum(uint32_t v) { return __reduce_add_sync(kFullMask, v); }

__device__ inline uint32_t warpInclusiveScan(uint32_t v, uint32_t lane) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t other = __shfl_up_sync(kFullMask, v, d);
    if (lane >= static_cast<uint32_t>(d)) v += other;
  }
  return v;
}

// Symbols of lane l's j-th group (group l + 32j of the chunk): 8, fewer for the chunk's last
// group, 0 past its end.
__device__ inline uint32_t groupValid(uint32_t n, uint32_t g) {
  return g * kGroup >= n ? 0u : min(static_cast<uint32_t>(kGroup), n - g * kGroup);
}

}  // namespace cclz::lossless::v2::device
