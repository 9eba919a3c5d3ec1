// The fp8 codec on the device. Encode: one warp per row, two passes over the row (the second
// finds it in L1/L2, so HBM sees one read), each lane holding 8 consecutive values (a 16-byte
// vector of bf16/fp16). Decode and decode-and-accumulate: one warp per 256-value tile, one pass.
// Every value goes through the CCLZ_HD helpers of format.h that the CPU reference uses, and every
// reduction gives the reference's result (max and top-3 do not depend on order; the sums of the
// adaptive statistic follow the spec's tree), so the bytes are the reference's.
#include <cuda_runtime.h>

#include <algorithm>

#include "codec/device.h"
#include "codec/fp8/format.h"

namespace cclz::fp8 {
namespace {

constexpr unsigned kFullMask = 0xFFFFFFFFu;
constexpr uint32_t kLaneElems = 8;
constexpr uint32_t kTileElems = 32 * kLaneElems;  // one warp step
constexpr int kThreads = 256;
constexpr uint32_t kNoCandidate = 0xFFFFFFFFu;

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

__device__ __forceinline__ uint32_t validIn(uint32_t first, uint32_t n) {
  return first < n ? min(kLaneElems, n - first) : 0u;
}

template <int Dtype>
__global__ void __launch_bounds__(kThreads)
    encodeKernel(Params p, Layout l, FrameHeader header, const void* src, uint64_t count,
                 bool vector, uint8_t* dst, uint64_t* encodedBytesOut, DeviceStatus* status) {
  const uint32_t lane = threadIdx.x & 31;
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *reinterpret_cast<FrameHeader*>(dst) = header;
    // The alignment gaps are zero (each is shorter than 16 bytes).
    for (uint64_t i = l.codes + count; i < l.fine; ++i) dst[i] = 0;
    for (uint64_t i = l.fine + l.numBlocks; i < l.coarse; ++i) dst[i] = 0;
    for (uint64_t i = l.coarse + 4 * l.numRows; i < l.flags; ++i) dst[i] = 0;
    for (uint64_t i = l.flags + l.numRows; i < l.frameBytes; ++i) dst[i] = 0;
    status->encodedBytes = l.frameBytes;
    if (encodedBytesOut) *encodedBytesOut = l.frameBytes;
  }
  const uint32_t h = 1u << p.log2Hadamard, groupLanes = h / kLaneElems;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * blockDim.x / 32;
  for (uint64_t r = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       r < l.numRows; r += warps) {
    const uint64_t begin = r * p.rowElems;
    const uint32_t n =
        static_cast<uint32_t>(count - begin < p.rowElems ? count - begin : p.rowElems);
    const bool mayRotate = p.policy != kRotateNever && n >= h;

    // Pass 1: finiteness, the row's largest |value|, and, where the row may be rotated, the
    // adaptive statistic and the largest |value| after rotation.
    bool finite = true;
    float rowMax = 0.0f, rotatedMax = 0.0f;
    uint32_t statistic = 0;
    for (uint32_t t0 = 0; t0 < n; t0 += kTileElems) {
      const uint32_t first = t0 + lane * kLaneElems;
      float v[kLaneElems];
      load8<Dtype>(src, begin + first, validIn(first, n), vector, v);
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

    // Pass 2: per 64-value block (8 lanes), the top-3 magnitudes, the fine scale, the codes.
    for (uint32_t t0 = 0; t0 < n; t0 += kTileElems) {
      const uint32_t first = t0 + lane * kLaneElems, valid = validIn(first, n);
      float v[kLaneElems];
      load8<Dtype>(src, begin + first, valid, vector, v);
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
      float t[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j)
        if (isFiniteBits(floatToBits(v[j]))) offerTop3(t, absf(v[j]));
#pragma unroll
      for (int d = 1; d < 8; d <<= 1) {
        const float o0 = __shfl_xor_sync(kFullMask, t[0], d);
        const float o1 = __shfl_xor_sync(kFullMask, t[1], d);
        const float o2 = __shfl_xor_sync(kFullMask, t[2], d);
        offerTop3(t, o0), offerTop3(t, o1), offerTop3(t, o2);
      }
      const uint32_t k0 = startCode(p.grid, c, t[0]);
      // NOTE: the candidates are spread over the block's 8 lanes (at most 4 each), then the
      // first smallest error wins, as in the reference's sequential loop.
      const bool search = p.candidates > 1 && c != 0.0f && t[0] != 0.0f;
      float bestErr = 0.0f;
      uint32_t best = kNoCandidate;
      if (search) {
        const uint32_t last = lastCandidate(k0, p.candidates);
        for (uint32_t k = k0 + (lane & 7); k <= last; k += 8) {
          const float e = candidateError(p.grid, c, k, t);
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
      const BlockScale sc = blockScale(c, k);
      uint32_t packed[2] = {0, 0};
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j) {
        const uint32_t u = floatToBits(v[j]);
        const uint32_t code =
            isFiniteBits(u) ? quantize(p.grid, mulRn(v[j], sc.inv)) : specialCode(u);
        packed[j / 4] |= code << (8 * (j % 4));
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

// Stores (or adds) the lane's 8 decoded values at element i.
template <int Dtype, bool Accumulate>
__device__ __forceinline__ void store8(void* dst, float* acc, uint64_t i, uint32_t valid,
                                       const float* v) {
  if constexpr (Accumulate) {
    float add[kLaneElems];
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j) {
      uint32_t word = 0;  // what decode would store, back in fp32
      storeFromFloat(&word, Dtype, 0, v[j]);
      add[j] = loadAsFloat(&word, Dtype, 0);
    }
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
  } else if (valid == kLaneElems) {
    if constexpr (Dtype == cclzFloat32) {
      float4* p = reinterpret_cast<float4*>(static_cast<float*>(dst) + i);
      p[0] = make_float4(v[0], v[1], v[2], v[3]);
      p[1] = make_float4(v[4], v[5], v[6], v[7]);
    } else {
      uint32_t w[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint16_t lo, hi;
        storeFromFloat(&lo, Dtype, 0, v[2 * j]);
        storeFromFloat(&hi, Dtype, 0, v[2 * j + 1]);
        w[j] = lo | (static_cast<uint32_t>(hi) << 16);
      }
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(dst) + i) =
          make_uint4(w[0], w[1], w[2], w[3]);
    }
  } else {
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j)
      if (j < valid) storeFromFloat(dst, Dtype, i + j, v[j]);
  }
}

// Decodes into dst (dtype) or, with Accumulate, adds to acc. Every block checks the header before
// it reads the payload; a tile whose side data or codes fail validation is reported and skipped.
template <int Dtype, bool Accumulate>
__global__ void __launch_bounds__(kThreads)
    decodeKernel(const uint8_t* src, uint64_t srcBytes, uint64_t count, void* dst, float* acc,
                 DeviceStatus* status) {
  __shared__ FrameHeader header;
  __shared__ uint32_t headerError;
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
  const Layout l = frameLayout(count, p.rowElems);
  const uint32_t lane = threadIdx.x & 31;
  const uint32_t h = 1u << p.log2Hadamard, groupLanes = h / kLaneElems;
  const float invH = inverseHadamardScale(p.log2Hadamard), maxFinite = dtypeMaxFinite(Dtype);
  const uint64_t tiles = (count + kTileElems - 1) / kTileElems;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * blockDim.x / 32;
  for (uint64_t tile = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       tile < tiles; tile += warps) {
    const uint64_t first = tile * kTileElems + lane * kLaneElems;
    const uint32_t valid = first >= count               ? 0u
                           : count - first < kLaneElems ? static_cast<uint32_t>(count - first)
                                                        : kLaneElems;
    const uint64_t lastRow = l.numRows ? l.numRows - 1 : 0;
    const uint64_t row = first / p.rowElems < lastRow ? first / p.rowElems : lastRow;
    bool bad = false, rotated = false;
    float v[kLaneElems] = {};
    uint8_t codes[kLaneElems] = {};
    if (valid > 0) {
      const float c = *reinterpret_cast<const float*>(src + l.coarse + 4 * row);
      const uint8_t flag = src[l.flags + row];
      bad = !validCoarse(c, flag) || (flag != 0 && p.policy == kRotateNever);
      const uint64_t rowEnd = count < (row + 1) * p.rowElems ? count : (row + 1) * p.rowElems;
      rotated = flag != 0 && (first / h * h + h <= rowEnd);
      const float s = mulRn(c, fineScale(src[l.fine + first / kBlockElems]));
      if (valid == kLaneElems) {
        const uint2 w = *reinterpret_cast<const uint2*>(src + l.codes + first);
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j)
          codes[j] = static_cast<uint8_t>((j < 4 ? w.x : w.y) >> (8 * (j % 4)));
      } else {
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j)
          if (j < valid) codes[j] = src[l.codes + first + j];
      }
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j) {
        const bool special = isSpecialCode(codes[j]);
        if (special && rotated && j < valid) bad = true;
        v[j] = special ? specialValue(codes[j]) : mulRn(codeValue(p.grid, codes[j]), s);
      }
    }
    if (__any_sync(kFullMask, rotated)) {
      float y[kLaneElems];
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j) y[j] = v[j];
      hadamardWarp(y, lane, groupLanes);
      if (rotated)
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j) v[j] = mulRn(y[j], invH);
    }
    // A bad lane may have spread garbage through its rotated group: the whole tile is skipped.
    if (__any_sync(kFullMask, bad)) {
      if (bad) atomicCAS(&status->decodeError, 0u, static_cast<uint32_t>(kFrameBadChunk));
      continue;
    }
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j)
      if (!isSpecialCode(codes[j])) v[j] = saturate(v[j], maxFinite);
    if (valid > 0) store8<Dtype, Accumulate>(dst, acc, first, valid, v);
  }
}

