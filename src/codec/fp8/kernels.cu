// The fp8 codec on the device. Encode: one warp per row, two passes over the row, each lane
// holding 8 consecutive values (a 16-byte vector of bf16/fp16) per 256-value tile; a bf16/fp16
// row of up to 1024 values is read once and held in registers, a longer one is read again by the
// second pass (from L1/L2). Decode and decode-and-accumulate, one pass: frames without rotation
// or smoothing (the E4M3/E5M2 default) take 16 codes per lane (decodePlain), the others one warp
// per 256-value tile (the rotation's butterflies span the warp).
// Every value goes through the CCLZ_HD helpers of format.h that the CPU reference uses, and every
// reduction gives the reference's result (max and top-3 do not depend on order; the sums of the
// adaptive statistic follow the spec's tree), so the bytes are the reference's.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "codec/device.h"
#include "codec/fp8/format.h"
#include "codec/fp8/shape.h"

namespace cclz::fp8 {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr uint32_t kLaneElems = 8;
constexpr uint32_t kTileElems = 32 * kLaneElems;  // one warp step
constexpr int kThreads = 256;
constexpr uint32_t kNoCandidate = 0xFFFFFFFFu;
constexpr uint32_t kHeldTiles = 4;  // encode: rows of up to 1024 bf16/fp16 values held in registers

template <int Dtype>
__device__ __forceinline__ float halfWordToFloat(uint32_t w) {
  return Dtype == cclzBfloat16 ? bf16ToFloat(static_cast<uint16_t>(w))
                               : halfToFloat(static_cast<uint16_t>(w));
}

// The lane's 8 values at element i of src; those at or past `valid` read as 0 (they take no part
// in maxima, top-3, statistics or whole groups).
template <int Dtype>
__device__ __forceinline__ void load8(const void* src, uint64_t i, uint32_t valid, bool vector,
                                      float* v) {
  if (valid == kLaneElems && vector) {
    if constexpr (Dtype == cclzFloat32) {
      const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(src) + i);
      const float4 a = p[0], b = p[1];
      v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
      v[7] = b.w;
    } else {
      const uint4 w = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(src) + i);
      const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[2 * j] = halfWordToFloat<Dtype>(words[j] & 0xFFFFu);
        v[2 * j + 1] = halfWordToFloat<Dtype>(words[j] >> 16);
      }
    }
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
    v[2 * j] = halfWordToFloat<Dtype>(words[j] & 0xFFFFu);
    v[2 * j + 1] = halfWordToFloat<Dtype>(words[j] >> 16);
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

// ---- Encode's fast paths. Each gives the bits of the format.h helper it stands for (the GPU tests
// compare the frames with the CPU reference byte for byte); they only compute them with fewer
// instructions.

// The block scales of one row, for every fine-scale code k: sInv[k] = (blockScale(c, k).s,
// blockScale(c, k).inv) (a reciprocal per code and row instead of one per candidate).
// NOTE: (s, inv) pairs side by side: a candidate reads both with one 8-byte shared load.
struct ScaleTable {
  float2 sInv[256];  // x: s, y: inv
};

__device__ __forceinline__ void fillScaleTable(ScaleTable& t, float coarse, uint32_t lane) {
#pragma unroll
  for (uint32_t k = lane; k < 256; k += 32) {
    const BlockScale sc = blockScale(coarse, k);
    t.sInv[k] = make_float2(sc.s, sc.inv);
  }
  __syncwarp();
}

// startCode(grid, coarse, a) from the table: the smallest k whose scale fits a. The first guess
// may be rough (a fast division): the corrections move it to that k from either side.
__device__ __forceinline__ uint32_t startCodeFast(uint32_t grid, float coarse, float a,
                                                  const ScaleTable& t) {
  if (coarse == 0.0f || a == 0.0f) return 0;
  const float top = gridTop(grid);
  const uint32_t nb = floatToBits(__fdividef(a, top * coarse));
  const int e = static_cast<int>(nb >> 23) - 127;
  int k = e < -7 ? 0 : e > 0 ? 255 : ((e + 7) << 5) | static_cast<int>((nb >> 18) & 31u);
  while (k > 0 && mulRn(a, t.sInv[k - 1].y) <= top) --k;
  while (k < 255 && !(mulRn(a, t.sInv[k].y) <= top)) ++k;
  return static_cast<uint32_t>(k);
}

__device__ __forceinline__ __nv_fp8_interpretation_t fp8Kind(uint32_t grid) {
  return grid == kE4M3 ? __NV_E4M3 : __NV_E5M2;
}

// roundMagnitude(grid, a) and (grid, b) for finite a, b >= 0 on an E4M3/E5M2 grid: the
// hardware's conversion to the grid (nearest even, saturating at the top) and back (exact).
__device__ __forceinline__ float2 roundMagnitude2(uint32_t grid, float a, float b) {
  const __nv_fp8x2_storage_t q = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE,
                                                          fp8Kind(grid));
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(q, fp8Kind(grid))));
}

// candidateError(grid, coarse, k, t) from the table.
__device__ __forceinline__ float candidateErrorFast(uint32_t grid, const ScaleTable& table,
                                                    uint32_t k, const float* t) {
  const float2 sInv = table.sInv[k];
  const float s = sInv.x, inv = sInv.y;
  float q[3];
  if (grid == kInt8) {
#pragma unroll
    for (int j = 0; j < 3; ++j) q[j] = roundMagnitude(grid, mulRn(t[j], inv));
  } else {
    const float2 q01 = roundMagnitude2(grid, mulRn(t[0], inv), mulRn(t[1], inv));
    q[0] = q01.x, q[1] = q01.y;
    q[2] = roundMagnitude2(grid, mulRn(t[2], inv), 0.0f).x;
  }
  float e = 0.0f;
#pragma unroll
  for (int j = 0; j < 3; ++j) {
    const float d = subRn(t[j], mulRn(q[j], s));
    e = j == 0 ? mulRn(d, d) : addRn(e, mulRn(d, d));
  }
  return e;
}

// The codes of 8 finite values on an E4M3/E5M2 grid, 4 to a word: quantize(grid, v[j]) by the
// hardware's conversion (nearest even, saturating), with a value that rounds to zero coded 0x00
// whatever its sign, as quantize does.
__device__ __forceinline__ void quantize8Fast(uint32_t grid, const float* v, uint32_t* packed) {
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * w], v[4 * w + 1]),
                                                 __NV_SATFINITE, fp8Kind(grid));
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * w + 2], v[4 * w + 3]),
                                                 __NV_SATFINITE, fp8Kind(grid));
    const uint32_t word = lo | (hi << 16);
    packed[w] = word & ~__vcmpeq4(word & 0x7F7F7F7Fu, 0u);
  }
}

__device__ __forceinline__ uint32_t validIn(uint32_t first, uint32_t n) {
  return first < n ? min(kLaneElems, n - first) : 0u;
}

