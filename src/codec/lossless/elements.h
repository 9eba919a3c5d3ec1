// The split of each element into an 8-bit symbol (entropy coded) and raw bits (docs/formats.md,
// "Lossless payload"), per dtype, so that encoder and decoder loops are written once for bf16,
// fp16 and fp32 (CPU reference and kernels alike).
//   bf16: symbol = bits 14..7 (the exponent); plane A = sign << 7 | bits 6..0.
//   fp16: the same bits as bf16: symbol = bits 14..7 (the 5 exponent bits and the top 3
//         mantissa bits), plane A = sign << 7 | bits 6..0; the sign stays out of the symbol, so
//         that offsets below the chunk's largest symbol are magnitudes.
//   fp32: symbol = bits 30..23 (the exponent); plane A = sign << 7 | bits 22..16; plane B =
//         bits 15..0.
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "common/hd.h"

namespace cclz::lossless {

CCLZ_HD uint32_t bf16Symbol(uint16_t v) { return (v >> 7) & 0xFFu; }
CCLZ_HD uint32_t bf16PlaneA(uint16_t v) { return ((v >> 8) & 0x80u) | (v & 0x7Fu); }
CCLZ_HD uint16_t bf16Join(uint32_t sym, uint32_t a) {
  return static_cast<uint16_t>(((a & 0x80u) << 8) | (sym << 7) | (a & 0x7Fu));
}
CCLZ_HD uint32_t fp32Symbol(uint32_t v) { return (v >> 23) & 0xFFu; }
CCLZ_HD uint32_t fp32PlaneA(uint32_t v) { return ((v >> 24) & 0x80u) | ((v >> 16) & 0x7Fu); }
CCLZ_HD uint32_t fp32PlaneB(uint32_t v) { return v & 0xFFFFu; }
CCLZ_HD uint32_t fp32Join(uint32_t sym, uint32_t a, uint32_t b) {
  return ((a & 0x80u) << 24) | (sym << 23) | ((a & 0x7Fu) << 16) | b;
}

template <int Dtype>
struct Elements;

template <>
struct Elements<cclzBfloat16> {
  using Word = uint16_t;
  static constexpr bool kHasPlaneB = false;
  static CCLZ_HD uint32_t symbol(Word v) { return bf16Symbol(v); }
  static CCLZ_HD uint32_t planeA(Word v) { return bf16PlaneA(v); }
  static CCLZ_HD uint32_t planeB(Word) { return 0; }
  static CCLZ_HD Word join(uint32_t s, uint32_t a, uint32_t) { return bf16Join(s, a); }
};

// fp16 takes bf16's bit positions (above).
template <>
struct Elements<cclzFloat16> : Elements<cclzBfloat16> {};

template <>
struct Elements<cclzFloat32> {
  using Word = uint32_t;
  static constexpr bool kHasPlaneB = true;
  static CCLZ_HD uint32_t symbol(Word v) { return fp32Symbol(v); }
  static CCLZ_HD uint32_t planeA(Word v) { return fp32PlaneA(v); }
  static CCLZ_HD uint32_t planeB(Word v) { return fp32PlaneB(v); }
  static CCLZ_HD Word join(uint32_t s, uint32_t a, uint32_t b) { return fp32Join(s, a, b); }
};

}  // namespace cclz::lossless
