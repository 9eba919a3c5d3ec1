// Device helpers shared by the fp8 kernels (encode_kernel.cu, decode_kernel.cu,
// sample_kernel.cu): the lane layout (8 consecutive values per lane, 256 per warp step), loads of
// a lane's values, warp reductions, the warp Hadamard transform and the adaptive statistic.
// Every value goes through the CCLZ_HD helpers of format.h that the CPU reference uses, and every
// reduction gives the reference's result (max and top-3 do not depend on order; the sums of the
// adaptive statistic follow the spec's tree), so the bytes are the reference's.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <utility>

#include "codec/device.h"
#include "codec/fp8/format.h"
#include "codec/fp8/shape.h"
#include "codec/load_device.cuh"
#include "codec/pdl.cuh"

namespace cclz::fp8 {

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr uint32_t kLaneElems = 8;
constexpr uint32_t kTileElems = 32 * kLaneElems;  // one warp step
constexpr int kThreads = 256;

// The lane's 8 values at element i of src; those at or past `valid` read as 0 (they take no part
// in maxima, top-3, statistics or whole groups).
template <int Dtype>
__device__ __forceinline__ void load8(const void* src, uint64_t i, uint32_t valid, bool vector,
                                      float* v) {
  if (valid == kLaneElems && vector) {
    loadEightAsFloat<Dtype>(src, i, v);
    return;
  }
#pragma unroll
  for (uint32_t j = 0; j < kLaneElems; ++j)
    v[j] = j < valid ? loadAsFloat(src, Dtype, i + j) : 0.0f;
}

// A lane's 8 bf16/fp16 values at element i as they are stored (those at or past `valid` read as
// 0 bits, which load8 reads as 0), and their fp32 values: unpackRaw8(loadRaw8(...)) is load8.
template <int Dtype>
__device__ __forceinline__ uint4 loadRaw8(const void* src, uint64_t i, uint32_t valid,
                                          bool vector) {
  const uint16_t* p = static_cast<const uint16_t*>(src) + i;
  if (valid == kLaneElems && vector) return *reinterpret_cast<const uint4*>(p);
  uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (uint32_t j = 0; j < kLaneElems; ++j)
    if (j < valid) w[j / 2] |= static_cast<uint32_t>(p[j]) << (16 * (j % 2));
  return make_uint4(w[0], w[1], w[2], w[3]);
}
template <int Dtype>
__device__ __forceinline__ void unpackRaw8(uint4 r, float* v) {
  const uint32_t words[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    v[2 * j] = halfWordAsFloat<Dtype>(words[j] & 0xFFFFu);
    v[2 * j + 1] = halfWordAsFloat<Dtype>(words[j] >> 16);
  }
}

__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v = maxf(v, __shfl_xor_sync(kFullMask, v, d));
  return v;
}

__device__ __forceinline__ uint32_t warpSum(uint32_t v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(kFullMask, v, d);
  return v;
}

// y = W y over groups of groupLanes lanes (8 values each), in the spec's order: the stages of
// length 1, 2, 4 inside the lane, then 8, 16, ... across lanes (partner lane ^ d; the lower index
// takes a + b, the upper a - b). Every lane must call it (the shuffles span the warp).
__device__ __forceinline__ void hadamardWarp(float* y, uint32_t lane, uint32_t groupLanes) {
#pragma unroll
  for (uint32_t len = 1; len < kLaneElems; len <<= 1)
#pragma unroll
    for (uint32_t i = 0; i < kLaneElems; ++i)
      if ((i & len) == 0) {
        const float a = y[i], b = y[i + len];
        y[i] = addRn(a, b);
        y[i + len] = subRn(a, b);
      }
  for (uint32_t d = 1; d < groupLanes; d <<= 1) {
    const bool upper = (lane & d) != 0;
#pragma unroll
    for (uint32_t i = 0; i < kLaneElems; ++i) {
      const float other = __shfl_xor_sync(kFullMask, y[i], d);
      y[i] = upper ? subRn(other, y[i]) : addRn(y[i], other);
    }
  }
}

// The adaptive statistic's contribution of the lane's group (docs/formats.md, "Rotation"),
// counted once per group (by its first lane) and only for whole groups.
__device__ __forceinline__ uint32_t groupStatistic(const float* v, uint32_t lane,
                                                   uint32_t groupLanes, uint32_t log2H,
                                                   bool whole) {
  float a = 0.0f;
#pragma unroll
  for (uint32_t j = 0; j < kLaneElems; ++j) a = maxf(a, absf(v[j]));
  for (uint32_t d = 1; d < groupLanes; d <<= 1) a = maxf(a, __shfl_xor_sync(kFullMask, a, d));
  const float scale = statisticScale(a);
  float e = 0.0f;
  if (a != 0.0f) {
    float xs[kLaneElems];
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j) xs[j] = mulRn(v[j], scale);
    e = sumSquares8(xs);
  }
  // NOTE: a xor butterfly gives every lane the index-ordered pairwise tree's sum (addition is
  // commutative, and lane i and lane i^d add the same two partial sums).
  for (uint32_t d = 1; d < groupLanes; d <<= 1) e = addRn(e, __shfl_xor_sync(kFullMask, e, d));
  if (!whole || a == 0.0f || lane % groupLanes != 0) return 0;
  return groupOutlierLog2(mulRn(a, scale), e, log2H);
}

