// The encoder's 8-bit cost pass (src/codec/lossless/cost_bytes.h; the kernel:
// laneCostsNoEscapes in encode_lane.cuh) on the CPU, with the same functions: the 8-byte
// entries built as the kernel builds its table, a lane's offsets added as bytes and spread to
// the 16-bit fields every kSymbolsPerWiden symbols. The result must equal the sum of the 16-bit
// per-offset costs (the reference's), for both families, on lanes of every offset below D and
// on lanes of the worst offsets (the longest codes). No device needed; the GPU suite checks the
// kernel's frames.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "codec/lossless/cost_bytes.h"
#include "codec/lossless/format.h"

namespace cclz::test {
namespace {
using namespace lossless;

constexpr Codes kCodes = makeCodes();
constexpr uint32_t kFamilyOffsets[2] = {32, 64};  // D of each family (tables.h)

using Packed = std::array<uint32_t, 4>;

// Every code of both families below the escape fits the byte sums' bound.
TEST(LosslessCostBytes, CodesFitTheByteSums) {
  for (int fam = 0; fam < 2; ++fam)
    for (uint32_t d = 0; d < kFamilyOffsets[fam]; ++d)
      for (uint32_t t = 0; t < kTables; ++t)
        EXPECT_LE((kCodes.cost[fam][d][t / 2] >> (16 * (t % 2))) & 0xFFFFu, costbytes::kMaxCodeBits)
            << "family " << fam << " offset " << d << " code " << t;
}

// The entry's bytes are the 16-bit costs, code by code.
TEST(LosslessCostBytes, EntriesHoldEachCodesCost) {
  for (int fam = 0; fam < 2; ++fam)
    for (uint32_t d = 0; d < kFamilyOffsets[fam]; ++d) {
      uint32_t lo, hi;
      costbytes::entry(kCodes.cost[fam], d, lo, hi);
      for (uint32_t t = 0; t < kTables; ++t)
        EXPECT_EQ(((t < 4 ? lo : hi) >> (8 * (t % 4))) & 0xFFu,
                  (kCodes.cost[fam][d][t / 2] >> (16 * (t % 2))) & 0xFFFFu);
    }
}

TEST(LosslessCostBytes, OffsetsTimes8AreTheEntriesOffsets) {
  for (uint32_t top = 0; top < 256; ++top)
    for (uint32_t below = 0; below < 32; ++below) {
      if (below > top) continue;
      // Symbols at offsets below, below / 2, 0 and below from top, one per byte.
      const uint32_t word =
          (top - below) | ((top - below / 2) << 8) | (top << 16) | ((top - below) << 24);
      const uint32_t x8 = costbytes::offsetsTimes8(top, word);
      EXPECT_EQ(x8 & 0xFFu, 8 * below);
      EXPECT_EQ((x8 >> 8) & 0xFFu, 8 * (below / 2));
      EXPECT_EQ((x8 >> 16) & 0xFFu, 0u);
      EXPECT_EQ(x8 >> 24, 8 * below);
    }
}

// A lane of 128 offsets (16 groups of 8), added as the kernel adds them.
Packed byteCosts(int fam, const std::vector<uint32_t>& offsets) {
  std::vector<std::array<uint32_t, 2>> table(kFamilyOffsets[fam]);
  for (uint32_t d = 0; d < kFamilyOffsets[fam]; ++d)
    costbytes::entry(kCodes.cost[fam], d, table[d][0], table[d][1]);
  uint32_t packed[4] = {0, 0, 0, 0}, lo = 0, hi = 0;
  for (size_t i = 0; i < offsets.size(); ++i) {
    lo += table.at(offsets[i])[0];
    hi += table.at(offsets[i])[1];
    if ((i + 1) % costbytes::kSymbolsPerWiden == 0) {
      costbytes::widen(lo, hi, packed);
      lo = hi = 0;
    }
  }
  return {packed[0], packed[1], packed[2], packed[3]};
}

Packed wordCosts(int fam, const std::vector<uint32_t>& offsets) {
  Packed sum{0, 0, 0, 0};
  for (const uint32_t d : offsets)
    for (int w = 0; w < 4; ++w) sum[w] += kCodes.cost[fam][d][w];
  return sum;
}

TEST(LosslessCostBytes, LanesSumLikeTheSixteenBitCosts) {
  for (int fam = 0; fam < 2; ++fam) {
    const uint32_t limit = kFamilyOffsets[fam];
    std::mt19937 rng(5 + fam);
    for (int lane = 0; lane < 5000; ++lane) {
      std::vector<uint32_t> offsets(kMaxChunkElems / kLanes);
      const uint32_t spread = 1 + rng() % limit;  // narrow and wide lanes
      for (uint32_t& d : offsets) d = rng() % spread;
      ASSERT_EQ(byteCosts(fam, offsets), wordCosts(fam, offsets)) << "family " << fam;
    }
    // The longest codes everywhere: the largest byte sums.
    for (uint32_t t = 0; t < kTables; ++t) {
      uint32_t worst = 0;
      for (uint32_t d = 0; d < limit; ++d)
        if (((kCodes.cost[fam][d][t / 2] >> (16 * (t % 2))) & 0xFFFFu) == costbytes::kMaxCodeBits)
          worst = d;
      const std::vector<uint32_t> offsets(kMaxChunkElems / kLanes, worst);
      ASSERT_EQ(byteCosts(fam, offsets), wordCosts(fam, offsets)) << "family " << fam;
    }
  }
}

// With escapes (laneCosts): offset indices up to D (the escape's), widened every
// kSymbolsPerWidenWithEscapes symbols, against the 16-bit sums; all escapes is the largest.
TEST(LosslessCostBytes, LanesWithEscapesSumLikeTheSixteenBitCosts) {
  for (int fam = 0; fam < 2; ++fam) {
    const uint32_t limit = kFamilyOffsets[fam];
    std::vector<std::array<uint32_t, 2>> table(limit + 1);
    for (uint32_t d = 0; d <= limit; ++d)
      costbytes::entry(kCodes.cost[fam], d, table[d][0], table[d][1]);
    std::mt19937 rng(9 + fam);
    for (int lane = 0; lane < 5001; ++lane) {
      std::vector<uint32_t> offsets(kMaxChunkElems / kLanes, limit);  // the last: all escapes
      if (lane < 5000)
        for (uint32_t& d : offsets) d = rng() % (limit + 1);
      uint32_t packed[4] = {0, 0, 0, 0}, lo = 0, hi = 0;
      for (size_t i = 0; i < offsets.size(); ++i) {
        lo += table[offsets[i]][0];
        hi += table[offsets[i]][1];
        if ((i + 1) % costbytes::kSymbolsPerWidenWithEscapes == 0) {
          costbytes::widen(lo, hi, packed);
          lo = hi = 0;
        }
      }
      costbytes::widen(lo, hi, packed);
      ASSERT_EQ((Packed{packed[0], packed[1], packed[2], packed[3]}), wordCosts(fam, offsets))
          << "family " << fam << " lane " << lane;
    }
  }
}

}  // namespace
}  // namespace cclz::test
