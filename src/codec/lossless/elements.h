// Per-dtype access to the symbol and raw planes, so that encoder and decoder loops are written
// once for bf16, fp16 and fp32 (CPU reference and kernels alike).
#pragma once

#include <cstdint>

#include "codec/lossless/format.h"

namespace cclz::lossless {

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

template <>
struct Elements<cclzFloat16> {
  using Word = uint16_t;
  static constexpr bool kHasPlaneB = false;
  static CCLZ_HD uint32_t symbol(Word v) { return fp16Symbol(v); }
  static CCLZ_HD uint32_t planeA(Word v) { return fp16PlaneA(v); }
  static CCLZ_HD uint32_t planeB(Word) { return 0; }
  static CCLZ_HD Word join(uint32_t s, uint32_t a, uint32_t) { return fp16Join(s, a); }
};

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
