// Conversions between fp32 and the 16-bit float formats, on bit patterns, written once for the CPU
// references and the kernels (so both round identically). Round to nearest even; NaNs stay NaNs
// (quiet, sign and the high payload bits kept); values past the target's range become Inf.
#pragma once

#include <cstdint>
#include <cstring>

#include "cclz/cclz.h"
#include "common/hd.h"

namespace cclz {

CCLZ_HD uint32_t floatToBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

CCLZ_HD float bitsToFloat(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

CCLZ_HD float bf16ToFloat(uint16_t h) { return bitsToFloat(static_cast<uint32_t>(h) << 16); }

CCLZ_HD uint16_t floatToBf16(float f) {
  const uint32_t u = floatToBits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

CCLZ_HD float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x3FFu;
  if (exponent == 0x1F) return bitsToFloat(sign | 0x7F800000u | (mantissa << 13));  // Inf, NaN
  if (exponent != 0) return bitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, exact in fp32.
  const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
  return bitsToFloat(sign | floatToBits(magnitude));
}

CCLZ_HD uint16_t floatToHalf(float f) {
  const uint32_t u = floatToBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u | ((a >> 13) & 0x1FFu);  // NaN, quieted
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // rounds past 65504 (or is Inf): Inf
  if (a < 0x38800000u) {                        // below 2^-14: a subnormal result
    const uint32_t exponent = a >> 23;
    if (exponent < 102) return sign;  // below half the smallest subnormal: zero
    // Shift the implicit-one mantissa down to units of 2^-24, rounding to nearest even.
    const uint32_t m = (a & 0x7FFFFFu) | 0x800000u, shift = 126u - exponent;
    const uint32_t kept = m >> shift, rest = m & ((1u << shift) - 1u), half = 1u << (shift - 1);
    return sign | static_cast<uint16_t>(kept + (rest > half || (rest == half && (kept & 1u))));
  }
  const uint32_t rebased = a - (112u << 23);  // exponent 127 -> 15
  return sign | static_cast<uint16_t>((rebased + 0xFFFu + ((rebased >> 13) & 1u)) >> 13);
}

// Element i of a bf16, fp16 or fp32 array as fp32 (exact).
CCLZ_HD float loadAsFloat(const void* data, int dtype, uint64_t i) {
  if (dtype == cclzBfloat16) return bf16ToFloat(static_cast<const uint16_t*>(data)[i]);
  if (dtype == cclzFloat16) return halfToFloat(static_cast<const uint16_t*>(data)[i]);
  return static_cast<const float*>(data)[i];
}

// Element i of a bf16, fp16 or fp32 array = v, rounded to the dtype to nearest even.
CCLZ_HD void storeFromFloat(void* data, int dtype, uint64_t i, float v) {
  if (dtype == cclzBfloat16)
    static_cast<uint16_t*>(data)[i] = floatToBf16(v);
  else if (dtype == cclzFloat16)
    static_cast<uint16_t*>(data)[i] = floatToHalf(v);
  else
    static_cast<float*>(data)[i] = v;
}

}  // namespace cclz