// launchKernel(kernel, grid, kThreads, 0, stream, programmatic, args...) (codec/pdl.cuh).
template <typename... Params, typename... Args>
void launchFp8Kernel(void (*kernel)(Params...), dim3 grid, cudaStream_t stream, bool programmatic,
                     Args&&... args) {
  launchKernel(kernel, grid, kThreads, 0, stream, programmatic, std::forward<Args>(args)...);
}

// __frcp_rn(s) for s whose exponent field is 1..252: the hardware's approximate reciprocal and one
// Newton step, the sequence __frcp_rn runs for those s after its range test (which sends the other
// exponents to a slow path). Checked equal to __frcp_rn for every such s, both signs
// (Fp8Reciprocal.EqualsIeeeOnEveryNormalExponentTo252,
// tests/codec/fp8_reciprocal_gpu_test.cu).
__device__ __forceinline__ float reciprocalOfNormal(float s) {
  float r;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(s));
  return fmaRn(r, -fmaRn(s, r, -1.0f), r);
}

__device__ __forceinline__ __nv_fp8_interpretation_t fp8Kind(uint32_t grid) {
  return grid == kE4M3 ? __NV_E4M3 : __NV_E5M2;
}


__device__ __forceinline__ uint32_t validIn(uint32_t first, uint32_t n) {
  return first < n ? min(kLaneElems, n - first) : 0u;
}

// The data-dependent choices of one encode, at the start of its scratch (encodeScratchBytes);
// where the encoder chooses the row length a ShapeSample follows it; then the column sums of the
// smoothing sample.
struct EncodeChoice {
  uint32_t rowElems, smoothApplied;
  uint32_t shapeBlocksDone, smoothBlocksDone;  // the last block to finish decides
  ShapeStats stats[kMaxShapeCandidates];
};
// The row-length sample's levels (shapeLevel, 0..128), computed once by shapeSampleKernel and
// read by every candidate's block; and the sums of their squares per 64 values (every measured
// prefix rows * R is a multiple of 64).
struct ShapeSample {
  uint8_t z[kShapeSampleElems];
  uint32_t chunkSq[kShapeSampleElems / kBlockElems];
};
static_assert(sizeof(EncodeChoice) % 16 == 0 && sizeof(ShapeSample) % 16 == 0,
              "the scratch's parts stay 16-byte aligned");

// The frames one launch of the encode's kernels writes (FrameBatch): frame blockIdx.y from its
// own source into its own frame, with its own part of the scratch. The frames have one count, so
// one layout and one grid in x; an encode of one frame is a batch of one.
struct EncodeFrames {
  const void* src[kMaxBatchFrames];
  uint8_t* dst[kMaxBatchFrames];
  uint64_t* encodedBytesOut[kMaxBatchFrames];
  uint8_t* scratch;  // frame f's: scratch + f * scratchStride (each encodeScratchBytes)
  uint64_t scratchStride;

  __device__ __forceinline__ const void* source() const { return src[blockIdx.y]; }
  __device__ __forceinline__ uint8_t* frame() const { return dst[blockIdx.y]; }
  __device__ __forceinline__ uint64_t* sizeOut() const { return encodedBytesOut[blockIdx.y]; }
  __device__ __forceinline__ uint8_t* scratchPart(uint64_t offset) const {
    return scratch + blockIdx.y * scratchStride + offset;
  }
  __device__ __forceinline__ EncodeChoice* choice() const {
    return reinterpret_cast<EncodeChoice*>(scratchPart(0));
  }
};

// Where the sampling kernels find their parts of a frame's scratch and of the frame (byte
// offsets): the row-length sample (ShapeSample) and the smoothing's column sums in the scratch,
// after the EncodeChoice at its start; the side data the first kernel zeroes (from the coarse
// scales on, in place of two memsets) and the smoothing area in the frame.
struct SampleParts {
  uint64_t sample, levels;
  uint64_t side, sideBytes, smooth;
};

// The blocks of kThreads threads for warpsOfWork warps' worth of work (grid-stride beyond 16384).
inline unsigned gridFor(uint64_t warpsOfWork) {
  const uint64_t warpsPerBlock = kThreads / 32;
  const uint64_t blocks = (warpsOfWork + warpsPerBlock - 1) / warpsPerBlock;
  return static_cast<unsigned>(std::clamp<uint64_t>(blocks, 1, 16384));
}

// The sampling kernels (sample_kernel.cu), queued on `stream` before the encode that reads their
// choice, each one launch for the n frames of `frames` (grid y). The row length
// (numMeasuredCandidates(count, log2H) > 0): launchShapeKernels queues shapeSampleKernel (the
// sample's levels; it also zeroes the choice's counters and the frame's side data) and
// shapeStatsKernel (one block per measured candidate; the last one chooses). The smoothing
// shifts: launchSmoothKernel queues smoothKernel (fixedRowElems 0: the row length the shape
// kernels chose; afterShapeKernels: queued right after them, it may start early); `columns` is
// the frame's smoothing capacity, its scratch's levels hold as many words (no need to zero
// them), the choice's smoothBlocksDone must be zero (the shape kernels or a memset).
void launchShapeKernels(int dtype, const EncodeFrames& frames, int n, uint64_t count, bool vector,
                        uint32_t log2H, const SampleParts& parts, cudaStream_t stream);
void launchSmoothKernel(int dtype, const EncodeFrames& frames, int n, uint64_t count, bool vector,
                        uint32_t fixedRowElems, uint32_t columns, bool afterShapeKernels,
                        const SampleParts& parts, cudaStream_t stream);

}  // namespace cclz::fp8