// The data-dependent choices of one encode, at the start of its scratch (encodeScratchBytes);
// the column maxima of the smoothing sample follow it.
struct EncodeChoice {
  uint32_t rowElems, smoothApplied;
  uint32_t shapeBlocksDone, smoothBlocksDone;  // the last block to finish decides
  ShapeStats stats[kMaxShapeCandidates];
};

// Multiplies the lane's 8 values (columns first.. of their row) by their columns' 2^-shift.
__device__ __forceinline__ void smooth8(float* v, const uint8_t* shifts, uint32_t valid) {
  if (valid == 0) return;
  uint32_t w[2] = {0, 0};
  if (valid == kLaneElems) {
    const uint2 q = *reinterpret_cast<const uint2*>(shifts);
    w[0] = q.x, w[1] = q.y;
  } else {
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j)
      if (j < valid) w[j / 4] |= static_cast<uint32_t>(shifts[j]) << (8 * (j % 4));
  }
#pragma unroll
  for (uint32_t j = 0; j < kLaneElems; ++j)
    v[j] = mulRn(v[j], smoothDown((w[j / 4] >> (8 * (j % 4))) & 0xFFu));
}

// Chosen = false is the encode with every parameter known on the host. Chosen = true reads the
// row length and the smoothing decision the sampling kernels left in `choice`, patches the
// header with them, and leaves the side data's unused slots to the memset that preceded it.
template <int Dtype, bool Chosen>
__global__ void __launch_bounds__(kThreads)
    encodeKernel(Params p, Layout l, FrameHeader header, const void* src, uint64_t count,
                 bool vector, uint8_t* dst, uint64_t* encodedBytesOut, DeviceStatus* status,
                 const EncodeChoice* choice) {
  __shared__ ScaleTable tables[kThreads / 32];
  ScaleTable& table = tables[threadIdx.x / 32];
  const uint32_t lane = threadIdx.x & 31;
  uint32_t rowElems = p.rowElems;
  uint64_t numRows = l.numRows;
  bool smoothed = false;
  if constexpr (Chosen) {
    if (p.shape == kShapeAuto) rowElems = choice->rowElems;
    smoothed = choice->smoothApplied != 0;
    numRows = (count + rowElems - 1) / rowElems;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if constexpr (Chosen) {
      header.chunkElems = rowElems;
      header.numChunks = static_cast<uint32_t>(numRows);
      header.params[7] = smoothed ? 1 : 0;
      header.checksum = headerChecksum(header);
    }
    *reinterpret_cast<FrameHeader*>(dst) = header;
    // The alignment gaps are zero (each is shorter than 16 bytes).
    for (uint64_t i = l.codes + count; i < l.fine; ++i) dst[i] = 0;
    for (uint64_t i = l.fine + l.numBlocks; i < l.coarse; ++i) dst[i] = 0;
    if constexpr (!Chosen) {
      for (uint64_t i = l.coarse + 4 * l.numRows; i < l.flags; ++i) dst[i] = 0;
      for (uint64_t i = l.flags + l.numRows; i < l.frameBytes; ++i) dst[i] = 0;
    }
    status->encodedBytes = l.frameBytes;
    if (encodedBytesOut) *encodedBytesOut = l.frameBytes;
  }
  const uint32_t h = 1u << p.log2Hadamard, groupLanes = h / kLaneElems;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * blockDim.x / 32;
  for (uint64_t r = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       r < numRows; r += warps) {
    const uint64_t begin = r * rowElems;
    const uint32_t n = static_cast<uint32_t>(count - begin < rowElems ? count - begin : rowElems);
    const bool mayRotate = p.policy != kRotateNever && n >= h;

    // NOTE: a bf16/fp16 row of up to kHeldTiles tiles is read from HBM once, all its loads in
    // flight together (64 bytes per lane), and held in registers for both passes; longer rows
    // (and fp32) read each tile in each pass, the second time from L1/L2.
    constexpr bool kCanHold = Dtype != cclzFloat32;
    const bool held = kCanHold && n <= kHeldTiles * kTileElems;  // uniform
    uint4 raw[kHeldTiles];
    if constexpr (kCanHold) {
      if (held) {
#pragma unroll
        for (uint32_t t = 0; t < kHeldTiles; ++t) {
          const uint32_t first = t * kTileElems + lane * kLaneElems;
          raw[t] = loadRaw8<Dtype>(src, begin + first, validIn(first, n), vector);
        }
      }
    }
    // The lane's 8 values of the tile at t0 (its elements first.. of the row).
    auto tileValues = [&](uint32_t t0, uint32_t first, uint32_t valid, float* v) {
      if constexpr (kCanHold) {
        if (held) {  // constant indices: raw stays in registers
          const uint32_t t = t0 / kTileElems;
          unpackRaw8<Dtype>(t == 0 ? raw[0] : t == 1 ? raw[1] : t == 2 ? raw[2] : raw[3], v);
          return;
        }
      }
      load8<Dtype>(src, begin + first, valid, vector, v);
    };

    // Pass 1: finiteness, the row's largest |value|, and, where the row may be rotated, the
    // adaptive statistic and the largest |value| after rotation.
    bool finite = true;
    float rowMax = 0.0f, rotatedMax = 0.0f;
    uint32_t statistic = 0;
    for (uint32_t t0 = 0; t0 < n; t0 += kTileElems) {
      const uint32_t first = t0 + lane * kLaneElems;
      float v[kLaneElems];
      tileValues(t0, first, validIn(first, n), v);
      if constexpr (Chosen)
        if (smoothed) smooth8(v, dst + l.smooth + first, validIn(first, n));
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j) {
        if (isFiniteBits(floatToBits(v[j])))
          rowMax = maxf(rowMax, absf(v[j]));
        else
          finite = false;
      }
      if (mayRotate) {  // uniform across the warp
        const bool whole = t0 + (lane / groupLanes + 1) * h <= n;
        if (p.policy == kRotateAdaptive)
          statistic += groupStatistic(v, lane, groupLanes, p.log2Hadamard, whole);
        float y[kLaneElems];
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j) y[j] = v[j];
        hadamardWarp(y, lane, groupLanes);
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j)
          rotatedMax = maxf(rotatedMax, absf(whole ? y[j] : v[j]));
      }
    }
    finite = __all_sync(kFullMask, finite);
    rowMax = warpMax(rowMax);
    bool rotate = false;
    if (mayRotate && finite && rowMax < kMaxRotatedInput) {
      rotate = p.policy == kRotateAlways ||
               warpSum(statistic) >= p.threshold * (n / h);  // uniform: no divergent shuffle
    }
    if (rotate) rowMax = warpMax(rotatedMax);
    const float c = coarseScale(p.grid, rowMax);
    const bool fast = finite && p.grid != kInt8;  // uniform: hardware conversions, no specials
    __syncwarp();  // the previous row's last reads of the table are done
    fillScaleTable(table, c, lane);

    // Pass 2: per 64-value block (8 lanes), the top-3 magnitudes, the fine scale, the codes.
    for (uint32_t t0 = 0; t0 < n; t0 += kTileElems) {
      const uint32_t first = t0 + lane * kLaneElems, valid = validIn(first, n);
      float v[kLaneElems];
      tileValues(t0, first, valid, v);
      if constexpr (Chosen)
        if (smoothed) smooth8(v, dst + l.smooth + first, valid);
      if (rotate) {
        const bool whole = t0 + (lane / groupLanes + 1) * h <= n;
        float y[kLaneElems];
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j) y[j] = v[j];
        hadamardWarp(y, lane, groupLanes);
        if (whole)
#pragma unroll
          for (uint32_t j = 0; j < kLaneElems; ++j) v[j] = y[j];
      }
      // NOTE: branch-free top-3 (format.h: insertTop3, mergeTop3): 31 min/max per lane and 9 per
      // merge step, where offerTop3's branches cost about 4 times as many instructions.
      float t[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j) {
        const float a = absf(v[j]);  // a non-finite value is offered as 0: no change
        insertTop3(t, finite || isFiniteBits(floatToBits(v[j])) ? a : 0.0f);
      }
