// The qgrad format (docs/formats.md, "qgrad"), written once for the CPU reference (ref.cpp) and the
// kernels (kernels.cu): frame layout, header checks, scales, rounding, the stochastic-rounding hash,
// code packing. Nothing here allocates or throws.
//
// NOTE: every product and sum that ends up in a frame or a residual goes through mulRn/addRn/
// subRn, so nvcc cannot contract it into a fused multiply-add on the device (the host build has
// -ffp-contract=off, src/CMakeLists.txt): CPU and GPU round identically.
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "codec/frame.h"
#include "common/float_bits.h"
#include "common/float_rn.h"
#include "common/hd.h"

namespace cclz::qgrad {

constexpr uint64_t kMaxCount = uint64_t{1} << 36;
constexpr int kRoundNearest = 0;
constexpr int kRoundStochastic = 1;
constexpr uint16_t kNanScale = 0x7FC0;       // bf16 quiet NaN: the scale of a non-finite block
constexpr uint16_t kMinScale = 0x0080;       // 2^-126, the smallest normal bf16
constexpr uint16_t kMaxScale = 0x7F7F;       // the largest finite bf16
constexpr int kGroupElems = 8;               // elements one kernel thread takes per step

struct Params {
  uint32_t blockElems;  // 32, 64, 128 or 256
  uint32_t bits;        // 8, 4 or 2
  uint32_t rounding;    // kRoundNearest or kRoundStochastic
  uint64_t seed;        // stochastic rounding only
};

CCLZ_HD bool isSupportedDtype(int dtype) { return dtype == cclzFloat32 || dtype == cclzBfloat16; }
CCLZ_HD bool validBlockElems(uint32_t b) { return b == 32 || b == 64 || b == 128 || b == 256; }
CCLZ_HD bool validBits(uint32_t b) { return b == 2 || b == 4 || b == 8; }
CCLZ_HD bool validRounding(uint32_t r) { return r == kRoundNearest || r == kRoundStochastic; }
CCLZ_HD bool validParams(const Params& p) {
  return validBlockElems(p.blockElems) && validBits(p.bits) && validRounding(p.rounding);
}

CCLZ_HD int qmaxOf(uint32_t bits) { return (1 << (bits - 1)) - 1; }

// ---- Frame layout. ----
struct Layout {
  uint64_t numBlocks;
  uint64_t scalesOffset;  // numBlocks bf16
  uint64_t codesOffset;   // ceil(count*bits/8) bytes, zero-padded to 16
  uint64_t frameBytes;
};

CCLZ_HD Layout frameLayout(uint64_t count, uint32_t blockElems, uint32_t bits) {
  Layout l;
  l.numBlocks = (count + blockElems - 1) / blockElems;
  l.scalesOffset = kFrameHeaderBytes;
  l.codesOffset = alignUp(l.scalesOffset + 2 * l.numBlocks, 16);
  l.frameBytes = l.codesOffset + alignUp((count * bits + 7) / 8, 16);
  return l;
}

CCLZ_HD FrameHeader makeHeader(const Params& p, int dtype, uint64_t count) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kFrameVersion;
  h.codec = cclzCodecQgrad;
  h.dtype = static_cast<uint8_t>(dtype);
  h.count = count;
  const Layout l = frameLayout(count, p.blockElems, p.bits);
  h.frameBytes = l.frameBytes;
  h.chunkElems = p.blockElems;
  h.numChunks = static_cast<uint32_t>(l.numBlocks);
  h.params[0] = static_cast<uint8_t>(p.bits);
  h.params[1] = static_cast<uint8_t>(p.rounding);
  h.checksum = headerChecksum(h);
  return h;
}

// Checks the qgrad fields of a header that passed checkFrameHeader. Returns a FrameError.
CCLZ_HD uint32_t checkQgradHeader(const FrameHeader& h) {
  if (h.codec != cclzCodecQgrad || !isSupportedDtype(h.dtype) || h.flags != 0 ||
      h.count > kMaxCount || !validBlockElems(h.chunkElems) || !validBits(h.params[0]) ||
      !validRounding(h.params[1]))
    return kFrameBadField;
  for (int i = 2; i < 8; ++i)
    if (h.params[i] != 0) return kFrameBadField;
  const Layout l = frameLayout(h.count, h.chunkElems, h.params[0]);
  if (h.numChunks != l.numBlocks || h.frameBytes != l.frameBytes) return kFrameBadField;
  return kFrameOk;
}

