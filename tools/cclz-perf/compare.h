// The correctness check of a round trip: decoded elements against the input, byte for byte.
#pragma once

#include <cstdint>
#include <span>

#include "cclz/cclz.h"

namespace perf {

struct Comparison {
  uint64_t wrong = 0;  // elements whose bytes differ
  // mean((y - x)^2) / mean(x^2) over the elements finite in both; 0 when exact, NaN when there
  // is nothing to average (lossy codecs will report it; lossless must give wrong == 0).
  double nmse = 0;
  // max |y - x| / max |x| over the elements finite in both (0 when exact).
  double maxRelErr = 0;
};

Comparison compare(cclzDataType_t dtype, std::span<const uint8_t> expected,
                   std::span<const uint8_t> actual);

// Lossy qgrad round trips: the elements whose error exceeds what docs/formats.md allows, derived
// here from each block's absmax: half a step (nearest) or one step (stochastic), the step being at
// most absmax/qmax * (1 + 2^-7) (the bf16 scale rounds up), plus bf16 output rounding (2^-8
// relative) for bf16. Non-finite inputs are not counted.
uint64_t qgradOutOfBound(cclzDataType_t dtype, std::span<const uint8_t> expected,
                         std::span<const uint8_t> actual, int bits, int blockElems,
                         bool stochastic);

// Lossy codecs: elements whose class changed (finite to NaN/Inf, NaN to not NaN, Inf to anything
// else), which no error bound excuses (docs/formats.md, each codec's NaN/Inf policy).
uint64_t classChanges(cclzDataType_t dtype, std::span<const uint8_t> expected,
                      std::span<const uint8_t> actual);

}  // namespace perf
