// The device side of the fp8 decode (decode_kernel.cu), as functions a kernel calls: decodeFrame
// decodes one frame with the whole grid. The decode kernel is one caller; the fused NVLink
// paths (collective/fused_nvlink_kernel.cu) are another, decoding the frames their peers pushed.
// The decode and decode-and-accumulate take one pass. Frames without rotation or
// smoothing (the E4M3/E5M2 default) take 512-value tiles a warp (decodePlain): 16 consecutive
// codes a lane where bf16 or fp16 is stored; where fp32 is (the decode into fp32, decode-and-
// accumulate, a reduce step that writes the accumulator) 4 groups of 4 a lane, so that each warp
// store writes whole L2 lines (decodeTileGroups). The others take one warp per 256-value tile
// (the rotation's butterflies span the warp).
//
// Everything here is in an anonymous namespace: each translation unit that includes it gets its
// own copy of the device functions and of the block's shared code table.
#pragma once

#include <algorithm>

#include "codec/fp8/device.cuh"

namespace cclz::fp8 {
namespace {

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

// True when one of the word's four codes is special: NaN (0x80) or +-Inf (0x7F, 0xFF).
__device__ __forceinline__ bool hasSpecialCode(uint32_t w) {
  return rareBytes(w, 0x01010101u) != 0;
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

// What a decode kernel does with its values: stores them (decode), adds them to an accumulator
// (decode-and-accumulate), or takes a fused first or last step of a sum (ReduceStep). The plain
// accumulate keeps its own instantiation, with none of the fused steps' branches and registers.
constexpr int kStore = 0, kAccumulate = 1, kReduce = 2;
constexpr int kDecodeBlocksPerSM = 4;  // the decode kernel's launch bound

// One sum of the reduction, rounded as reduce::storeElement rounds it, into the dtype's bits.
template <int Dtype>
__device__ __forceinline__ uint32_t storedBits(float sum, float divisor) {
  const float v = divRn(sum, divisor);
  if constexpr (Dtype == cclzBfloat16) return floatToBf16(v);
  else if constexpr (Dtype == cclzFloat16) return floatToHalf(v);
  else return floatToBits(v);
}

// r.acc[i + j] += add[j] for the lane's valid values; with r.fromZero the accumulator is taken
// as zeros (not read), and with r.store the sums go there, divided and rounded to the dtype,
// instead of back to the accumulator (ReduceStep, codec/device.h).
template <int Dtype, int Mode>
__device__ __forceinline__ void accumulate8(const ReduceStep& r, uint64_t i, uint32_t valid,
                                            const float* add) {
  if constexpr (Mode == kAccumulate) {  // the plain step (decode-and-accumulate)
    float* acc = r.acc;
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
    return;
  }
  float sum[kLaneElems];
  if (valid == kLaneElems) {
    float4* p = reinterpret_cast<float4*>(r.acc + i);
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f), b = a;
    if (!r.fromZero) a = p[0], b = p[1];
    sum[0] = accumulateRn(a.x, add[0]), sum[1] = accumulateRn(a.y, add[1]);
    sum[2] = accumulateRn(a.z, add[2]), sum[3] = accumulateRn(a.w, add[3]);
    sum[4] = accumulateRn(b.x, add[4]), sum[5] = accumulateRn(b.y, add[5]);
    sum[6] = accumulateRn(b.z, add[6]), sum[7] = accumulateRn(b.w, add[7]);
    if (!r.store) {
      p[0] = make_float4(sum[0], sum[1], sum[2], sum[3]);
      p[1] = make_float4(sum[4], sum[5], sum[6], sum[7]);
    } else if constexpr (Dtype == cclzFloat32) {
      uint32_t w[kLaneElems];
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j) w[j] = storedBits<Dtype>(sum[j], r.divisor);
      uint4* out = reinterpret_cast<uint4*>(static_cast<float*>(r.store) + i);
      out[0] = make_uint4(w[0], w[1], w[2], w[3]);
      out[1] = make_uint4(w[4], w[5], w[6], w[7]);
    } else {
      uint32_t w[kLaneElems / 2];
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems / 2; ++j)
        w[j] = storedBits<Dtype>(sum[2 * j], r.divisor) |
               (storedBits<Dtype>(sum[2 * j + 1], r.divisor) << 16);
      *reinterpret_cast<uint4*>(static_cast<uint16_t*>(r.store) + i) =
          make_uint4(w[0], w[1], w[2], w[3]);
    }
  } else {
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j) {
      if (j >= valid) continue;
      const float total = accumulateRn(r.fromZero ? 0.0f : r.acc[i + j], add[j]);
      if (!r.store)
        r.acc[i + j] = total;
      else if constexpr (Dtype == cclzFloat32)
        static_cast<uint32_t*>(r.store)[i + j] = storedBits<Dtype>(total, r.divisor);
      else
        static_cast<uint16_t*>(r.store)[i + j] =
            static_cast<uint16_t>(storedBits<Dtype>(total, r.divisor));
    }
  }
}

