// The element operations of the reductions, written once for the host engine and the kernels
// (DESIGN.md: shared scalar helpers are __host__ __device__), with every operation rounded
// explicitly so that nvcc's contraction into FMAs cannot make the device differ from the host
// (the host build uses -ffp-contract=off).
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "codec/residual.h"
#include "common/float_bits.h"
#include "common/float_rn.h"
#include "common/hd.h"

namespace cclz::reduce {


// Element i of dst (dtype) = acc / divisor, rounded to nearest even.
CCLZ_HD void storeElement(const float* acc, uint64_t i, float divisor, int dtype, void* dst) {
  storeFromFloat(dst, dtype, i, divRn(acc[i], divisor));
}

// acc[i] += element i of src (dtype).
CCLZ_HD void accumulateElement(float* acc, uint64_t i, const void* src, int dtype) {
  acc[i] = accumulateRn(acc[i], loadAsFloat(src, dtype, i));
}

// dst[i] = element i of src + residual[i], rounded to dtype; residual[i] = 0. In place (dst ==
// src) too: element i is read before it is written.
CCLZ_HD void addResidualElement(void* dst, const void* src, Residual residual, uint64_t i,
                                int dtype) {
  const float v = addRn(loadAsFloat(src, dtype, i), residual.load(i));
  residual.store(i, 0.0f);
  storeFromFloat(dst, dtype, i, v);
}

// residual[i] += factor * (intended[i] - got[i]), rounded to the residual's dtype. Where that
// error is NaN or Inf (a gradient that blew up reached the reduced shard) the residual is left as
// it was, as the qgrad encode leaves a non-finite block's (docs/formats.md, "NaN and Inf"): a
// NaN kept there would poison every later step of the bucket.
CCLZ_HD void foldElement(Residual residual, uint64_t i, const void* intended, const void* got,
                         int dtype, float factor) {
  const float e = mulRn(factor, subRn(loadAsFloat(intended, dtype, i), loadAsFloat(got, dtype, i)));
  if ((floatToBits(e) & 0x7FFFFFFFu) >= 0x7F800000u) return;  // NaN or Inf
  residual.store(i, addRn(residual.load(i), e));
}

}  // namespace cclz::reduce
