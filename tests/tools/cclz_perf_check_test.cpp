// cclz-perf's check of a collective's output (tools/cclz-perf/coll_check.h). A reduction that the
// network computes itself rounds every partial sum to the dtype in an order of its own: such
// results pass within networkTolerance whatever the order, while wrong results (a contribution
// lost, doubled or misplaced, an element beyond the bound, a NaN, an output never written) fail.
// Results that cclz reduces itself stay compared byte for byte.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "coll_check.h"
#include "support/data.h"

namespace {

using cclz::test::elementAsFloat;
using cclz::test::elementSize;
using perf::coll::check;
using perf::coll::networkTolerance;
using perf::coll::Reference;

constexpr uint64_t kElems = 10007;

// x rounded to the dtype (nearest even), as a float.
float roundTo(int dtype, float x) {
  if (dtype == cclzBfloat16) {
    const uint32_t u = uint32_t{cclz::test::floatToBf16(x)} << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  if (dtype == cclzFloat16) {
    std::vector<uint8_t> h(2);
    const uint16_t bits = cclz::test::floatToHalf(x);
    std::memcpy(h.data(), &bits, 2);
    return elementAsFloat(dtype, h, 0);
  }
  return x;
}

void store(int dtype, std::vector<uint8_t>& out, uint64_t i, float x) {
  if (dtype == cclzFloat32) {
    std::memcpy(&out[4 * i], &x, 4);
    return;
  }
  const uint16_t bits =
      dtype == cclzBfloat16 ? cclz::test::floatToBf16(x) : cclz::test::floatToHalf(x);
  std::memcpy(&out[2 * i], &bits, 2);
}

// One element's contributions, by rank, reduced the network's way: fp32 additions of two values,
// each sum rounded to the dtype.
using Order = std::function<float(int dtype, const std::vector<float>& x)>;

float inSequence(int dtype, const std::vector<float>& x, int first) {
  const int n = static_cast<int>(x.size());
  float acc = x[first % n];
  for (int k = 1; k < n; ++k) acc = roundTo(dtype, acc + x[(first + k) % n]);
  return acc;
}

float inPairs(int dtype, std::vector<float> x) {  // a tree: partial sums of pairs of partial sums
  while (x.size() > 1) {
    std::vector<float> next;
    for (size_t k = 0; k + 1 < x.size(); k += 2) next.push_back(roundTo(dtype, x[k] + x[k + 1]));
    if (x.size() % 2) next.push_back(x.back());
    x = next;
  }
  return x[0];
}

class PerfCheck : public ::testing::TestWithParam<std::tuple<int, int>> {
 protected:
  int dtype() const { return std::get<0>(GetParam()); }
  int ranks() const { return std::get<1>(GetParam()); }
  cclzDataType_t type() const { return static_cast<cclzDataType_t>(dtype()); }

  void SetUp() override {
    const size_t es = elementSize(dtype());
    parts_.resize(ranks() * kElems * es);
    for (int r = 0; r < ranks(); ++r) {
      const auto x = cclz::test::makeData(cclz::test::DataKind::kGauss1, dtype(), kElems, 0,
                                          cclz::test::mixSeed(36, dtype(), ranks(), r));
      std::memcpy(&parts_[r * kElems * es], x.data(), x.size());
    }
  }

  float contribution(int r, uint64_t i) const {
    return elementAsFloat(dtype(), parts_, r * kElems + i);
  }
  std::vector<float> contributions(uint64_t i) const {
    std::vector<float> x(ranks());
    for (int r = 0; r < ranks(); ++r) x[r] = contribution(r, i);
    return x;
  }
  // The output of a network that reduces every element in `order`, then divides (average).
  std::vector<uint8_t> network(const Order& order, bool average = false) const {
    std::vector<uint8_t> out(kElems * elementSize(dtype()));
    for (uint64_t i = 0; i < kElems; ++i) {
      float sum = order(dtype(), contributions(i));
      if (average) sum = roundTo(dtype(), sum / static_cast<float>(ranks()));
      store(dtype(), out, i, sum);
    }
    return out;
  }
  // An output made of each element's exact sum changed by f(i, contributions).
  std::vector<uint8_t> made(const std::function<float(uint64_t, const std::vector<float>&)>& f) {
    std::vector<uint8_t> out(kElems * elementSize(dtype()));
    for (uint64_t i = 0; i < kElems; ++i) store(dtype(), out, i, f(i, contributions(i)));
    return out;
  }
  uint64_t wrong(const Reference& ref, const std::vector<uint8_t>& out) const {
    return check(ref, type(), false, out, networkTolerance(type(), ranks())).wrong;
  }

  std::vector<uint8_t> parts_;
};

TEST_P(PerfCheck, TheNetworksRoundingPassesInAnyOrder) {
  const Reference ref = perf::coll::reduceReference(parts_, ranks(), kElems, type(), cclzSum);
  const std::vector<std::pair<std::string, Order>> orders = {
      {"rank order", [](int d, const std::vector<float>& x) { return inSequence(d, x, 0); }},
      {"ring from the last rank",
       [](int d, const std::vector<float>& x) {
         return inSequence(d, x, static_cast<int>(x.size()) - 1);
       }},
      {"reverse",
       [](int d, std::vector<float> x) {
         std::reverse(x.begin(), x.end());
         return inSequence(d, x, 0);
       }},
      {"pairs", [](int d, const std::vector<float>& x) { return inPairs(d, x); }},
  };
  for (const auto& [name, order] : orders) EXPECT_EQ(wrong(ref, network(order)), 0u) << name;

  // An average: the rounded sum divided (MPI), or each contribution premultiplied (NCCL).
  const Reference avg = perf::coll::reduceReference(parts_, ranks(), kElems, type(), cclzAvg);
  EXPECT_EQ(wrong(avg, network(orders[1].second, true)), 0u) << "divided";
  const float inverse = roundTo(dtype(), 1.0f / static_cast<float>(ranks()));
  const Order premultiplied = [inverse](int d, std::vector<float> x) {
    for (float& v : x) v = roundTo(d, v * inverse);
    return inSequence(d, x, 0);
  };
  EXPECT_EQ(wrong(avg, network(premultiplied)), 0u) << "premultiplied";

  // Why the tolerance: in bytes, per-step rounding differs from the fp32 sum in rank order.
  if (dtype() == cclzBfloat16 && ranks() >= 3) {
    EXPECT_GT(check(ref, type(), false, network(orders[1].second)).wrong, kElems / 10);
  }
}

TEST_P(PerfCheck, WrongResultsFail) {
  const Reference ref = perf::coll::reduceReference(parts_, ranks(), kElems, type(), cclzSum);
  const int n = ranks();
  auto exact = [](const std::vector<float>& x) {
    double s = 0;
    for (float v : x) s += v;
    return static_cast<float>(s);
  };
  EXPECT_GT(
      wrong(ref, made([&](uint64_t, const std::vector<float>& x) { return exact(x) - x[n - 1]; })),
      kElems / 2)
      << "a contribution lost";
  EXPECT_GT(
      wrong(ref, made([&](uint64_t, const std::vector<float>& x) { return exact(x) + x[0]; })),
      kElems / 2)
      << "a contribution doubled";
  EXPECT_GT(wrong(ref, made([&](uint64_t i, const std::vector<float>&) {
                    return exact(contributions((i + 1) % kElems));
                  })),
            kElems / 2)
      << "shifted by one element";
  std::vector<uint8_t> cleared(kElems * elementSize(dtype()), 0xA5);  // never written
  EXPECT_GT(wrong(ref, cleared), kElems / 2) << "never written";

  // One element just beyond the bound, one NaN: exactly those.
  const double tolerance = networkTolerance(type(), n);
  std::vector<uint8_t> out = made([&](uint64_t, const std::vector<float>& x) { return exact(x); });
  EXPECT_EQ(wrong(ref, out), 0u);
  store(dtype(), out, 17, static_cast<float>(ref.value[17] + 1.5 * tolerance * ref.magnitude[17]));
  store(dtype(), out, 4711, NAN);
  EXPECT_EQ(wrong(ref, out), 2u);
}

TEST_P(PerfCheck, CclzsOwnReductionsStayExact) {
  const Reference ref = perf::coll::reduceReference(parts_, ranks(), kElems, type(), cclzSum);
  EXPECT_EQ(check(ref, type(), false, ref.exact).wrong, 0u);
  std::vector<uint8_t> out = ref.exact;
  out[3 * elementSize(dtype())] ^= 1;  // one unit in the last place
  EXPECT_EQ(check(ref, type(), false, out).wrong, 1u);
  // Where cclz reduced decoded frames itself, no tolerance applies; moves are never reduced.
  EXPECT_EQ(perf::coll::callTolerance(true, false, type(), ranks()), 0.0);
  EXPECT_EQ(perf::coll::callTolerance(false, true, type(), ranks()), 0.0);
  EXPECT_EQ(perf::coll::callTolerance(true, true, type(), ranks()),
            networkTolerance(type(), ranks()));
}

INSTANTIATE_TEST_SUITE_P(DtypeRanks, PerfCheck,
                         ::testing::Combine(::testing::Values(int{cclzBfloat16}, int{cclzFloat16},
                                                              int{cclzFloat32}),
                                            ::testing::Values(2, 3, 4, 8)),
                         [](const auto& info) {
                           return std::string(cclz::test::dtypeLabel(std::get<0>(info.param))) +
                                  "_" + std::to_string(std::get<1>(info.param)) + "ranks";
                         });

}  // namespace
