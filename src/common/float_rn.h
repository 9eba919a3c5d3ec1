// fp32 arithmetic with one IEEE rounding (to nearest even) per operation, written once for the
// CPU references and the kernels: nvcc would otherwise contract a multiply and an add into a
// fused multiply-add and give other bits than the host (which builds with -ffp-contract=off).
#pragma once

#include <cmath>

#include "common/float_bits.h"
#include "common/hd.h"

namespace cclz {

CCLZ_HD float mulRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
CCLZ_HD float addRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
CCLZ_HD float subRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
CCLZ_HD float divRn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// a * b + c with one rounding (a fused multiply-add on both sides: std::fma is exact on the host).
CCLZ_HD float fmaRn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// The same in fp64 (the fp8 encoder's decisions from the data, codec/fp8/shape.h).
CCLZ_HD double divRnD(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
CCLZ_HD double subRnD(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
CCLZ_HD double mulRnD(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

// acc + x where a reduction accumulates. A NaN sum is stored as 0x7FFFFFFF, the NaN the GPU's
// adder makes: x86 would carry an operand's payload instead, and CPU and GPU accumulators would
// hold different bytes.
CCLZ_HD float accumulateRn(float acc, float x) {
  const float sum = addRn(acc, x);
  return sum != sum ? bitsToFloat(0x7fffffffu) : sum;
}

}  // namespace cclz