#pragma unroll
      for (int d = 1; d < 8; d <<= 1) {
        const float o[3] = {__shfl_xor_sync(kFullMask, t[0], d),
                            __shfl_xor_sync(kFullMask, t[1], d),
                            __shfl_xor_sync(kFullMask, t[2], d)};
        mergeTop3(t, o);
      }
      const uint32_t k0 = startCodeFast(p.grid, c, t[0], table);
      // NOTE: the candidates are spread over the block's 8 lanes (at most 4 each), then the
      // first smallest error wins, as in the reference's sequential loop.
      const bool search = p.candidates > 1 && c != 0.0f && t[0] != 0.0f;
      float bestErr = 0.0f;
      uint32_t best = kNoCandidate;
      if (search) {
        const uint32_t last = lastCandidate(k0, p.candidates);
        for (uint32_t k = k0 + (lane & 7); k <= last; k += 8) {
          const float e = candidateErrorFast(p.grid, table, k, t);
          if (best == kNoCandidate || e < bestErr) bestErr = e, best = k;
        }
      }
#pragma unroll
      for (int d = 1; d < 8; d <<= 1) {
        const float oe = __shfl_xor_sync(kFullMask, bestErr, d);
        const uint32_t ok = __shfl_xor_sync(kFullMask, best, d);
        const bool takeOther = ok != kNoCandidate && (best == kNoCandidate || oe < bestErr ||
                                                      (oe == bestErr && ok < best));
        if (takeOther) bestErr = oe, best = ok;
      }
      const uint32_t k = search ? best : k0;
      const float inv = table.sInv[k].y;
      uint32_t packed[2] = {0, 0};
      if (fast) {
        float scaled[kLaneElems];
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j) scaled[j] = mulRn(v[j], inv);
        quantize8Fast(p.grid, scaled, packed);
      } else {
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j) {
          const uint32_t u = floatToBits(v[j]);
          const uint32_t code =
              isFiniteBits(u) ? quantize(p.grid, mulRn(v[j], inv)) : specialCode(u);
          packed[j / 4] |= code << (8 * (j % 4));
        }
      }
      uint8_t* codes = dst + l.codes + begin + first;
      if (valid == kLaneElems) {
        *reinterpret_cast<uint2*>(codes) = make_uint2(packed[0], packed[1]);
      } else {
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j)  // unrolled: the arrays stay in registers
          if (j < valid) codes[j] = static_cast<uint8_t>(packed[j / 4] >> (8 * (j % 4)));
      }
      if ((lane & 7) == 0 && valid > 0)
        dst[l.fine + (begin + first) / kBlockElems] = static_cast<uint8_t>(k);
    }
    if (lane == 0) {
      *reinterpret_cast<float*>(dst + l.coarse + 4 * r) = c;
      dst[l.flags + r] = rotate ? 1 : 0;
    }
  }
}

// ---- The decisions from the data (codec/fp8/shape.h): small kernels over a sample, run before
// the encode on its stream, whose integer statistics are exact in any order.

// Reads a word another block of this grid wrote (before its __threadfence): from L2, not L1.
__device__ __forceinline__ uint64_t loadShared64(const uint64_t* p) {
  return __ldcg(reinterpret_cast<const unsigned long long*>(p));
}

constexpr int kShapeThreads = 1024;

__device__ __forceinline__ uint64_t warpSum64(uint64_t v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(kFullMask, v, d);
  return v;
}

// The sample's center (shapeCenter) from the binades of its first min(count, kShapeCenterElems)
// values with a magnitude, by the whole block. Lanes of a warp with the same binade add once
// (__match_any_sync): typical data has a few binades, and 1024 threads adding one by one into
// the same shared words would serialize. The median is found by one warp's scan of the 256 bins.
template <int Dtype>
__device__ uint32_t blockShapeCenter(const void* src, uint64_t count, uint32_t* histogram,
                                     uint32_t* counted) {
  const uint32_t lane = threadIdx.x % 32;
  for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) histogram[b] = 0;
  if (threadIdx.x == 0) *counted = 0;
  __syncthreads();
  const uint32_t centerElems =
      static_cast<uint32_t>(count < kShapeCenterElems ? count : kShapeCenterElems);
  const uint32_t warpStride = blockDim.x;
  for (uint32_t base = threadIdx.x - lane; base < centerElems; base += warpStride) {
    const uint32_t i = base + lane;  // the whole warp iterates together
    const float v = i < centerElems ? loadAsFloat(src, Dtype, i) : 0.0f;
    const bool has = i < centerElems && hasMagnitude(v);
    const uint32_t binade = has ? floatToBits(v) << 1 >> 24 : 256u;
    const uint32_t same = __match_any_sync(kFullMask, binade);
    if (has && lane == __ffs(same) - 1) atomicAdd(&histogram[binade], __popc(same));
    const uint32_t withMagnitude = __ballot_sync(kFullMask, has);
    if (lane == 0 && withMagnitude) atomicAdd(counted, __popc(withMagnitude));
  }
  __syncthreads();
  // Warp 0: lane l sums bins 8l..8l+7, an inclusive scan over the lanes finds the lane holding
  // the median, which walks its 8 bins: the smallest b with 2 * seen >= counted, as shapeCenter.
  __shared__ uint32_t center;
  if (threadIdx.x < 32) {
    uint32_t mine = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) mine += histogram[8 * lane + k];
    uint32_t seen = mine;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const uint32_t other = __shfl_up_sync(kFullMask, seen, d);
      if (lane >= static_cast<uint32_t>(d)) seen += other;
    }
    const uint32_t total = *counted;
    const uint32_t reached = __ballot_sync(kFullMask, 2 * seen >= total);
    if (lane == __ffs(reached) - 1) {  // reached != 0: the last lane's seen is total
      uint32_t before = seen - mine, b = 8 * lane;
      for (int k = 0; k < 8; ++k, ++b) {
        before += histogram[b];
        if (2 * before >= total) break;
      }
      center = b * 8 + 4;
    }
  }
  __syncthreads();
  return center;
}

