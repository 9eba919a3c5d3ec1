// The fp8 format's scalar pieces, checked against definitions written here independently: the
// three grids (every value, rounding to nearest even, saturation), the fine scales, the Hadamard
// transform alone, the scale search's invariants.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "codec/fp8/format.h"
#include "support/stress.h"

namespace cclz::fp8 {
namespace {

// Every non-negative magnitude of a grid, in code order, from the grid's definition.
std::vector<double> gridValues(uint32_t grid) {
  std::vector<double> v;
  if (grid == kInt8) {
    for (int m = 0; m <= 126; ++m) v.push_back(m);
    return v;
  }
  const int mant = grid == kE4M3 ? 3 : 2, bias = grid == kE4M3 ? 7 : 15;
  const int maxCode = grid == kE4M3 ? 0x7E : 0x7B;
  for (int m = 0; m <= maxCode; ++m) {
    const int e = m >> mant, f = m & ((1 << mant) - 1);
    v.push_back(e == 0 ? std::ldexp(f, 1 - bias - mant)
                       : std::ldexp(1.0 + std::ldexp(f, -mant), e - bias));
  }
  return v;
}

// The code of the nearest grid value, ties to the even code, saturating at the top.
uint32_t nearestCode(const std::vector<double>& grid, double v) {
  if (v >= grid.back()) return static_cast<uint32_t>(grid.size() - 1);
  const auto hi = std::upper_bound(grid.begin(), grid.end(), v);
  const uint32_t up = static_cast<uint32_t>(hi - grid.begin()), down = up - 1;
  const double dUp = grid[up] - v, dDown = v - grid[down];
  if (dDown < dUp) return down;
  if (dUp < dDown) return up;
  return (down % 2 == 0) ? down : up;
}

class Fp8Grid : public ::testing::TestWithParam<uint32_t> {};

TEST_P(Fp8Grid, CodesAndValuesMatchTheDefinition) {
  const uint32_t grid = GetParam();
  const std::vector<double> values = gridValues(grid);
  for (uint32_t m = 0; m < values.size(); ++m) {
    EXPECT_EQ(double(magnitudeValue(grid, m)), values[m]) << m;
    EXPECT_EQ(magnitudeCode(grid, magnitudeValue(grid, m)), m) << m;
  }
  EXPECT_EQ(double(gridTop(grid)), values.back());
}

TEST_P(Fp8Grid, RoundsToNearestEvenAndSaturates) {
  const uint32_t grid = GetParam();
  const std::vector<double> values = gridValues(grid);
  // Every bf16 magnitude from 2^-40 to 2^20, plus every midpoint between grid values and its
  // neighbours one fp32 ulp away: the ties and the near-ties.
  std::vector<float> probes;
  for (uint32_t b = 0x2B80; b <= 0x4980; ++b) probes.push_back(bitsToFloat(b << 16));
  for (size_t i = 0; i + 1 < values.size(); ++i) {
    const float mid = static_cast<float>((values[i] + values[i + 1]) / 2);
    probes.insert(probes.end(), {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)});
  }
  probes.insert(probes.end(), {0.0f, 1e30f, 3.4e38f});
  for (float v : probes) {
    const uint32_t want = nearestCode(values, v);
    ASSERT_EQ(magnitudeCode(grid, v), want) << "v = " << v;
    const uint8_t pos = quantize(grid, v), neg = quantize(grid, -v);
    EXPECT_EQ(pos, want);
    EXPECT_EQ(neg, want == 0 ? 0u : (want | 0x80u)) << "negative values take the sign bit";
    EXPECT_FALSE(isSpecialCode(pos) || isSpecialCode(neg)) << v;
  }
}

// The search's shortcut rounds exactly as the codes do, over every bf16 magnitude (all of the
// grid's range and far beyond) and a stride through all fp32 magnitudes below 2^20.
TEST_P(Fp8Grid, RoundMagnitudeEqualsCodeThenValue) {
  const uint32_t grid = GetParam();
  auto check = [&](float v) {
    return roundMagnitude(grid, v) == magnitudeValue(grid, magnitudeCode(grid, v));
  };
  for (uint32_t b = 0; b < 0x7F80u; ++b) ASSERT_TRUE(check(bitsToFloat(b << 16))) << b;
  for (uint32_t u = 0; u < 0x49800000u; u += 997) ASSERT_TRUE(check(bitsToFloat(u))) << u;
}

INSTANTIATE_TEST_SUITE_P(
    Grids, Fp8Grid, ::testing::Values(kE4M3, kE5M2, kInt8), [](const auto& info) {
      return std::string(info.param == kE4M3 ? "e4m3" : info.param == kE5M2 ? "e5m2" : "int8");
    });

TEST(Fp8Format, SpecialCodes) {
  EXPECT_EQ(specialCode(0x7FC00000u), kCodeNaN);
  EXPECT_EQ(specialCode(0xFF800001u), kCodeNaN);
  EXPECT_EQ(specialCode(0x7F800000u), kCodePosInf);
  EXPECT_EQ(specialCode(0xFF800000u), kCodeNegInf);
  EXPECT_TRUE(std::isnan(specialValue(kCodeNaN)));
  EXPECT_EQ(specialValue(kCodePosInf), INFINITY);
  EXPECT_EQ(specialValue(kCodeNegInf), -INFINITY);
  int specials = 0;
  for (int c = 0; c < 256; ++c) specials += isSpecialCode(static_cast<uint8_t>(c));
  EXPECT_EQ(specials, 3);
}

TEST(Fp8Format, FineScales) {
  EXPECT_EQ(fineScale(0), std::ldexp(1.0f, -7));
  EXPECT_EQ(fineScale(224), 1.0f);
  EXPECT_EQ(fineScale(255), 1.96875f);
  for (uint32_t k = 0; k < 256; ++k) {
    const double want = std::ldexp(1.0 + (k & 31) / 32.0, static_cast<int>(k >> 5) - 7);
    EXPECT_EQ(double(fineScale(k)), want) << k;
  }
}

// fineScale's bits as k << 18 plus 120 << 23 are those of its definition, the exponent field
// (k >> 5) + 120 and the top 5 mantissa bits k & 31: for every k below 2^24, a sample of the rest
// and the ends (the kernels fill their scale tables with it, the CPU reference reads it too).
TEST(Fp8Format, FineScaleBits) {
  auto byFields = [](uint32_t k) { return (((k >> 5) + 120u) << 23) | ((k & 31u) << 18); };
  for (uint32_t k = 0; k < (1u << 24); ++k) ASSERT_EQ(floatToBits(fineScale(k)), byFields(k)) << k;
  uint64_t state = 29;
  for (int trial = 0; trial < 1000000; ++trial) {
    const uint32_t k = static_cast<uint32_t>(test::uniformFrom(state) * 4294967296.0);
    ASSERT_EQ(floatToBits(fineScale(k)), byFields(k)) << k;
  }
  for (uint32_t k : {0xFFFFFFFFu, 0xFFFFFF00u, 0x80000000u, 0x7FFFFFFFu})
    EXPECT_EQ(floatToBits(fineScale(k)), byFields(k)) << k;
}

TEST(Fp8Format, LayoutIsAlignedAndSized) {
  for (uint64_t count : {0ull, 1ull, 63ull, 64ull, 65ull, 786432ull, 1000001ull}) {
    const Layout l = frameLayout(count, 768);
    EXPECT_EQ(l.numRows, (count + 767) / 768);
    EXPECT_EQ(l.numBlocks, (count + 63) / 64);
    EXPECT_EQ(l.fine % 16, 0u);
    EXPECT_EQ(l.coarse % 16, 0u);
    EXPECT_EQ(l.flags % 16, 0u);
    EXPECT_GE(l.fine, 64 + count);
    EXPECT_GE(l.coarse, l.fine + l.numBlocks);
    EXPECT_GE(l.flags, l.coarse + 4 * l.numRows);
    EXPECT_EQ(l.frameBytes, (l.flags + l.numRows + 15) / 16 * 16);
  }
  // The size budget: at most 0.52x of bf16 for rows of 768 (docs/formats.md, fp8 "Layout").
  const Layout l = frameLayout(786432, 768);
  EXPECT_LE(double(l.frameBytes) / (2.0 * 786432), 0.52);
}

// The transform alone round-trips to within fp32 rounding, and exactly where no rounding happens.
TEST(Fp8Format, HadamardRoundTrip) {
  uint64_t state = 7;
  for (uint32_t log2H = kMinLog2Hadamard; log2H <= kMaxLog2Hadamard; ++log2H) {
    const uint32_t n = 1u << log2H;
    std::vector<float> x(n), y(n);
    for (auto& v : x) v = static_cast<float>(test::normalFrom(state));
    y = x;
    hadamardInPlace(y.data(), n);
    // W is orthogonal up to sqrt(n): the energy scales by n.
    double ex = 0, ey = 0;
    for (uint32_t i = 0; i < n; ++i) ex += double(x[i]) * x[i], ey += double(y[i]) * y[i];
    EXPECT_NEAR(ey / ex, n, 1e-4 * n);
    hadamardInPlace(y.data(), n);
    const float inv = inverseHadamardScale(log2H);
    double worst = 0, amax = 0;
    for (uint32_t i = 0; i < n; ++i) {
      worst = std::max(worst, std::fabs(double(mulRn(y[i], inv)) - x[i]));
      amax = std::max(amax, std::fabs(double(x[i])));
    }
    EXPECT_LE(worst, amax * log2H * std::ldexp(1.0, -22)) << "H = " << n;
    // Small integers: every sum is exact, so the round trip is too.
    for (uint32_t i = 0; i < n; ++i) x[i] = static_cast<float>(int(i * 37 % 19) - 9), y[i] = x[i];
    hadamardInPlace(y.data(), n);
    hadamardInPlace(y.data(), n);
    for (uint32_t i = 0; i < n; ++i) ASSERT_EQ(mulRn(y[i], inv), x[i]) << "H = " << n;
  }
}

// startCode is the smallest code that does not saturate; chooseFineCode stays within the
// candidates and never saturates the block maximum; one candidate means no search.
TEST(Fp8Format, ScaleSearchInvariants) {
  uint64_t state = 11;
  for (uint32_t grid : {kE4M3, kE5M2, kInt8}) {
    for (int trial = 0; trial < 2000; ++trial) {
      const float rowMax = static_cast<float>(
          std::ldexp(1.0 + test::uniformFrom(state), int(test::uniformFrom(state) * 60) - 30));
      const float c = coarseScale(grid, rowMax);
      float t[3] = {
          rowMax * static_cast<float>(std::ldexp(1.0, -int(test::uniformFrom(state) * 10))), 0, 0};
      t[1] = t[0] * static_cast<float>(test::uniformFrom(state));
      t[2] = t[1] * static_cast<float>(test::uniformFrom(state));
      const uint32_t k0 = startCode(grid, c, t[0]);
      EXPECT_LE(mulRn(t[0], blockScale(c, k0).inv), gridTop(grid));
      if (k0 > 0) {
        EXPECT_GT(mulRn(t[0], blockScale(c, k0 - 1).inv), gridTop(grid));
      }
      EXPECT_EQ(chooseFineCode(grid, c, t, 1), k0);
      const uint32_t k = chooseFineCode(grid, c, t, kMaxCandidates);
      EXPECT_GE(k, k0);
      EXPECT_LE(k, lastCandidate(k0, kMaxCandidates));
      EXPECT_LE(candidateError(grid, c, k, t), candidateError(grid, c, k0, t));
    }
  }
}

// startCodeNear, from three inverses, gives startCodeFrom's code or declines; on blocks of every
// magnitude and on maxima placed at the fine scales' edges (where rounding decides) it seldom
// declines.
TEST(Fp8Format, StartCodeNearIsStartCodeFromOrDeclines) {
  uint64_t state = 17;
  for (uint32_t grid : {kE4M3, kE5M2, kInt8}) {
    int trials = 0, declined = 0;
    auto check = [&](float c, float a) {
      const float need = fineScaleNeeded(grid, c, a);
      const uint32_t f = floorFineCode(need);
      auto inverse = [&](uint32_t j) { return blockScale(c, j).inv; };
      const uint32_t k = startCodeNear(grid, a, f, inverse);
      ++trials;
      if (k == kNoStartCode) {
        ++declined;
        return;
      }
      ASSERT_EQ(k, startCodeFrom(grid, c, a, need)) << "grid " << grid << " c " << c << " a " << a;
    };
    for (int trial = 0; trial < 20000; ++trial) {
      const float rowMax = static_cast<float>(
          std::ldexp(1.0 + test::uniformFrom(state), int(test::uniformFrom(state) * 60) - 30));
      const float c = coarseScale(grid, rowMax);
      check(c, rowMax * static_cast<float>(std::ldexp(1.0 + test::uniformFrom(state),
                                                      -1 - int(test::uniformFrom(state) * 7))));
      // a where need is a fine scale, and one ulp either side of it.
      const float edge = mulRn(mulRn(gridTop(grid), c), fineScale(1 + trial % 253));
      for (float a : {std::nextafter(edge, 0.0f), edge, std::nextafter(edge, 1e30f)})
        if (a > 0.0f && a <= rowMax) check(c, a);
    }
    EXPECT_LT(declined * 20, trials) << "grid " << grid << ": declined " << declined << " of "
                                     << trials;
    // A guess at the ends of the codes is declined whatever the inverses hold (the device reads
    // codes 0..2 in its place, which its table may not have filled).
    // Each inverse below puts k0 at some code near the guess (too large below it, fitting from
    // it on), so only the test of the ends declines them.
    for (uint32_t guess : {0u, 254u, 255u})
      for (uint32_t from : {1u, guess, guess + 1}) {
        auto inverse = [&](uint32_t k) { return k < from ? 1e30f : 1.0f; };
        EXPECT_EQ(startCodeNear(grid, 1.0f, guess, inverse), kNoStartCode)
            << "grid " << grid << " guess " << guess << " k0 " << from;
      }
  }
}

// Four codes with any byte in any position: a code of magnitude 0 (0x00 or 0x80) becomes 0x00,
// every other code is kept.
TEST(Fp8Format, ClearZeroSignsKeepsEveryCodeButNegativeZero) {
  uint64_t state = 19;
  for (uint32_t position = 0; position < 4; ++position)
    for (uint32_t b = 0; b < 256; ++b)
      for (int trial = 0; trial < 16; ++trial) {
        uint32_t word = static_cast<uint32_t>(test::uniformFrom(state) * 4294967296.0);
        if (trial == 0) word = 0x80808080u;
        word = (word & ~(0xFFu << (8 * position))) | (b << (8 * position));
        uint32_t want = 0;
        for (uint32_t j = 0; j < 4; ++j) {
          const uint32_t code = (word >> (8 * j)) & 0xFFu;
          want |= ((code & 0x7Fu) == 0 ? 0u : code) << (8 * j);
        }
        ASSERT_EQ(clearZeroSigns(word), want) << std::hex << word;
      }
}

// floorFineCode(x) is the largest code whose fine scale does not exceed x, clamped to 0..255.
TEST(Fp8Format, FloorFineCodeIsTheLargestScaleNotAbove) {
  uint64_t state = 13;
  for (int trial = 0; trial < 20000; ++trial) {
    const float x = static_cast<float>(std::ldexp(1.0 + test::uniformFrom(state),
                                                  int(test::uniformFrom(state) * 12) - 9));
    const uint32_t k = floorFineCode(x);
    if (x < fineScale(0)) {
      EXPECT_EQ(k, 0u) << x;
    } else {
      EXPECT_LE(fineScale(k), x) << x;
      if (k < 255) {
        EXPECT_GT(fineScale(k + 1), x) << x;
      }
    }
  }
  EXPECT_EQ(floorFineCode(fineScale(77)), 77u);
  EXPECT_EQ(floorFineCode(2.0f), 255u);
  // Every boundary exactly (the code is computed from the bits, not searched): each scale maps to
  // its own code and the float just below it to the code before; zero and the largest float clamp.
  for (uint32_t k = 0; k < 256; ++k) {
    EXPECT_EQ(floorFineCode(fineScale(k)), k);
    if (k > 0) {
      EXPECT_EQ(floorFineCode(std::nextafter(fineScale(k), 0.0f)), k - 1) << k;
    }
  }
  EXPECT_EQ(floorFineCode(0.0f), 0u);
  EXPECT_EQ(floorFineCode(std::numeric_limits<float>::max()), 255u);
}

// nearestFineCode(x) is the code whose fine scale is nearest to x, the larger on a tie.
TEST(Fp8Format, NearestFineCodeIsTheNearestScale) {
  uint64_t state = 19;
  for (int trial = 0; trial < 20000; ++trial) {
    const float x = static_cast<float>(std::ldexp(1.0 + test::uniformFrom(state),
                                                  int(test::uniformFrom(state) * 8) - 7));
    uint32_t want = 0;  // by distance, in double
    for (uint32_t k = 1; k < 256; ++k)
      if (std::fabs(double(fineScale(k)) - x) <= std::fabs(double(fineScale(want)) - x)) want = k;
    EXPECT_EQ(nearestFineCode(x), want) << x;
  }
  EXPECT_EQ(nearestFineCode(fineScale(77)), 77u);
  EXPECT_EQ(nearestFineCode((fineScale(77) + fineScale(78)) / 2), 78u);  // a tie: the larger
  EXPECT_EQ(nearestFineCode(fineScale(95) * 1.0155f), 96u);  // across a binade
  EXPECT_EQ(nearestFineCode(3.0f), 255u);
}

// The ratios of the grid-aligned candidates are top / g, rounded to fp32, for the grid's values g
// strictly between top / 2 and top, largest first (from the grid's definition above).
TEST(Fp8Format, ScaleRatiosAreTopOverTheGridPointsOfTheTopOctave) {
  for (uint32_t grid : {kE4M3, kE5M2, kInt8}) {
    const double top = gridTop(grid);
    std::vector<double> octave;
    for (double g : gridValues(grid))
      if (g > top / 2 && g < top) octave.push_back(g);
    std::sort(octave.rbegin(), octave.rend());
    if (grid != kE4M3) octave.clear();  // E5M2 and INT8 search every code of the window
    ASSERT_EQ(numScaleRatios(grid), octave.size()) << grid;
    ASSERT_LE(octave.size(), kMaxScaleRatios);
    for (uint32_t i = 0; i < octave.size(); ++i)
      EXPECT_EQ(scaleRatio(i), static_cast<float>(top / octave[i])) << grid << " " << i;
  }
}

// The encoder's search takes the ratio of a lane's candidate as slot * (r1 - r0) + r0 (one fused
// multiply-add, slot 0 or 1) for two consecutive ratios r0, r1 (encode_kernel.cu,
// searchCandidates): exact, since the ratios lie in [1, 2).
TEST(Fp8Format, ScaleRatioStepsAreExact) {
  for (uint32_t i = 0; i + 1 < kMaxScaleRatios; ++i) {
    const float r0 = scaleRatio(i), r1 = scaleRatio(i + 1);
    const float step = subRn(r1, r0);
    EXPECT_EQ(static_cast<double>(step), static_cast<double>(r1) - static_cast<double>(r0)) << i;
    EXPECT_EQ(floatToBits(fmaRn(1.0f, step, r0)), floatToBits(r1)) << i;
    EXPECT_EQ(floatToBits(fmaRn(0.0f, step, r0)), floatToBits(r0)) << i;
  }
}

// The search over E4M3's grid-aligned candidates (8 of the window's 32 codes) picks a code of
// the window whose top-3 error, summed over Gaussian blocks, is 1.17x that of the window's best
// code (k0 alone: 4.7x). The top-3 error is a small part of a block's: on the real tensors the
// NMSE moves by 1% (docs/formats.md, fp8 "Why this design"). E5M2 and INT8 search every
// code and find the best (on 15 mantissa bits of the error), the smallest code on a tie.
TEST(Fp8Format, GridCandidatesLoseAlmostNothingAgainstTheWholeWindow) {
  uint64_t state = 23;
  for (uint32_t grid : {kE4M3, kE5M2, kInt8}) {
    double chosenSum = 0, bestSum = 0, startSum = 0;
    for (int block = 0; block < 4000; ++block) {
      // A Gaussian block of 64 in a row whose largest value is 1-16 times the block's.
      float t[3] = {0, 0, 0};
      for (int i = 0; i < 64; ++i)
        offerTop3(t, static_cast<float>(std::fabs(test::normalFrom(state))));
      const float rowMax = t[0] * static_cast<float>(1.0 + 15 * test::uniformFrom(state));
      const float c = coarseScale(grid, rowMax);
      const uint32_t k = chooseFineCode(grid, c, t, kMaxCandidates);
      const uint32_t k0 = startCode(grid, c, t[0]), last = lastCandidate(k0, kMaxCandidates);
      ASSERT_GE(k, k0);
      ASSERT_LE(k, last);
      uint32_t best = k0, bestKey = 0xFFFFFFFFu;
      for (uint32_t j = k0; j <= last; ++j) {
        const float e = candidateError(grid, c, j, t);
        const uint32_t key = (std::bit_cast<uint32_t>(e) >> 8) << 8 | j;
        if (key < bestKey) bestKey = key, best = j;
      }
      if (grid != kE4M3) {
        ASSERT_EQ(k, best) << block;
      }
      chosenSum += candidateError(grid, c, k, t);
      startSum += candidateError(grid, c, k0, t);
      bestSum += candidateError(grid, c, best, t);
    }
    EXPECT_LE(chosenSum, 1.25 * bestSum) << "grid " << grid;
    std::printf("grid %u: error of the chosen codes / the window's best: %.4f (k0 alone: %.4f)\n",
                grid, chosenSum / bestSum, startSum / bestSum);
  }
}

// The kernels' branch-free top-3 (insertTop3 or top3of8 per lane, mergeTop3 over a xor butterfly
// of 8 lanes) gives every lane offerTop3's three values over the block's 64, ties and zeros
// included.
TEST(Fp8Format, BranchFreeTopThreeMatchesOfferTop3) {
  uint64_t state = 17;
  for (int trial = 0; trial < 20000; ++trial) {
    float x[64];
    const int distinct = 1 + int(test::uniformFrom(state) * 12);  // few values: many ties
    for (float& v : x) {
      const int pick = int(test::uniformFrom(state) * distinct);
      v = trial % 3 == 0 ? static_cast<float>(test::uniformFrom(state))
                         : static_cast<float>(pick) * 0.25f;
    }
    float ref[3] = {0, 0, 0};
    for (float v : x) offerTop3(ref, v);
    float lanes[8][3] = {};
    for (int l = 0; l < 8; ++l) {
      for (int j = 0; j < 8; ++j) insertTop3(lanes[l], x[8 * l + j]);
      float net[3];  // the encoder's lane-local sorting network: the same three values
      top3of8(x + 8 * l, net);
      for (int i = 0; i < 3; ++i)
        ASSERT_EQ(floatToBits(net[i]), floatToBits(lanes[l][i])) << "trial " << trial;
    }
    for (int d = 1; d < 8; d <<= 1) {
      float next[8][3];
      for (int l = 0; l < 8; ++l) {
        std::copy(lanes[l], lanes[l] + 3, next[l]);
        mergeTop3(next[l], lanes[l ^ d]);
      }
      std::copy(&next[0][0], &next[0][0] + 24, &lanes[0][0]);
    }
    for (int l = 0; l < 8; ++l)
      for (int i = 0; i < 3; ++i)
        ASSERT_EQ(floatToBits(lanes[l][i]), floatToBits(ref[i])) << "trial " << trial;
  }
}

// The encoder's top-3 on bf16 magnitudes, four tiles per lane: the lane's raw words (signs
// included) doubled (doubledMagnitudes), top3of8Pair for tiles 0-1 and for tiles 2-3, then the
// 8-lane butterfly as the kernel runs it: the step across half groups (lane ^ 4) first, where
// lanes 0-3 keep tiles 0-1's triples and lanes 4-7 tiles 2-3's (each receiving its partner's copy
// of the pair it keeps), then lane ^ 1 and lane ^ 2 on that one triple. Each lane's halves, halved
// (halvedLow / halvedHigh), must give offerTop3's three values of their tile's block, as fp32
// after the exact bf16 conversion; ties (the doubled high half carries the low half's sign),
// zeros and the largest finite bf16 included.
TEST(Fp8Format, TopThreeOnHalfBitsMatchesOfferTop3) {
  uint64_t state = 23;
  for (int trial = 0; trial < 20000; ++trial) {
    uint32_t bits[4][64];  // four tiles' blocks of bf16 bits (magnitude < 0x7F80: finite)
    const int distinct = 1 + int(test::uniformFrom(state) * 12);
    for (auto& tile : bits)
      for (uint32_t& b : tile) {
        const uint32_t pick = uint32_t(test::uniformFrom(state) * distinct);
        b = trial % 3 == 0 ? uint32_t(test::uniformFrom(state) * 0x7F80) : 0x3F00 + 5 * pick;
        if (trial % 7 == 0 && pick == 0) b = 0x7F7F;
        if (test::uniformFrom(state) < 0.5) b |= 0x8000u;  // the sign, which must not count
      }
    uint32_t pairs[8][2][3];  // per lane: tiles 0-1 and tiles 2-3
    for (int l = 0; l < 8; ++l)
      for (int q = 0; q < 2; ++q) {
        uint32_t a[4], b[4];  // the lane's 8 values of each tile, two to a word, doubled
        for (int w = 0; w < 4; ++w) {
          a[w] = doubledMagnitudes(bits[2 * q][8 * l + 2 * w] |
                                   (bits[2 * q][8 * l + 2 * w + 1] << 16));
          b[w] = doubledMagnitudes(bits[2 * q + 1][8 * l + 2 * w] |
                                   (bits[2 * q + 1][8 * l + 2 * w + 1] << 16));
        }
        top3of8Pair(a, b, pairs[l][q]);
      }
    uint32_t lanes[8][3];
    for (int l = 0; l < 8; ++l) {  // the step across half groups: keep one pair, merge the partner's
      const int keep = l < 4 ? 0 : 1;
      std::copy(pairs[l][keep], pairs[l][keep] + 3, lanes[l]);
      mergeTop3x2(lanes[l], pairs[l ^ 4][keep]);
    }
    for (int d = 1; d < 4; d <<= 1) {
      uint32_t next[8][3];
      for (int l = 0; l < 8; ++l) {
        std::copy(lanes[l], lanes[l] + 3, next[l]);
        mergeTop3x2(next[l], lanes[l ^ d]);
      }
      std::copy(&next[0][0], &next[0][0] + 24, &lanes[0][0]);
    }
    for (int tile = 0; tile < 4; ++tile) {
      float ref[3] = {0, 0, 0};
      for (uint32_t b : bits[tile]) offerTop3(ref, std::fabs(bitsToFloat(b << 16)));
      for (int l = tile < 2 ? 0 : 4; l < (tile < 2 ? 4 : 8); ++l)
        for (int i = 0; i < 3; ++i) {
          const uint32_t half = tile % 2 == 0 ? halvedLow(lanes[l][i]) : halvedHigh(lanes[l][i]);
          ASSERT_EQ(half << 16, floatToBits(ref[i])) << "trial " << trial << " tile " << tile;
        }
    }
  }
}

}  // namespace
}  // namespace cclz::fp8