unsigned gridFor(uint64_t warpsOfWork) {
  const uint64_t warpsPerBlock = kThreads / 32;
  const uint64_t blocks = (warpsOfWork + warpsPerBlock - 1) / warpsPerBlock;
  return static_cast<unsigned>(std::clamp<uint64_t>(blocks, 1, 16384));
}

}  // namespace

void encodeDevice(const Params& p, int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, cudaStream_t stream) {
  const Layout l = frameLayout(count, p.rowElems);
  const FrameHeader header = makeHeader(p, dtype, count);
  const bool vector = reinterpret_cast<uintptr_t>(src) % 16 == 0;
  const unsigned blocks = gridFor(l.numRows);
  switch (dtype) {
    case cclzBfloat16:
      encodeKernel<cclzBfloat16><<<blocks, kThreads, 0, stream>>>(p, l, header, src, count, vector,
                                                                  dst, encodedBytesOut, status);
      break;
    case cclzFloat16:
      encodeKernel<cclzFloat16><<<blocks, kThreads, 0, stream>>>(p, l, header, src, count, vector,
                                                                 dst, encodedBytesOut, status);
      break;
    default:
      encodeKernel<cclzFloat32><<<blocks, kThreads, 0, stream>>>(p, l, header, src, count, vector,
                                                                 dst, encodedBytesOut, status);
  }
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void decodeDevice(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst,
                  float* acc, DeviceStatus* status, cudaStream_t stream) {
  const unsigned blocks = gridFor((count + kTileElems - 1) / kTileElems);
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