// store8 for bf16 / fp16: the 16-bit words decode would store.
template <int Dtype, int Mode>
__device__ __forceinline__ void storeHalf8(void* dst, const ReduceStep& r, uint64_t i,
                                           uint32_t valid, const float* v, bool finite) {
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
  if constexpr (Mode != kStore) {
    float add[kLaneElems];  // what decode would store, back in fp32
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      add[2 * j] = unpackHalfWord<Dtype>(w[j] & 0xFFFFu);
      add[2 * j + 1] = unpackHalfWord<Dtype>(w[j] >> 16);
    }
    accumulate8<Dtype, Mode>(r, i, valid, add);
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
template <int Dtype, int Mode>
__device__ __forceinline__ void store8(void* dst, const ReduceStep& r, uint64_t i, uint32_t valid,
                                       const float* v, bool finite) {
  if constexpr (Dtype == cclzFloat32) {
    if constexpr (Mode != kStore) {
      accumulate8<Dtype, Mode>(r, i, valid, v);
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
    storeHalf8<Dtype, Mode>(dst, r, i, valid, v, finite);
  }
}

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

// What a lane reads for its 8 values of one 256-value tile: its codes and its row's and block's
// side data. Loaded for two tiles before either is decoded, so that more bytes are in flight.
struct TileLoad {
  uint64_t first;   // the lane's first element
  uint64_t rowEnd;  // the end of its row: min(count, (row + 1) * rowElems)
  uint32_t valid;   // how many of its 8 exist
  uint2 codes;     // byte j of (x, y) is code j; codes past `valid` are 0
  float coarse;
  uint8_t flag, fine;
  uint2 shifts;  // smoothed frames: the smoothing shifts of the lane's 8 columns
};

__device__ __forceinline__ TileLoad loadTile(const uint8_t* src, const Layout& l, uint32_t rowElems,
                                             double invRowElems, bool smoothed, uint64_t count,
                                             uint64_t tile, uint32_t lane) {
  TileLoad t;
  t.shifts = make_uint2(0, 0);
  t.first = tile * kTileElems + lane * kLaneElems;
  t.valid = t.first >= count               ? 0u
            : count - t.first < kLaneElems ? static_cast<uint32_t>(count - t.first)
                                           : kLaneElems;
  t.codes = make_uint2(0, 0);
  t.coarse = 0.0f, t.flag = 0, t.fine = 0, t.rowEnd = 0;
  if (t.valid == 0) return t;
  // NOTE: rowOf, not a 64-bit division (a call of ~70 instructions per 8 values).
  const uint64_t row = rowOf(t.first, rowElems, invRowElems);  // < numRows: first < count
  t.rowEnd = min(count, (row + 1) * rowElems);
  t.coarse = *reinterpret_cast<const float*>(src + l.coarse + 4 * row);
  t.flag = src[l.flags + row];
  t.fine = src[l.fine + t.first / kBlockElems];
  if (smoothed) {  // uniform; the lane's 8 columns lie in one row (rows are multiples of 64)
    const uint64_t column = t.first - row * rowElems;
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
template <int Dtype, int Mode>
__device__ __forceinline__ bool decodeTile(const TileLoad& t, const Params& p, uint64_t count,
                                           const float* codeTable, void* dst,
                                           const ReduceStep& r, uint32_t lane,
                                           DeviceStatus* status) {
  const uint32_t h = 1u << p.log2Hadamard, groupLanes = h / kLaneElems;
  bool bad = false, rotated = false, special = false;
  float v[kLaneElems];
  const uint32_t words[2] = {t.codes.x, t.codes.y};
#pragma unroll
  for (uint32_t j = 0; j < kLaneElems; ++j) v[j] = 0.0f;
  if (t.valid > 0) {
    bad = !validCoarse(t.coarse, t.flag) || (t.flag != 0 && p.policy == kRotateNever);
    rotated = t.flag != 0 && (t.first / h * h + h <= t.rowEnd);
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
  if (t.valid > 0) store8<Dtype, Mode>(dst, r, t.first, t.valid, v, !special);
  return true;
}

// ---- Decode of plain frames (policy 0, not smoothed: the E4M3/E5M2 default). No value depends
// on another, so a warp takes two 512-value tiles per step. Where bf16 or fp16 is stored, each
// lane takes 16 consecutive codes of each (one 16-byte load, one block, one row), both tiles
// loaded before either is decoded; where fp32 is written, the tiles go by groups, one after the
// other (decodeTileGroups, below). The bits are the general path's: the same scale, product and
// saturation; only the instructions differ.

constexpr uint32_t kPieceElems = 16;                  // a lane's codes: one uint4
constexpr uint32_t kPlainTileElems = 32 * kPieceElems;  // one warp step

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

// A plain piece's scale into *s, or false for a bad row (reported; policy 0: no row may be
// rotated).
__device__ __forceinline__ bool pieceScale(const PieceLoad& t, DeviceStatus* status, float* s) {
  const float coarse = bitsToFloat(t.coarseBits);
  if (t.flag != 0 || !validCoarse(coarse, 0)) {
    atomicCAS(&status->decodeError, 0u, static_cast<uint32_t>(kFrameBadChunk));
    return false;
  }
  *s = mulRn(coarse, fineScale(t.fine));
  return true;
}

// Whether a piece takes the value-by-value path: a rare code among its 16 (words: byte j of word
// j / 4 is code j), or fewer than 16 values.
__device__ __forceinline__ bool pieceIsRare(const uint32_t* words, uint32_t grid, uint32_t valid) {
  const uint32_t carry = grid == kE5M2 ? 0x04040404u : 0x01010101u;
  uint32_t rareBits = 0;
#pragma unroll
  for (int w = 0; w < 4; ++w) rareBits |= rareBytes(words[w], carry);
  return rareBits != 0 || valid != kPieceElems;
}

// A plain piece's 16 codes (byte j of word j / 4 is code j) decoded at scale s: the products
// code value x s, not yet saturated to a dtype. For pieces with no rare code (rareBytes).
__device__ __forceinline__ void commonPieceValues(const uint32_t* words, uint32_t grid,
                                                  const float* codeTable, float s, float* v) {
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
}

// The same piece's values value by value, for pieces with a rare code or past the frame's end:
// NaN and Inf keep their value, every other is saturated to the dtype's largest finite value.
template <int Dtype>
__device__ __forceinline__ void rarePieceValues(const uint32_t* words, const float* codeTable,
                                                float s, float* v) {
  const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
  for (uint32_t j = 0; j < kPieceElems; ++j) {
    const uint8_t code = static_cast<uint8_t>(words[j / 4] >> (8 * (j % 4)));
    v[j] = isSpecialCode(code) ? specialValue(code)
                               : saturate(mulRn(codeTable[code], s), maxFinite);
  }
}

// Decodes one lane's piece of a plain frame: a piece with a bad row is reported and skipped (no
// value of another piece depends on it); one with a rare code or past the end of the frame takes
// the general per-value path.
template <int Dtype, int Mode>
__device__ __forceinline__ void decodePiece(const PieceLoad& t, uint32_t grid,
                                            const float* codeTable, void* dst,
                                            const ReduceStep& r, DeviceStatus* status) {
  if (t.valid == 0) return;
  float s;
  if (!pieceScale(t, status, &s)) return;
  const uint32_t words[4] = {t.codes.x, t.codes.y, t.codes.z, t.codes.w};
  float v[kPieceElems];
  if (pieceIsRare(words, grid, t.valid)) {  // NaN and Inf keep their value; every other value as below
    rarePieceValues<Dtype>(words, codeTable, s, v);
#pragma unroll
    for (uint32_t h = 0; h < 2; ++h) {
      const uint32_t first = h * kLaneElems;
      if (t.valid > first)
        store8<Dtype, Mode>(dst, r, t.first + first, min(kLaneElems, t.valid - first),
                            v + first, false);
    }
    return;
  }
  commonPieceValues(words, grid, codeTable, s, v);
  if constexpr (Dtype == cclzFloat32) {
    const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
    for (uint32_t j = 0; j < kPieceElems; ++j) v[j] = saturate(v[j], maxFinite);
#pragma unroll
    for (uint32_t h = 0; h < 2; ++h)
      store8<Dtype, Mode>(dst, r, t.first + h * kLaneElems, kLaneElems, v + h * kLaneElems,
                          true);
  } else {
    uint32_t w[kPieceElems / 2];
#pragma unroll
    for (uint32_t k = 0; k < kPieceElems / 2; ++k) w[k] = packSaturated2<Dtype>(v[2 * k], v[2 * k + 1]);
    if constexpr (Mode != kStore) {
#pragma unroll
      for (uint32_t h = 0; h < 2; ++h) {
        float add[kLaneElems];  // what decode stores, back in fp32
#pragma unroll
        for (uint32_t k = 0; k < kLaneElems; ++k)
          add[k] = unpackHalfWord<Dtype>((w[4 * h + k / 2] >> (16 * (k % 2))) & 0xFFFFu);
        accumulate8<Dtype, Mode>(r, t.first + h * kLaneElems, kLaneElems, add);
      }
    } else {
      uint4* out = reinterpret_cast<uint4*>(static_cast<uint16_t*>(dst) + t.first);
      out[0] = make_uint4(w[0], w[1], w[2], w[3]);
      out[1] = make_uint4(w[4], w[5], w[6], w[7]);
    }
  }
}

// ---- Plain decode into fp32 and decode-and-accumulate, by groups. A lane that writes its own 16
// values (4 float4 at a stride of 64 bytes) fills half of each 32-byte sector per warp store; the
// L2 then takes every sector in two writes, and its input from the SMs, not DRAM, bounds the
// kernel. So here a lane takes 4 groups of 4 consecutive values, group k at 128 k + 4 lane of the
// tile: each warp load of codes reads 128 contiguous bytes and each store of the warp writes 512.
// A lane loads its groups' code words (and the accumulator's float4) itself, all before any value
// is decoded, and waits once per tile; only the scales are shared, by 4 shuffles (lane L computes
// block L % 8's; groups take theirs from lanes 0-7). GB/s of fp32 output on the H200, queued,
// lanes' layout -> groups: decode-and-accumulate of bf16 frames 1493 -> 1705 at 64 MiB, 1637 ->
// 1816 at 256 MiB; decode into fp32 (on the resident grid, decodeGrid) 2144 -> 2446, 2370 -> 2800
// (docs/kernels/fp8.md, "Decode-and-accumulate").
// NOTE: into bf16 and fp16 (8-byte stores) groups are 8% slower, and lanes that trade codes by
// shuffles 9%: those keep decodePiece. Into fp32, loads by groups are 2% faster than codes traded
// between lanes by shuffles. The fused steps of a reduce-scatter (kReduce) take groups where they
// write the accumulator (the first step, from zero: 82 -> 60 us at 64 MiB of bf16) and the lanes'
// layout where they store the dtype (the last step's bf16 stores are 3-6% slower by groups).

constexpr uint32_t kGroupElems = 4;                  // one code word, one float4
constexpr uint32_t kGroupStride = 32 * kGroupElems;  // from a lane's group to its next

// A block's scale as the lanes of its groups receive it when its row is bad: no valid scale has
// these bits (validCoarse refuses a negative coarse scale, and fine scales are positive).
constexpr uint32_t kBadScaleBits = 0xFFFFFFFFu;

// A decoded value as the frame's dtype would store it, back in fp32: what decode-and-accumulate
// adds (decode then add, bit for bit).
template <int Dtype>
__device__ __forceinline__ float asStored(float v) {
  if constexpr (Dtype == cclzFloat32) {
    return v;
  } else {
    uint16_t bits;
    storeFromFloat(&bits, Dtype, 0, v);
    return unpackHalfWord<Dtype>(bits);
  }
}

// One whole plain tile (every lane calls it; the tile lies inside the frame): dst[e] = decoded
// value e (kStore, fp32 frames), or r.acc[e] += it (kAccumulate; kReduce without r.store, where
// r.fromZero takes the accumulator as zeros, as accumulate8 does). A group of a bad row is
// reported and skipped, as decodePiece skips its piece.
template <int Dtype, int Mode>
__device__ __forceinline__ void decodeTileGroups(const uint8_t* src, const Layout& l,
                                                 uint32_t rowElems, double invRowElems,
                                                 uint32_t grid, const float* codeTable,
                                                 uint64_t tile, void* dst, const ReduceStep& r,
                                                 uint32_t lane, DeviceStatus* status) {
  static_assert(Mode != kStore || Dtype == cclzFloat32);
  const uint64_t tileFirst = tile * kPlainTileElems;
  const bool readAcc = Mode == kAccumulate || (Mode == kReduce && !r.fromZero);
  float4 sums[4];
  uint32_t words[4];
#pragma unroll
  for (uint32_t k = 0; k < 4; ++k) {
    const uint64_t e = tileFirst + k * kGroupStride + lane * kGroupElems;
    sums[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (readAcc) sums[k] = *reinterpret_cast<const float4*>(r.acc + e);
    words[k] = __ldg(reinterpret_cast<const uint32_t*>(src + l.codes + e));
  }
  // Block lane % 8 of the tile (a block lies in one row: rows are multiples of 64 values).
  const uint64_t blockFirst = tileFirst + (lane & 7u) * kBlockElems;
  const uint64_t row = rowOf(blockFirst, rowElems, invRowElems);
  const float coarse = bitsToFloat(__ldg(reinterpret_cast<const unsigned int*>(src + l.coarse) + row));
  const uint8_t flag = __ldg(src + l.flags + row);
  const uint8_t fine = __ldg(src + l.fine + blockFirst / kBlockElems);
  uint32_t scaleBits;
  if (flag != 0 || !validCoarse(coarse, 0)) {  // policy 0: no row may be rotated
    if (lane < 8) atomicCAS(&status->decodeError, 0u, static_cast<uint32_t>(kFrameBadChunk));
    scaleBits = kBadScaleBits;
  } else {
    scaleBits = floatToBits(mulRn(coarse, fineScale(fine)));
  }
  const uint32_t carry = grid == kE5M2 ? 0x04040404u : 0x01010101u;
  const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
  for (uint32_t k = 0; k < 4; ++k) {
    // Group k starts at value 128 k + 4 lane of the tile: block 2 k + lane / 16.
    const uint32_t bits = __shfl_sync(kFullMask, scaleBits, 2 * k + (lane >> 4));
    if (bits == kBadScaleBits) continue;
    const float s = bitsToFloat(bits);
    const uint32_t w = words[k];
    float v[kGroupElems];  // as decode stores them, in fp32
    if (rareBytes(w, carry) != 0) {  // NaN and Inf keep their value
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; ++j) {
        const uint8_t code = static_cast<uint8_t>(w >> (8 * j));
        v[j] = asStored<Dtype>(isSpecialCode(code) ? specialValue(code)
                                                   : saturate(mulRn(codeTable[code], s), maxFinite));
      }
    } else {
      if (grid == kInt8) {  // uniform
#pragma unroll
        for (uint32_t j = 0; j < kGroupElems; ++j) v[j] = mulRn(codeTable[(w >> (8 * j)) & 0xFFu], s);
      } else {
        // NOTE: as in decodePiece, the hardware's exact conversion to fp16 pairs gives codeValue.
#pragma unroll
        for (uint32_t j = 0; j < kGroupElems; j += 2) {
          const auto pair = static_cast<__nv_fp8x2_storage_t>(w >> (8 * j));
          const float2 m = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, fp8Kind(grid))));
          v[j] = mulRn(m.x, s), v[j + 1] = mulRn(m.y, s);
        }
      }
#pragma unroll
      for (uint32_t j = 0; j < kGroupElems; j += 2) {
        if constexpr (Dtype == cclzFloat32) {
          v[j] = saturate(v[j], maxFinite), v[j + 1] = saturate(v[j + 1], maxFinite);
        } else {
          const uint32_t pair = packSaturated2<Dtype>(v[j], v[j + 1]);
          v[j] = unpackHalfWord<Dtype>(pair & 0xFFFFu), v[j + 1] = unpackHalfWord<Dtype>(pair >> 16);
        }
      }
    }
    const uint64_t e = tileFirst + k * kGroupStride + lane * kGroupElems;
    if constexpr (Mode == kStore) {
      *reinterpret_cast<float4*>(static_cast<float*>(dst) + e) = make_float4(v[0], v[1], v[2], v[3]);
    } else {
      float4 a = sums[k];
      a.x = accumulateRn(a.x, v[0]), a.y = accumulateRn(a.y, v[1]);
      a.z = accumulateRn(a.z, v[2]), a.w = accumulateRn(a.w, v[3]);
      *reinterpret_cast<float4*>(r.acc + e) = a;
    }
  }
}

// The plain decode: every warp takes tiles (512 values) tile, tile + warps, ... two per step.
template <int Dtype, int Mode>
__device__ __forceinline__ void decodePlain(const uint8_t* src, const Layout& l, const Params& p,
                                            uint64_t count, const float* codeTable, void* dst,
                                            const ReduceStep& r, DeviceStatus* status) {
  const uint32_t lane = threadIdx.x & 31;
  const double invRowElems = 1.0 / p.rowElems;
  const uint64_t tiles = (count + kPlainTileElems - 1) / kPlainTileElems;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * blockDim.x / 32;
  for (uint64_t tile = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       tile < tiles; tile += 2 * warps) {
    // By groups where what is written is fp32 (the accumulator, or fp32 values; r.store is
    // uniform: a kernel parameter), one tile at a time: its loads are all in flight together.
    // The frame's last tile, when it is short, takes the lanes' path.
    if constexpr (Mode != kStore || Dtype == cclzFloat32) {
      if (Mode != kReduce || !r.store) {
#pragma unroll 1
        for (uint64_t t = tile; t < tiles && t < tile + 2 * warps; t += warps) {
          if ((t + 1) * kPlainTileElems <= count)
            decodeTileGroups<Dtype, Mode>(src, l, p.rowElems, invRowElems, p.grid, codeTable, t,
                                          dst, r, lane, status);
          else
            decodePiece<Dtype, Mode>(loadPiece(src, l, p.rowElems, invRowElems, count, t, lane),
                                     p.grid, codeTable, dst, r, status);
        }
        continue;
      }
    }
    const PieceLoad a = loadPiece(src, l, p.rowElems, invRowElems, count, tile, lane);
    PieceLoad b;
    b.valid = 0;
    if (tile + warps < tiles)
      b = loadPiece(src, l, p.rowElems, invRowElems, count, tile + warps, lane);
    decodePiece<Dtype, Mode>(a, p.grid, codeTable, dst, r, status);
    decodePiece<Dtype, Mode>(b, p.grid, codeTable, dst, r, status);
  }
}

// The block's value table of the frame's grid, built by decodeKernel. At namespace scope so that
// decodeGeneral, a function of its own, reads it from shared memory by name (a pointer passed to a
// call would be generic: slower loads).
__shared__ float sharedCodeTable[256];

// The general decode (rotated or smoothed frames: INT8's default): every warp takes 256-value
// tiles, two per step, loaded together.
// NOTE: not inlined, so that ptxas allocates its registers apart from decodePlain's. Inlined, the
// plain loops' registers make it spill 72 bytes (INT8 decode-and-accumulate -3%) and the plain
// decode-and-accumulate is 3% slower too; decodePlain not inlined instead costs bf16 decode 1-2%
// (docs/kernels/fp8.md, "Decoder").
template <int Dtype, int Mode>
__device__ __noinline__ void decodeGeneral(const uint8_t* src, const Layout l, const Params p,
                                           uint64_t count, void* dst, const ReduceStep r,
                                           DeviceStatus* status) {
  const float* codeTable = sharedCodeTable;
  const bool smoothed = p.smoothApplied != 0;
  const double invRowElems = 1.0 / p.rowElems;
  const uint32_t lane = threadIdx.x & 31;
  const uint64_t tiles = (count + kTileElems - 1) / kTileElems;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * blockDim.x / 32;
  for (uint64_t tile = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       tile < tiles; tile += 2 * warps) {
    const bool second = tile + warps < tiles;  // uniform across the warp
    const TileLoad a = loadTile(src, l, p.rowElems, invRowElems, smoothed, count, tile, lane);
    TileLoad b;
    if (second)
      b = loadTile(src, l, p.rowElems, invRowElems, smoothed, count, tile + warps, lane);
    decodeTile<Dtype, Mode>(a, p, count, codeTable, dst, r, lane, status);
    if (second) decodeTile<Dtype, Mode>(b, p, count, codeTable, dst, r, lane, status);
  }
}

// Decodes one frame into dst (dtype; Mode kStore) or takes one step of a sum (r; kAccumulate,
// kReduce), the whole grid together (the loops stride over gridDim.x). Every block checks the
// header before it reads the payload and builds the value table of the frame's grid (one entry
// per code; the special codes' entries are overwritten per value). A tile whose side data or
// codes fail validation is reported and skipped. Plain frames take decodePlain, the others
// decodeGeneral. A kernel that decodes several frames one after another puts a __syncthreads()
// between them (a block that met a bad header returns before the table's second barrier).
template <int Dtype, int Mode>
__device__ __forceinline__ void decodeFrame(const uint8_t* src, uint64_t srcBytes, uint64_t count,
                                            void* dst, const ReduceStep& r,
                                            DeviceStatus* status) {
  static_assert(kThreads == 256, "one thread per code builds the table");
  __shared__ FrameHeader header;
  __shared__ uint32_t headerError;
  float* codeTable = sharedCodeTable;
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
    decodePlain<Dtype, Mode>(src, l, p, count, codeTable, dst, r, status);
    return;
  }
  decodeGeneral<Dtype, Mode>(src, l, p, count, dst, r, status);
}


}  // namespace
}  // namespace cclz::fp8
