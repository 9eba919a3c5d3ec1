#include "coll_check.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "data.h"

namespace perf::coll {
namespace {

float asFloat(cclzDataType_t dtype, const uint8_t* p) {
  return static_cast<float>(elementValue(dtype, p));
}

void storeRounded(cclzDataType_t dtype, uint8_t* p, float v) {
  if (dtype == cclzFloat32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const uint32_t bits = dtype == cclzBfloat16 ? roundToFormat(v, 8, 7) : roundToFormat(v, 5, 10);
  const uint16_t h = static_cast<uint16_t>(bits);
  std::memcpy(p, &h, 2);
}

}  // namespace

Reference reduceReference(const std::vector<uint8_t>& parts, int ranks, uint64_t elems,
                          cclzDataType_t dtype, cclzRedOp_t op) {
  const size_t es = dtypeSize(dtype);
  Reference ref;
  ref.exact.resize(elems * es);
  ref.value.resize(elems);
  ref.magnitude.resize(elems);
  const float divisor = op == cclzAvg ? static_cast<float>(ranks) : 1.0f;
  for (uint64_t i = 0; i < elems; ++i) {
    float acc = 0, mag = 0;
    double exact = 0;
    for (int r = 0; r < ranks; ++r) {
      const float x = asFloat(dtype, &parts[(r * elems + i) * es]);
      acc += x;  // in rank order, as cclz.h specifies
      exact += x;
      mag += std::fabs(x);
    }
    storeRounded(dtype, &ref.exact[i * es], acc / divisor);
    ref.value[i] = exact / divisor;
    ref.magnitude[i] = mag / divisor;
  }
  return ref;
}

Reference moveReference(std::vector<uint8_t> bytes, cclzDataType_t dtype) {
  const size_t es = dtypeSize(dtype);
  Reference ref;
  ref.exact = std::move(bytes);
  const uint64_t elems = ref.exact.size() / es;
  ref.value.resize(elems);
  ref.magnitude.resize(elems);
  for (uint64_t i = 0; i < elems; ++i) {
    ref.value[i] = asFloat(dtype, &ref.exact[i * es]);
    ref.magnitude[i] = std::fabs(static_cast<float>(ref.value[i]));
  }
  return ref;
}

// With u the dtype's unit roundoff and M the sum of the n contributions' magnitudes: the network
// adds the contributions in an order of its own (a ring one after another, a tree or MPI's
// recursive halving in pairs of partial sums) and rounds every partial sum to the dtype. Its n - 1
// additions each err by at most u times that partial sum, and no partial sum, in any order, is
// larger than M; so the sum is within (n - 1) u M of the exact one. An average adds at most two
// roundings of the same size (the sum divided and rounded; or, as NCCL does, each contribution
// premultiplied by a rounded 1/n). That is (n + 1) u M; the factor 2 covers what this does not
// model (fp32 intermediates rounded again to the dtype, second-order terms) and costs nothing in
// finding wrong results: a lost, doubled or misplaced contribution is off by about M / n, against
// 2 (n + 1) u M = 0.039 M for bf16 on 4 ranks. Comparing bytes with the fp32 sum in rank order
// instead fails a fifth (3 ranks) to a third (4 ranks) of bf16 sums of Gaussian data.
double networkTolerance(cclzDataType_t dtype, int ranks) {
  const double unit = dtype == cclzBfloat16 ? 0x1p-8 : dtype == cclzFloat16 ? 0x1p-11 : 0x1p-24;
  return 2.0 * (ranks + 1) * unit;
}

double callTolerance(bool reduces, bool plainData, cclzDataType_t dtype, int ranks) {
  return reduces && plainData ? networkTolerance(dtype, ranks) : 0;
}

Check check(const Reference& ref, cclzDataType_t dtype, bool lossy,
            const std::vector<uint8_t>& output, double tolerance) {
  Check c;
  const size_t es = dtypeSize(dtype);
  const uint64_t n = ref.value.size();
  double err = 0, power = 0, maxErr = 0, maxRef = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double got = elementValue(dtype, &output[i * es]);
    if (!lossy && tolerance > 0) {
      if (!(std::fabs(got - ref.value[i]) <= tolerance * ref.magnitude[i])) ++c.wrong;
    } else if (!lossy && std::memcmp(&output[i * es], &ref.exact[i * es], es) != 0) {
      ++c.wrong;
    }
    if (lossy && !std::isfinite(got)) ++c.wrong;
    const double e = got - ref.value[i];
    if (std::isfinite(e)) {
      err += e * e;
      maxErr = std::max(maxErr, std::fabs(e));
    }
    power += ref.value[i] * ref.value[i];
    maxRef = std::max(maxRef, std::fabs(ref.value[i]));
  }
  c.nmse = power > 0 ? err / power : 0;
  c.maxRelErr = maxRef > 0 ? maxErr / maxRef : 0;
  return c;
}

}  // namespace perf::coll