// chooseRowElems (shape.h) by one warp: each lane scores candidates lane, lane + 32, ... once
// (a score costs a few fp64 divisions: on one thread the 2 x 57 of them were a long serial
// chain), then the best score, its bar and the first candidate at the bar, as chooseRowElems.
// `stats` were written by other blocks of this grid (read from L2).
__device__ uint32_t warpChooseRowElems(const ShapeStats* stats, uint32_t n, uint32_t log2H) {
  constexpr uint32_t kPerLane = (kMaxShapeCandidates + 31) / 32;
  const uint32_t lane = threadIdx.x % 32;
  double score[kPerLane];
  double best = -1.0;
#pragma unroll
  for (uint32_t k = 0; k < kPerLane; ++k) {
    const uint32_t i = lane + 32 * k;
    score[k] = -1.0;
    if (i < n) {
      ShapeStats s{};
      s.total = loadShared64(&stats[i].total);
      s.sumSq = loadShared64(&stats[i].sumSq);
      s.sumColSq = loadShared64(&stats[i].sumColSq);
      s.rows = __ldcg(&stats[i].rows);
      score[k] = channelStructure(s, shapeCandidate(i, log2H));
    }
    best = score[k] > best ? score[k] : best;
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const double other = __shfl_xor_sync(kFullMask, best, d);
    best = other > best ? other : best;
  }
  if (!(best >= kShapeMinStructure)) return kAutoFallbackRowElems;
  const double bar = mulRnD(kShapeNearBest, best);
#pragma unroll
  for (uint32_t k = 0; k < kPerLane; ++k) {
    const uint32_t atBar = __ballot_sync(kFullMask, lane + 32 * k < n && score[k] >= bar);
    if (atBar) return shapeCandidate(__ffs(atBar) - 1 + 32 * k, log2H);
  }
  return kAutoFallbackRowElems;  // not reached: the best passes its own bar
}

// Block c measures candidate row length c (ShapeStats over the sample: the column sums of the
// levels in shared memory, integer atomics, so exact in any order); the last block to finish
// chooses the row length, as chooseRowElemsRef does from the same integers.
template <int Dtype>
__global__ void __launch_bounds__(kShapeThreads)
    shapeKernel(const void* src, uint64_t count, uint32_t log2H, EncodeChoice* choice) {
  __shared__ uint32_t column[kAutoMaxRowElems];  // <= 128 rows x 128: no overflow
  __shared__ uint32_t histogram[256], counted;
  __shared__ unsigned long long total, sumSq, sumColSq;
  __shared__ bool last;
  const uint32_t c = blockIdx.x, rowElems = shapeCandidate(c, log2H), lane = threadIdx.x % 32;
  const uint32_t rows = static_cast<uint32_t>(shapeSampleElems(count) / rowElems);
  for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x) column[j] = 0;
  if (threadIdx.x == 0) total = sumSq = sumColSq = 0;
  // NOTE: every block finds the same center (a few thousand values from L2) rather than waiting
  // for one that would publish it.
  const uint32_t center = blockShapeCenter<Dtype>(src, count, histogram, &counted);
  if (rows >= kShapeMinRows) {  // uniform
    // Consecutive threads take consecutive values, so a warp's 32 column atomics hit 32 banks;
    // a thread has 8 loads in flight; each warp adds its sums of squares once.
    const uint32_t n = rows * rowElems;
    uint64_t mySq = 0;
    for (uint32_t base = threadIdx.x; base < n; base += kLaneElems * blockDim.x) {
      float v[kLaneElems];
#pragma unroll
      for (uint32_t k = 0; k < kLaneElems; ++k) {
        const uint32_t i = base + k * blockDim.x;
        v[k] = i < n ? loadAsFloat(src, Dtype, i) : 0.0f;
      }
#pragma unroll
      for (uint32_t k = 0; k < kLaneElems; ++k) {
        const uint32_t i = base + k * blockDim.x;
        if (i >= n) break;
        const uint32_t z = shapeLevel(v[k], center);
        atomicAdd(&column[i % rowElems], z);
        mySq += z * z;
      }
    }
    mySq = warpSum64(mySq);
    if (lane == 0) atomicAdd(&sumSq, mySq);
    __syncthreads();
    uint64_t myTotal = 0, myColSq = 0;
    for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x) {
      const uint64_t sum = column[j];
      myTotal += sum;
      myColSq += sum * sum;
    }
    myTotal = warpSum64(myTotal);
    myColSq = warpSum64(myColSq);
    if (lane == 0) atomicAdd(&total, myTotal), atomicAdd(&sumColSq, myColSq);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ShapeStats st{};
    st.rows = rows;
    if (rows >= kShapeMinRows) st.total = total, st.sumSq = sumSq, st.sumColSq = sumColSq;
    choice->stats[c] = st;
    __threadfence();
    last = atomicAdd(&choice->shapeBlocksDone, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last && threadIdx.x < 32) {
    __threadfence();
    const uint32_t chosen = warpChooseRowElems(choice->stats, gridDim.x, log2H);
    if (threadIdx.x == 0) choice->rowElems = chosen;
  }
}

// Block i adds the levels of sample row i (smoothSampleRow) into the column sums; the last block
// to finish writes the shifts into the frame's smoothing area and the decision into `choice`, as
// chooseSmoothingRef does. rowElems is the caller's, or (0) the shape kernel's choice.
template <int Dtype>
__global__ void __launch_bounds__(kThreads)
    smoothKernel(const void* src, uint64_t count, uint32_t fixedRowElems, EncodeChoice* choice,
                 uint32_t* levels, uint8_t* shiftsOut) {
  __shared__ uint32_t histogram[256];
  __shared__ uint32_t median;
  __shared__ bool last;
  const uint32_t rowElems = fixedRowElems ? fixedRowElems : choice->rowElems;
  const bool eligible = smoothEligible(count, rowElems);
  if (eligible) {
    const uint64_t begin = smoothSampleRow(blockIdx.x, count / rowElems) * rowElems;
    for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x)
      atomicAdd(&levels[j], magnitudeLevel(loadAsFloat(src, Dtype, begin + j)));
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(&choice->smoothBlocksDone, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (!eligible) {
    if (threadIdx.x == 0) choice->smoothApplied = 0;
    return;
  }
  for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) histogram[b] = 0;
  __syncthreads();
  for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x)
    atomicAdd(&histogram[columnBinade(__ldcg(&levels[j]))], 1u);
  __syncthreads();
  if (threadIdx.x == 0) median = medianBinade(histogram, rowElems);
  __syncthreads();
  bool any = false;
  for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x) {
    const uint32_t shift = smoothShift(columnBinade(__ldcg(&levels[j])), median);
    shiftsOut[j] = static_cast<uint8_t>(shift);
    any = any || shift != 0;
  }
  any = __syncthreads_or(any);
  if (threadIdx.x == 0) choice->smoothApplied = any ? 1 : 0;
}

