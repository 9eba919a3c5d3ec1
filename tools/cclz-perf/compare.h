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
};

Comparison compare(cclzDataType_t dtype, std::span<const uint8_t> expected,
                   std::span<const uint8_t> actual);

// A lossy round trip, against the input in float64.
struct LossyComparison {
  double nmse = 0;    // over the elements finite in the input
  double maxRel = 0;  // max |y - x| / |x| over the elements with |x| >= rms(x)
  // Elements whose class changed: finite to NaN/Inf, NaN to not NaN, Inf to anything else.
  uint64_t broken = 0;
};

LossyComparison compareLossy(cclzDataType_t dtype, std::span<const uint8_t> expected,
                             std::span<const uint8_t> actual);

}  // namespace perf
