// The library's fp32 <-> bf16/fp16 conversions (src/common/float_bits.h) against the tests' own,
// on every 16-bit pattern and on fp32 values around every rounding boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "common/float_bits.h"
#include "support/data.h"

namespace cclz::test {
namespace {

bool sameOrBothNan(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0;
}

TEST(FloatBits, EveryHalfWidensAndNarrowsBack) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = halfToFloat(static_cast<uint16_t>(h));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    if (nan) {
      ASSERT_TRUE(std::isnan(f)) << h;
      continue;
    }
    ASSERT_EQ(cclz::floatToHalf(f), h) << h;  // exact, so it narrows to itself
  }
}

TEST(FloatBits, EveryBf16WidensAndNarrowsBack) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16ToFloat(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(cclz::floatToBf16(f), h) << h;
  }
}

TEST(FloatBits, NarrowingRoundsAsTheTestsReference) {
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    const uint32_t u = rng();
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(cclz::floatToBf16(f), test::floatToBf16(f)) << std::hex << u;
    ASSERT_EQ(cclz::floatToHalf(f), test::floatToHalf(f)) << std::hex << u;
  }
  // Exact ties and their neighbours across the fp16 subnormal and normal range.
  for (int e = -30; e <= 16; ++e)
    for (int m = 0; m < 64; ++m) {
      const float base = std::ldexp(1.0f + m / 64.0f, e);
      for (float f : {base, std::nextafter(base, 0.0f), std::nextafter(base, 1e30f), -base}) {
        ASSERT_EQ(cclz::floatToHalf(f), test::floatToHalf(f)) << f;
        ASSERT_TRUE(sameOrBothNan(halfToFloat(cclz::floatToHalf(f)),
                                  halfToFloat(test::floatToHalf(f))));
      }
    }
}

}  // namespace
}  // namespace cclz::test