// True when one of the word's four codes is special: NaN (0x80) or +-Inf (0x7F, 0xFF).
__device__ __forceinline__ bool hasSpecialCode(uint32_t w) {
  return (__vcmpeq4(w, 0x80808080u) | __vcmpeq4(w & 0x7F7F7F7Fu, 0x7F7F7F7Fu)) != 0;
}

// Two finite fp32 values rounded to nearest even into the dtype's 16-bit words (lo in the low
// half): one conversion instruction for both, the same bits as storeFromFloat for finite values.
template <int Dtype>
__device__ __forceinline__ uint32_t packFinite2(float lo, float hi) {
  uint32_t w;
  if constexpr (Dtype == cclzBfloat16) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    memcpy(&w, &h, 4);
  } else {
    const __half2 h = __floats2half2_rn(lo, hi);
    memcpy(&w, &h, 4);
  }
  return w;
}

template <int Dtype>
__device__ __forceinline__ float unpackHalfWord(uint32_t w) {
  return Dtype == cclzBfloat16 ? bitsToFloat(w << 16) : halfToFloat(static_cast<uint16_t>(w));
}

// acc[i + j] += add[j] for the lane's valid values.
__device__ __forceinline__ void accumulate8(float* acc, uint64_t i, uint32_t valid,
                                            const float* add) {
  if (valid == kLaneElems) {
    float4* p = reinterpret_cast<float4*>(acc + i);
    float4 a = p[0], b = p[1];
    a.x = accumulateRn(a.x, add[0]), a.y = accumulateRn(a.y, add[1]);
    a.z = accumulateRn(a.z, add[2]), a.w = accumulateRn(a.w, add[3]);
    b.x = accumulateRn(b.x, add[4]), b.y = accumulateRn(b.y, add[5]);
    b.z = accumulateRn(b.z, add[6]), b.w = accumulateRn(b.w, add[7]);
    p[0] = a, p[1] = b;
  } else {
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j)
      if (j < valid) acc[i + j] = accumulateRn(acc[i + j], add[j]);
  }
}

// store8 for bf16 / fp16: the 16-bit words decode would store.
template <int Dtype, bool Accumulate>
__device__ __forceinline__ void storeHalf8(void* dst, float* acc, uint64_t i, uint32_t valid,
                                           const float* v, bool finite) {
  uint32_t w[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if (finite) {
      w[j] = packFinite2<Dtype>(v[2 * j], v[2 * j + 1]);
    } else {
      uint16_t lo, hi;
      storeFromFloat(&lo, Dtype, 0, v[2 * j]);
      storeFromFloat(&hi, Dtype, 0, v[2 * j + 1]);
      w[j] = lo | (static_cast<uint32_t>(hi) << 16);
    }
  }
  if constexpr (Accumulate) {
    float add[kLaneElems];  // what decode would store, back in fp32
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      add[2 * j] = unpackHalfWord<Dtype>(w[j] & 0xFFFFu);
      add[2 * j + 1] = unpackHalfWord<Dtype>(w[j] >> 16);
    }
    accumulate8(acc, i, valid, add);
  } else if (valid == kLaneElems) {
    *reinterpret_cast<uint4*>(static_cast<uint16_t*>(dst) + i) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j)
      if (j < valid) static_cast<uint16_t*>(dst)[i + j] = static_cast<uint16_t>(w[j / 2] >> (16 * (j % 2)));
  }
}

// Stores (or adds) the lane's 8 decoded values at element i. `finite`: no value is NaN or Inf,
// so the conversions can take the hardware's paired path.
template <int Dtype, bool Accumulate>
__device__ __forceinline__ void store8(void* dst, float* acc, uint64_t i, uint32_t valid,
                                       const float* v, bool finite) {
  if constexpr (Dtype == cclzFloat32) {
    if constexpr (Accumulate) {
      accumulate8(acc, i, valid, v);
    } else if (valid == kLaneElems) {
      float4* p = reinterpret_cast<float4*>(static_cast<float*>(dst) + i);
      p[0] = make_float4(v[0], v[1], v[2], v[3]);
      p[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j)
        if (j < valid) static_cast<float*>(dst)[i + j] = v[j];
    }
  } else {
    storeHalf8<Dtype, Accumulate>(dst, acc, i, valid, v, finite);
  }
}

// What a lane reads for its 8 values of one 256-value tile: its codes and its row's and block's
// side data. Loaded for two tiles before either is decoded, so that more bytes are in flight.
struct TileLoad {
  uint64_t first;  // the lane's first element
  uint32_t valid;  // how many of its 8 exist
  uint2 codes;     // byte j of (x, y) is code j; codes past `valid` are 0
  float coarse;
  uint8_t flag, fine;
  uint2 shifts;  // smoothed frames: the smoothing shifts of the lane's 8 columns
};

__device__ __forceinline__ TileLoad loadTile(const uint8_t* src, const Layout& l, uint32_t rowElems,
                                             bool smoothed, uint64_t count, uint64_t tile,
                                             uint32_t lane) {
  TileLoad t;
  t.shifts = make_uint2(0, 0);
  t.first = tile * kTileElems + lane * kLaneElems;
  t.valid = t.first >= count               ? 0u
            : count - t.first < kLaneElems ? static_cast<uint32_t>(count - t.first)
                                           : kLaneElems;
  t.codes = make_uint2(0, 0);
  t.coarse = 0.0f, t.flag = 0, t.fine = 0;
  if (t.valid == 0) return t;
  const uint64_t row = t.first / rowElems;  // < numRows: first < count
  t.coarse = *reinterpret_cast<const float*>(src + l.coarse + 4 * row);
  t.flag = src[l.flags + row];
  t.fine = src[l.fine + t.first / kBlockElems];
  if (smoothed) {  // uniform; the lane's 8 columns lie in one row (rows are multiples of 64)
    const uint64_t column = t.first % rowElems;
    if (t.valid == kLaneElems) {
      t.shifts = *reinterpret_cast<const uint2*>(src + l.smooth + column);
    } else {
      uint32_t w[2] = {0, 0};
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j)
        if (j < t.valid)
          w[j / 4] |= static_cast<uint32_t>(src[l.smooth + column + j]) << (8 * (j % 4));
      t.shifts = make_uint2(w[0], w[1]);
    }
  }
  if (t.valid == kLaneElems) {
    t.codes = *reinterpret_cast<const uint2*>(src + l.codes + t.first);
  } else {
    uint32_t c[2] = {0, 0};
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j)
      if (j < t.valid) c[j / 4] |= static_cast<uint32_t>(src[l.codes + t.first + j]) << (8 * (j % 4));
    t.codes = make_uint2(c[0], c[1]);
  }
  return t;
}

