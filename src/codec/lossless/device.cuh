// Device helpers shared by the lossless encode and decode kernels.
#pragma once

#include <cstdint>

#include "codec/device.h"
#include "codec/lossless/elements.h"
#include "codec/lossless/format.h"

namespace cclz::lossless::device {

// Records the first error a kernel meets; later ones keep the first.
__device__ inline void reportError(DeviceStatus* status, uint32_t error) {
  atomicCAS(&status->decodeError, 0u, error);
}

// Exclusive prefix sum over the block (blockDim.x <= 1024, a multiple of 32). scratch: 32 words.
// Returns this thread's exclusive prefix; *total receives the sum over the block.
__device__ inline uint32_t blockExclusiveScan(uint32_t value, uint32_t* scratch, uint32_t* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  uint32_t inclusive = value;
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t other = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += other;
  }
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    uint32_t w = lane < warps ? scratch[lane] : 0;
    for (int d = 1; d < 32; d <<= 1) {
      const uint32_t other = __shfl_up_sync(0xffffffffu, w, d);
      if (lane >= d) w += other;
    }
    if (lane < warps) scratch[lane] = w;  // inclusive over warps
  }
  __syncthreads();
  const uint32_t warpBase = warp ? scratch[warp - 1] : 0;
  *total = scratch[warps - 1];
  __syncthreads();  // scratch may be reused right after
  return warpBase + inclusive - value;
}

// Group <-> 16-byte vectors, built from registers (a cast of a register array to uint4* would
// push the array to local memory).
template <typename Word>
__device__ inline uint32_t packedWord(const Word (&w)[kGroup], int i) {
  if constexpr (sizeof(Word) == 2) return w[2 * i] | (static_cast<uint32_t>(w[2 * i + 1]) << 16);
  else return w[i];
}

template <typename Word>
__device__ inline void unpackWord(uint32_t v, int i, Word (&w)[kGroup]) {
  if constexpr (sizeof(Word) == 2) {
    w[2 * i] = static_cast<Word>(v);
    w[2 * i + 1] = static_cast<Word>(v >> 16);
  } else {
    w[i] = v;
  }
}

// Loads the words of one group (valid < 8 only for a chunk's short last group), with 16-byte
// loads where the source is 16-byte aligned.
template <typename Word>
__device__ inline void loadGroup(const Word* in, uint32_t valid, bool aligned16, Word (&w)[kGroup]) {
  constexpr int kVectors = kGroup * sizeof(Word) / 16;
  if (valid == kGroup && aligned16) {
#pragma unroll
    for (int v = 0; v < kVectors; ++v) {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(in) + v);
      unpackWord(q.x, 4 * v + 0, w);
      unpackWord(q.y, 4 * v + 1, w);
      unpackWord(q.z, 4 * v + 2, w);
      unpackWord(q.w, 4 * v + 3, w);
    }
  } else {
#pragma unroll
    for (int i = 0; i < kGroup; ++i) w[i] = i < static_cast<int>(valid) ? in[i] : Word(0);
  }
}

// Stores one group; out must be 16-byte aligned when the group is whole.
template <typename Word>
__device__ inline void storeGroup(Word* out, uint32_t valid, const Word (&w)[kGroup]) {
  constexpr int kVectors = kGroup * sizeof(Word) / 16;
  if (valid == kGroup) {
#pragma unroll
    for (int v = 0; v < kVectors; ++v)
      reinterpret_cast<uint4*>(out)[v] = make_uint4(packedWord(w, 4 * v), packedWord(w, 4 * v + 1),
                                                    packedWord(w, 4 * v + 2), packedWord(w, 4 * v + 3));
  } else {
#pragma unroll
    for (int i = 0; i < kGroup; ++i)
      if (i < static_cast<int>(valid)) out[i] = w[i];
  }
}

}  // namespace cclz::lossless::device
