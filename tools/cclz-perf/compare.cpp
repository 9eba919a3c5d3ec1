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
  double err = 0, ref = 0;
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* x = &expected[i * size];
    const uint8_t* y = &actual[i * size];
    if (std::memcmp(x, y, size) == 0) {
      const double v = elementValue(dtype, x);
      if (std::isfinite(v)) ref += v * v;
      continue;
    }
    ++c.wrong;
    const double vx = elementValue(dtype, x), vy = elementValue(dtype, y);
    if (std::isfinite(vx) && std::isfinite(vy)) {
      err += (vy - vx) * (vy - vx);
      ref += vx * vx;
    }
  }
  c.nmse = ref > 0 ? err / ref : std::nan("");
  return c;
}

LossyComparison compareLossy(cclzDataType_t dtype, std::span<const uint8_t> expected,
                             std::span<const uint8_t> actual) {
  LossyComparison c;
  const size_t size = dtypeSize(dtype), count = std::min(expected.size(), actual.size()) / size;
  c.broken = expected.size() / size - count;
  double err = 0, ref = 0;
  uint64_t finite = 0;
  for (size_t i = 0; i < count; ++i) {
    const double x = elementValue(dtype, &expected[i * size]);
    const double y = elementValue(dtype, &actual[i * size]);
    if (std::isnan(x) ? !std::isnan(y) : std::isinf(x) ? y != x : !std::isfinite(y)) {
      ++c.broken;
      continue;
    }
    if (!std::isfinite(x)) continue;
    err += (y - x) * (y - x);
    ref += x * x;
    ++finite;
  }
  c.nmse = ref > 0 ? err / ref : 0.0;
  const double rms = finite ? std::sqrt(ref / double(finite)) : 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double x = elementValue(dtype, &expected[i * size]);
    const double y = elementValue(dtype, &actual[i * size]);
    if (std::isfinite(x) && std::isfinite(y) && x != 0 && std::fabs(x) >= rms)
      c.maxRel = std::max(c.maxRel, std::fabs(y - x) / std::fabs(x));
  }
  return c;
}

}  // namespace perf