// Decodes one loaded tile (every lane of the warp calls it: the rotation shuffles span the warp).
// Returns false when the tile failed validation (reported; nothing stored).
template <int Dtype, bool Accumulate>
__device__ __forceinline__ bool decodeTile(const TileLoad& t, const Params& p, uint64_t count,
                                           const float* codeTable, void* dst, float* acc,
                                           uint32_t lane, DeviceStatus* status) {
  const uint32_t h = 1u << p.log2Hadamard, groupLanes = h / kLaneElems;
  bool bad = false, rotated = false, special = false;
  float v[kLaneElems];
  const uint32_t words[2] = {t.codes.x, t.codes.y};
#pragma unroll
  for (uint32_t j = 0; j < kLaneElems; ++j) v[j] = 0.0f;
  if (t.valid > 0) {
    bad = !validCoarse(t.coarse, t.flag) || (t.flag != 0 && p.policy == kRotateNever);
    const uint64_t rowEnd = min(count, (t.first / p.rowElems + 1) * p.rowElems);
    rotated = t.flag != 0 && (t.first / h * h + h <= rowEnd);
    const float s = mulRn(t.coarse, fineScale(t.fine));
    special = hasSpecialCode(words[0]) || hasSpecialCode(words[1]);
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j)
      v[j] = mulRn(codeTable[(words[j / 4] >> (8 * (j % 4))) & 0xFFu], s);
    if (special) {  // rare: NaN and Inf keep their value, and a rotated group must hold none
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j) {
        const uint8_t code = static_cast<uint8_t>(words[j / 4] >> (8 * (j % 4)));
        if (isSpecialCode(code)) {
          v[j] = specialValue(code);
          if (rotated && j < t.valid) bad = true;
        }
      }
    }
  }
  if (__any_sync(kFullMask, rotated)) {
    const float invH = inverseHadamardScale(p.log2Hadamard);
    float y[kLaneElems];
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j) y[j] = v[j];
    hadamardWarp(y, lane, groupLanes);
    if (rotated)
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j) v[j] = mulRn(y[j], invH);
  }
  if (p.smoothApplied && t.valid > 0) {  // uniform across the frame; specials keep their bits
    const uint32_t w[2] = {t.shifts.x, t.shifts.y};
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j) {
      const uint32_t shift = (w[j / 4] >> (8 * (j % 4))) & 0xFFu;
      if (shift > kMaxSmoothShift) bad = true;
      const uint8_t code = static_cast<uint8_t>(words[j / 4] >> (8 * (j % 4)));
      if (!special || !isSpecialCode(code)) v[j] = mulRn(v[j], smoothUp(shift & 15u));
    }
  }
  // A bad lane may have spread garbage through its rotated group: the whole tile is skipped.
  if (__any_sync(kFullMask, bad)) {
    if (bad) atomicCAS(&status->decodeError, 0u, static_cast<uint32_t>(kFrameBadChunk));
    return false;
  }
  const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
  for (uint32_t j = 0; j < kLaneElems; ++j)
    if (!special || !isSpecialCode(static_cast<uint8_t>(words[j / 4] >> (8 * (j % 4)))))
      v[j] = saturate(v[j], maxFinite);
  if (t.valid > 0) store8<Dtype, Accumulate>(dst, acc, t.first, t.valid, v, !special);
  return true;
}

// ---- Decode of plain frames (policy 0, not smoothed: the E4M3/E5M2 default). No value depends
// on another, so each lane takes 16 consecutive codes (one 16-byte load, one block, one row) and
// a warp two 512-value tiles per step, both loaded before either is decoded. The bits are the
// general path's: the same scale, product and saturation; only the instructions differ.

constexpr uint32_t kPieceElems = 16;                  // a lane's codes: one uint4
constexpr uint32_t kPlainTileElems = 32 * kPieceElems;  // one warp step

// e / rowElems for e < 2^48: an fp64 estimate (off by at most one: the quotient is below 2^42
// and the estimate's relative error below 2^-51) and one correction. No 64-bit integer division
// (a call of ~70 instructions) per piece.
__device__ __forceinline__ uint64_t rowOf(uint64_t e, uint32_t rowElems, double invRowElems) {
  uint64_t q = static_cast<uint64_t>(static_cast<double>(e) * invRowElems);
  const int64_t r = static_cast<int64_t>(e - q * rowElems);
  if (r < 0)
    --q;
  else if (r >= static_cast<int64_t>(rowElems))
    ++q;
  return q;
}

// What a lane reads for its 16 values of one plain tile.
struct PieceLoad {
  uint64_t first;  // the lane's first element
  uint32_t valid;  // how many of its 16 exist
  uint4 codes;     // byte j of word j / 4 is code j; codes past `valid` are 0
  uint32_t coarseBits;
  uint8_t flag, fine;
};

__device__ __forceinline__ PieceLoad loadPiece(const uint8_t* src, const Layout& l,
                                               uint32_t rowElems, double invRowElems,
                                               uint64_t count, uint64_t tile, uint32_t lane) {
  PieceLoad t;
  t.first = tile * kPlainTileElems + lane * kPieceElems;
  t.valid = t.first >= count                ? 0u
            : count - t.first < kPieceElems ? static_cast<uint32_t>(count - t.first)
                                            : kPieceElems;
  t.codes = make_uint4(0, 0, 0, 0);
  t.coarseBits = 0, t.flag = 0, t.fine = 0;
  if (t.valid == 0) return t;
  const uint64_t row = rowOf(t.first, rowElems, invRowElems);  // < numRows: first < count
  t.coarseBits = __ldg(reinterpret_cast<const unsigned int*>(src + l.coarse) + row);
  t.flag = __ldg(src + l.flags + row);
  t.fine = __ldg(src + l.fine + t.first / kBlockElems);
  if (t.valid == kPieceElems) {  // l.codes = 64 and the frame is 16-byte aligned (cclz.h)
    t.codes = __ldg(reinterpret_cast<const uint4*>(src + l.codes + t.first));
  } else {
    uint32_t c[4] = {0, 0, 0, 0};
#pragma unroll
    for (uint32_t j = 0; j < kPieceElems; ++j)
      if (j < t.valid) c[j / 4] |= static_cast<uint32_t>(src[l.codes + t.first + j]) << (8 * (j % 4));
    t.codes = make_uint4(c[0], c[1], c[2], c[3]);
  }
  return t;
}

// The bytes of w the fast path cannot convert by hardware, as bit 7 of each byte: the special
// codes (NaN 0x80, Inf 0x7F/0xFF) and, on E5M2, magnitudes 0x7C..0x7E (valid codes the hardware
// reads as Inf/NaN). `carry` is 0x80 - (the smallest such magnitude) in every byte: a magnitude
// m <= 0x7F plus it reaches bit 7 exactly when m is rare, and no byte carries into the next.
// NOTE: bit arithmetic rather than __vcmpgeu4/__vcmpeq4 (about 10 instructions each on sm_90).
__device__ __forceinline__ uint32_t rareBytes(uint32_t w, uint32_t carry) {
  const uint32_t m = w & 0x7F7F7F7Fu;
  const uint32_t nonZero = m + 0x7F7F7F7Fu;  // bit 7 set where m > 0
  return ((m + carry) | (w & ~nonZero)) & 0x80808080u;
}

