#include "compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "data.h"

namespace perf {

Comparison compare(cclzDataType_t dtype, std::span<const uint8_t> expected,
                   std::span<const uint8_t> actual) {
  Comparison c;
  if (expected.size() == actual.size() &&
      std::memcmp(expected.data(), actual.data(), expected.size()) == 0)
    return c;
  const size_t size = dtypeSize(dtype), count = std::min(expected.size(), actual.size()) / size;
  c.wrong = expected.size() / size - count;  // a length mismatch counts the missing elements
  double err = 0, ref = 0, maxErr = 0, maxAbs = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* x = &expected[i * size];
    const uint8_t* y = &actual[i * size];
    if (std::memcmp(x, y, size) == 0) {
      const double v = elementValue(dtype, x);
      if (std::isfinite(v)) ref += v * v, maxAbs = std::max(maxAbs, std::fabs(v));
      continue;
    }
    ++c.wrong;
    const double vx = elementValue(dtype, x), vy = elementValue(dtype, y);
    if (std::isfinite(vx) && std::isfinite(vy)) {
      err += (vy - vx) * (vy - vx);
      ref += vx * vx;
      maxErr = std::max(maxErr, std::fabs(vy - vx));
      maxAbs = std::max(maxAbs, std::fabs(vx));
    }
  }
  c.nmse = ref > 0 ? err / ref : std::nan("");
  c.maxRelErr = maxAbs > 0 ? maxErr / maxAbs : std::nan("");
  return c;
}

uint64_t qgradOutOfBound(cclzDataType_t dtype, std::span<const uint8_t> expected,
                         std::span<const uint8_t> actual, int bits, int blockElems,
                         bool stochastic) {
  const size_t size = dtypeSize(dtype), count = expected.size() / size;
  if (actual.size() != expected.size()) return count;
  const double qmax = (1 << (bits - 1)) - 1;
  const double outputRounding = dtype == cclzBfloat16 ? 0x1p-8 : 0.0;
  uint64_t out = 0;
  for (size_t begin = 0; begin < count; begin += blockElems) {
    const size_t end = std::min(count, begin + blockElems);
    double m = 0;
    bool finite = true;
    for (size_t i = begin; i < end; ++i) {
      const double v = elementValue(dtype, &expected[i * size]);
      finite = finite && std::isfinite(v);
      m = std::max(m, std::fabs(v));
    }
    if (!finite) continue;
    const double step = std::max(m / qmax * (1 + 0x1p-7) * (1 + 0x1p-20), 0x1p-126);
    for (size_t i = begin; i < end; ++i) {
      const double x = elementValue(dtype, &expected[i * size]);
      const double y = elementValue(dtype, &actual[i * size]);
      const double bound = (stochastic ? 1.0 : 0.5) * step + outputRounding * std::fabs(y);
      if (!(std::fabs(y - x) <= bound)) ++out;
    }
  }
  return out;
}

uint64_t classChanges(cclzDataType_t dtype, std::span<const uint8_t> expected,
                      std::span<const uint8_t> actual) {
  const size_t size = dtypeSize(dtype), count = std::min(expected.size(), actual.size()) / size;
  uint64_t changed = expected.size() / size - count;
  for (size_t i = 0; i < count; ++i) {
    const double x = elementValue(dtype, &expected[i * size]);
    const double y = elementValue(dtype, &actual[i * size]);
    if (std::isnan(x) ? !std::isnan(y) : std::isinf(x) ? y != x : !std::isfinite(y)) ++changed;
  }
  return changed;
}

}  // namespace perf