// ---- Arithmetic that must round the same on both sides (mulRn/addRn/subRn: common/float_rn.h). ----

// |x| for the block maximum, with NaN and Inf mapped to +Inf so that one max finds both.
CCLZ_HD float magnitudeOrInf(float x) {
  const uint32_t a = floatToBits(x) & 0x7FFFFFFFu;
  return a >= 0x7F800000u ? bitsToFloat(0x7F800000u) : bitsToFloat(a);
}

CCLZ_HD bool isInf(float m) { return floatToBits(m) == 0x7F800000u; }

// The block's bf16 scale from its absmax m (finite, >= 0): m / qmax rounded up to bf16, within
// [kMinScale, kMaxScale]. A block with a non-finite element (m == Inf) gets kNanScale.
CCLZ_HD uint16_t scaleFor(float m, int qmax) {
  if (isInf(m)) return kNanScale;
#if defined(__CUDA_ARCH__)
  const float s = __fdiv_rn(m, static_cast<float>(qmax));
#else
  const float s = m / static_cast<float>(qmax);
#endif
  uint32_t u = floatToBits(s);
  uint32_t hi = u >> 16;
  if (u & 0xFFFFu) ++hi;  // round up: a positive value's magnitude grows
  if (hi < kMinScale) hi = kMinScale;
  if (hi > kMaxScale) hi = kMaxScale;
  return static_cast<uint16_t>(hi);
}

CCLZ_HD float scaleValue(uint16_t scale) { return bf16ToFloat(scale); }

// 1/s, IEEE round to nearest (finite: s >= 2^-126).
CCLZ_HD float reciprocal(float s) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(s);
#else
  return 1.0f / s;
#endif
}

// ---- Stochastic rounding draws: splitmix64 keyed by (seed, step), indexed by element. ----
CCLZ_HD uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

CCLZ_HD uint64_t drawKey(uint64_t seed, uint64_t step) { return mix64(seed + mix64(step)); }

// u in [0, 1) with 24 bits, for element `index` of the message.
CCLZ_HD float uniformDraw(uint64_t key, uint64_t index) {
  const uint64_t h = mix64(key + (index + 1) * 0x9E3779B97F4A7C15ull);
  return static_cast<float>(static_cast<uint32_t>(h >> 40)) * 5.9604644775390625e-8f;  // 2^-24
}

CCLZ_HD float floorf32(float v) {
#if defined(__CUDA_ARCH__)
  return floorf(v);
#else
  return __builtin_floorf(v);
#endif
}

CCLZ_HD float rintf32(float v) {  // ties to even
#if defined(__CUDA_ARCH__)
  return rintf(v);
#else
  return __builtin_rintf(v);
#endif
}

// The code of x (finite) in a block of reciprocal scale rs. `draw` is used by stochastic rounding.
CCLZ_HD int quantize(float x, float rs, int qmax, int rounding, float draw) {
  float v = mulRn(x, rs);
  const float limit = static_cast<float>(qmax);
  v = v > limit ? limit : (v < -limit ? -limit : v);
  if (rounding == kRoundNearest) return static_cast<int>(rintf32(v));
  const float fl = floorf32(v);
  return static_cast<int>(fl) + (draw < subRn(v, fl) ? 1 : 0);
}

CCLZ_HD float dequantize(int q, float s) { return mulRn(static_cast<float>(q), s); }

// ---- Code packing: element i at bits [i*b, (i+1)*b) of the codes, least significant first. ----
CCLZ_HD uint32_t codeBits(int q, uint32_t bits) {
  return static_cast<uint32_t>(q) & ((1u << bits) - 1u);
}
// Sign-extends a b-bit two's complement code.
CCLZ_HD int codeValue(uint32_t code, uint32_t bits) {
  const int shift = 32 - static_cast<int>(bits);
  return static_cast<int>(code << shift) >> shift;
}

}  // namespace cclz::qgrad