// Two fp32 values saturated to the dtype's largest finite value and rounded to nearest even, in
// one instruction: `satfinite` clamps what rounds past the largest finite value to it, which is
// what saturate-then-round gives (the largest finite value is on the grid). Inputs are never NaN.
template <int Dtype>
__device__ __forceinline__ uint32_t packSaturated2(float lo, float hi) {
  uint32_t w;
  if constexpr (Dtype == cclzBfloat16)
    asm("cvt.rn.satfinite.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  else
    asm("cvt.rn.satfinite.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(hi), "f"(lo));
  return w;
}

// Decodes one lane's piece of a plain frame: a piece with a bad row is reported and skipped (no
// value of another piece depends on it); one with a rare code or past the end of the frame takes
// the general per-value path.
template <int Dtype, bool Accumulate>
__device__ __forceinline__ void decodePiece(const PieceLoad& t, uint32_t grid,
                                            const float* codeTable, void* dst, float* acc,
                                            DeviceStatus* status) {
  if (t.valid == 0) return;
  const float coarse = bitsToFloat(t.coarseBits);
  if (t.flag != 0 || !validCoarse(coarse, 0)) {  // policy 0: no row may be rotated
    atomicCAS(&status->decodeError, 0u, static_cast<uint32_t>(kFrameBadChunk));
    return;
  }
  const float s = mulRn(coarse, fineScale(t.fine));
  const uint32_t words[4] = {t.codes.x, t.codes.y, t.codes.z, t.codes.w};
  const uint32_t carry = grid == kE5M2 ? 0x04040404u : 0x01010101u;
  uint32_t rareBits = 0;
#pragma unroll
  for (int w = 0; w < 4; ++w) rareBits |= rareBytes(words[w], carry);
  const bool rare = rareBits != 0 || t.valid != kPieceElems;
  float v[kPieceElems];
  if (rare) {  // NaN and Inf keep their value; every other value as below
    const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
    for (uint32_t j = 0; j < kPieceElems; ++j) {
      const uint8_t code = static_cast<uint8_t>(words[j / 4] >> (8 * (j % 4)));
      v[j] = isSpecialCode(code) ? specialValue(code)
                                 : saturate(mulRn(codeTable[code], s), maxFinite);
    }
#pragma unroll
    for (uint32_t h = 0; h < 2; ++h) {
      const uint32_t first = h * kLaneElems;
      if (t.valid > first)
        store8<Dtype, Accumulate>(dst, acc, t.first + first, min(kLaneElems, t.valid - first),
                                  v + first, false);
    }
    return;
  }
  if (grid == kInt8) {  // uniform
#pragma unroll
    for (uint32_t j = 0; j < kPieceElems; ++j)
      v[j] = mulRn(codeTable[(words[j / 4] >> (8 * (j % 4))) & 0xFFu], s);
  } else {
    // NOTE: the grids' finite codes are the OCP E4M3/E5M2 encodings (sign-magnitude, the same
    // subnormals), so the hardware's exact conversion to fp16 pairs gives codeValue.
#pragma unroll
    for (uint32_t j = 0; j < kPieceElems; j += 2) {
      const auto pair = static_cast<__nv_fp8x2_storage_t>(words[j / 4] >> (8 * (j % 4)));
      const float2 m = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, fp8Kind(grid))));
      v[j] = mulRn(m.x, s), v[j + 1] = mulRn(m.y, s);
    }
  }
  if constexpr (Dtype == cclzFloat32) {
    const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
    for (uint32_t j = 0; j < kPieceElems; ++j) v[j] = saturate(v[j], maxFinite);
#pragma unroll
    for (uint32_t h = 0; h < 2; ++h)
      store8<Dtype, Accumulate>(dst, acc, t.first + h * kLaneElems, kLaneElems, v + h * kLaneElems,
                                true);
  } else {
    uint32_t w[kPieceElems / 2];
#pragma unroll
    for (uint32_t k = 0; k < kPieceElems / 2; ++k) w[k] = packSaturated2<Dtype>(v[2 * k], v[2 * k + 1]);
    if constexpr (Accumulate) {
#pragma unroll
      for (uint32_t h = 0; h < 2; ++h) {
        float add[kLaneElems];  // what decode stores, back in fp32
#pragma unroll
        for (uint32_t k = 0; k < kLaneElems; ++k)
          add[k] = unpackHalfWord<Dtype>((w[4 * h + k / 2] >> (16 * (k % 2))) & 0xFFFFu);
        accumulate8(acc, t.first + h * kLaneElems, kLaneElems, add);
      }
    } else {
      uint4* out = reinterpret_cast<uint4*>(static_cast<uint16_t*>(dst) + t.first);
      out[0] = make_uint4(w[0], w[1], w[2], w[3]);
      out[1] = make_uint4(w[4], w[5], w[6], w[7]);
    }
  }
}

// The plain decode: every warp takes tiles (512 values) tile, tile + warps, ... two per step.
template <int Dtype, bool Accumulate>
__device__ __forceinline__ void decodePlain(const uint8_t* src, const Layout& l, const Params& p,
                                            uint64_t count, const float* codeTable, void* dst,
                                            float* acc, DeviceStatus* status) {
  const uint32_t lane = threadIdx.x & 31;
  const double invRowElems = 1.0 / p.rowElems;
  const uint64_t tiles = (count + kPlainTileElems - 1) / kPlainTileElems;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * blockDim.x / 32;
  for (uint64_t tile = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       tile < tiles; tile += 2 * warps) {
    const PieceLoad a = loadPiece(src, l, p.rowElems, invRowElems, count, tile, lane);
    PieceLoad b;
    b.valid = 0;
    if (tile + warps < tiles)
      b = loadPiece(src, l, p.rowElems, invRowElems, count, tile + warps, lane);
    decodePiece<Dtype, Accumulate>(a, p.grid, codeTable, dst, acc, status);
    decodePiece<Dtype, Accumulate>(b, p.grid, codeTable, dst, acc, status);
  }
}

// Decodes into dst (dtype) or, with Accumulate, adds to acc. Every block checks the header before
// it reads the payload and builds the value table of the frame's grid (one entry per code; the
// special codes' entries are overwritten per value). A tile whose side data or codes fail
// validation is reported and skipped. Each warp takes two tiles per step, loaded together.
template <int Dtype, bool Accumulate>
__global__ void __launch_bounds__(kThreads)
    decodeKernel(const uint8_t* src, uint64_t srcBytes, uint64_t count, void* dst, float* acc,
                 DeviceStatus* status) {
  static_assert(kThreads == 256, "one thread per code builds the table");
  __shared__ FrameHeader header;
  __shared__ uint32_t headerError;
  __shared__ float codeTable[256];
  if (threadIdx.x == 0) {
    uint32_t err = kFrameTruncated;
    if (srcBytes >= kFrameHeaderBytes) {
      header = *reinterpret_cast<const FrameHeader*>(src);
      err = checkFrameHeader(header, srcBytes);
      if (err == kFrameOk) err = checkFrameMatches(header, cclzCodecFp8, Dtype, count);
      if (err == kFrameOk) err = checkFp8Header(header, nullptr);
    }
    headerError = err;
    if (err != kFrameOk && blockIdx.x == 0) atomicCAS(&status->decodeError, 0u, err);
  }
  __syncthreads();
  if (headerError != kFrameOk) return;
  Params p;
  checkFp8Header(header, &p);
  const uint8_t code = static_cast<uint8_t>(threadIdx.x);
  codeTable[threadIdx.x] = isSpecialCode(code) ? 0.0f : codeValue(p.grid, code);
  __syncthreads();
  const Layout l = frameLayout(count, p);
  if (p.policy == kRotateNever && p.smoothApplied == 0) {  // uniform: the header's
    decodePlain<Dtype, Accumulate>(src, l, p, count, codeTable, dst, acc, status);
    return;
  }
  const bool smoothed = p.smoothApplied != 0;
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t tiles = (count + kTileElems - 1) / kTileElems;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * blockDim.x / 32;
  for (uint64_t tile = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       tile < tiles; tile += 2 * warps) {
    const bool second = tile + warps < tiles;  // uniform across the warp
    const TileLoad a = loadTile(src, l, p.rowElems, smoothed, count, tile, lane);
    TileLoad b;
    if (second) b = loadTile(src, l, p.rowElems, smoothed, count, tile + warps, lane);
    decodeTile<Dtype, Accumulate>(a, p, count, codeTable, dst, acc, lane, status);
    if (second) decodeTile<Dtype, Accumulate>(b, p, count, codeTable, dst, acc, lane, status);
  }
}

unsigned gridFor(uint64_t warpsOfWork) {
  const uint64_t warpsPerBlock = kThreads / 32;
  const uint64_t blocks = (warpsOfWork + warpsPerBlock - 1) / warpsPerBlock;
  return static_cast<unsigned>(std::clamp<uint64_t>(blocks, 1, 16384));
}

}  // namespace

namespace {

// The parameters of the frame as far as the host knows them: the smoothing area where the frame
// has one; the row length (auto) and the smoothing decision come from the device.
Params hostFrameParams(const Params& req, uint64_t count) {
  Params p = req;
  p.smoothing = req.smoothing && smoothCapacity(count, p.shape, p.rowElems, p.log2Hadamard) != 0;
  p.smoothApplied = 0;
  return p;
}

template <int Dtype>
void launchEncode(const Params& req, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, uint8_t* scratch,
                  cudaStream_t stream) {
  const Params p = hostFrameParams(req, count);
  const Layout l = frameLayout(count, p);
  const FrameHeader header = makeHeader(p, Dtype, count);
  const bool vector = reinterpret_cast<uintptr_t>(src) % 16 == 0;
  const unsigned blocks = gridFor(l.rowSlots);
  if (p.shape == kShapeCaller && !p.smoothing) {  // nothing to decide: the one-pass encode alone
    encodeKernel<Dtype, false><<<blocks, kThreads, 0, stream>>>(
        p, l, header, src, count, vector, dst, encodedBytesOut, status, nullptr);
    return;
  }
  auto* choice = reinterpret_cast<EncodeChoice*>(scratch);
  CCLZ_CUDA_CHECK(cudaMemsetAsync(scratch, 0, encodeScratchBytes(req, count), stream));
  // NOTE: the side data's unused slots (rows the choice did not need, the smoothing area of a
  // frame not smoothed) are zero; a memset of the side data is cheaper than finding them.
  CCLZ_CUDA_CHECK(cudaMemsetAsync(dst + l.coarse, 0, l.frameBytes - l.coarse, stream));
  if (p.shape == kShapeAuto)
    shapeKernel<Dtype><<<numShapeCandidates(p.log2Hadamard), kShapeThreads, 0, stream>>>(
        src, count, p.log2Hadamard, choice);
  if (p.smoothing)
    smoothKernel<Dtype><<<kSmoothMinRows, kThreads, 0, stream>>>(
        src, count, p.shape == kShapeCaller ? p.rowElems : 0u, choice,
        reinterpret_cast<uint32_t*>(scratch + sizeof(EncodeChoice)), dst + l.smooth);
  encodeKernel<Dtype, true><<<blocks, kThreads, 0, stream>>>(p, l, header, src, count, vector, dst,
                                                             encodedBytesOut, status, choice);
}

}  // namespace

uint64_t encodeScratchBytes(const Params& req, uint64_t count) {
  const Params p = hostFrameParams(req, count);
  if (p.shape == kShapeCaller && !p.smoothing) return 0;
  const uint32_t columns =
      p.smoothing ? smoothCapacity(count, p.shape, p.rowElems, p.log2Hadamard) : 0;
  return sizeof(EncodeChoice) + 4ull * columns;
}

void encodeDevice(const Params& p, int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, uint8_t* scratch,
                  cudaStream_t stream) {
  switch (dtype) {
    case cclzBfloat16:
      launchEncode<cclzBfloat16>(p, src, count, dst, encodedBytesOut, status, scratch, stream);
      break;
    case cclzFloat16:
      launchEncode<cclzFloat16>(p, src, count, dst, encodedBytesOut, status, scratch, stream);
      break;
    default:
      launchEncode<cclzFloat32>(p, src, count, dst, encodedBytesOut, status, scratch, stream);
  }
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void decodeDevice(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst,
                  float* acc, DeviceStatus* status, cudaStream_t stream) {
  // Two plain tiles a warp (the general path's loop takes whatever grid it gets).
  const unsigned blocks = gridFor((count + 2 * kPlainTileElems - 1) / (2 * kPlainTileElems));
  const bool accumulate = dst == nullptr;
#define CCLZ_FP8_DECODE(DT)                                                      \
  (accumulate ? decodeKernel<DT, true>                                           \
       <<<blocks, kThreads, 0, stream>>>(src, srcBytes, count, dst, acc, status) \
              : decodeKernel<DT, false>                                          \
       <<<blocks, kThreads, 0, stream>>>(src, srcBytes, count, dst, acc, status))
  switch (dtype) {
    case cclzBfloat16:
      CCLZ_FP8_DECODE(cclzBfloat16);
      break;
    case cclzFloat16:
      CCLZ_FP8_DECODE(cclzFloat16);
      break;
    default:
      CCLZ_FP8_DECODE(cclzFloat32);
  }
#undef CCLZ_FP8_DECODE
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cclz::fp8
