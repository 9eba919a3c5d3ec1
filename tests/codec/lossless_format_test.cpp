// The scalar pieces of the lossless format shared by the reference and the kernels
// (src/codec/lossless/format.h, elements.h): element splitting, layout, lanes, parameters.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "codec/lossless/elements.h"
#include "codec/lossless/format.h"
#include "support/data.h"

namespace cclz::lossless {
namespace {

// Every 16-bit word, and a sweep of 32-bit words: split then join gives the word back, and the
// symbol is the field the spec names (checked against the tests' own derivation).
template <int D>
void checkEvery16BitWord() {
  using E = Elements<D>;
  for (uint32_t w = 0; w < 65536; ++w) {
    const auto v = static_cast<uint16_t>(w);
    ASSERT_EQ(E::symbol(v), test::symbolOf(D, v));
    ASSERT_EQ(E::join(E::symbol(v), E::planeA(v), 0), v);
    ASSERT_EQ(E::planeA(v) >> 7, static_cast<uint32_t>(v >> 15)) << "the sign is plane A's bit 7";
    ASSERT_LT(E::planeA(v), 256u);
  }
}

TEST(LosslessFormat, SplitJoinEveryBf16AndFp16Word) {
  checkEvery16BitWord<cclzBfloat16>();
  checkEvery16BitWord<cclzFloat16>();
}

TEST(LosslessFormat, SplitJoinFp32Words) {
  std::mt19937_64 rng(1);
  for (int i = 0; i < 1 << 20; ++i) {
    const auto v = static_cast<uint32_t>(i < 512 ? (i & 0xFF) << 23 | (i >> 8) << 31 : rng());
    ASSERT_EQ(fp32Symbol(v), test::symbolOf(cclzFloat32, v));
    ASSERT_EQ(fp32Join(fp32Symbol(v), fp32PlaneA(v), fp32PlaneB(v)), v);
    ASSERT_LT(fp32PlaneA(v), 256u);
    ASSERT_LT(fp32PlaneB(v), 65536u);
  }
}

TEST(LosslessFormat, LayoutSectionsAreAlignedAndDisjoint) {
  for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32}) {
    for (uint64_t count : {0ull, 1ull, 7ull, 1023ull, 1024ull, 1025ull, 1000001ull, 1ull << 40}) {
      for (uint32_t chunk : {1024u, 2048u, 4096u}) {
        const Layout l = frameLayout(dtype, count, chunk);
        EXPECT_EQ(l.numChunks, (count + chunk - 1) / chunk);
        EXPECT_EQ(l.tableOffset, 64u);
        EXPECT_EQ(l.planeAOffset % 16, 0u);
        EXPECT_EQ(l.planeBOffset % 16, 0u);
        EXPECT_EQ(l.blocksOffset % 16, 0u);
        EXPECT_GE(l.planeAOffset, l.tableOffset + 8 * l.numChunks);
        EXPECT_GE(l.planeBOffset, l.planeAOffset + count);
        EXPECT_GE(l.blocksOffset, l.planeBOffset + (dtype == cclzFloat32 ? 2 * count : 0));
        EXPECT_LT(l.blocksOffset - (l.planeBOffset + (dtype == cclzFloat32 ? 2 * count : 0)), 16u);
      }
    }
  }
}

TEST(LosslessFormat, LanesPartitionTheChunk) {
  for (uint32_t n :
       {1u, 7u, 8u, 9u, 63u, 64u, 65u, 255u, 256u, 257u, 1000u, 1024u, 2048u, 4095u, 4096u}) {
    uint64_t total = 0;
    for (uint32_t lane = 0; lane < kLanes; ++lane) {
      // Count by walking the groups, as the format defines it: lane l takes groups l, l+32, ...
      uint32_t expected = 0;
      for (uint32_t g = lane; g * kGroup < n; g += kLanes)
        expected += std::min<uint32_t>(kGroup, n - g * kGroup);
      EXPECT_EQ(laneSymbols(n, lane), expected) << "n " << n << " lane " << lane;
      total += laneSymbols(n, lane);
    }
    EXPECT_EQ(total, n);
  }
}

TEST(LosslessFormat, ValidParamsBounds) {
  EXPECT_TRUE(validParams({1024}));
  EXPECT_TRUE(validParams({2048}));
  EXPECT_TRUE(validParams({4096}));
  for (uint32_t chunk : {0u, 1u, 512u, 1000u, 3072u, 8192u, 65536u, 1u << 31})
    EXPECT_FALSE(validParams({chunk})) << chunk;
}

// The header's version byte is the lossless format's; any other is rejected as a version (a
// frame of another format), not read as this one.
TEST(LosslessFormat, HeaderOfAnotherVersionIsRejected) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kLosslessFrameVersion;
  h.codec = cclzCodecLossless;
  h.dtype = cclzBfloat16;
  h.count = 5000;
  h.chunkElems = 4096;
  h.numChunks = 2;
  h.frameBytes = frameLayout(cclzBfloat16, 5000, 4096).blocksOffset + 32;
  ASSERT_EQ(checkLosslessHeader(h), kFrameOk);
  for (int version : {0, 1, 3, 255}) {
    FrameHeader other = h;
    other.version = static_cast<uint8_t>(version);
    EXPECT_EQ(checkLosslessHeader(other), kFrameBadVersion) << "version " << version;
  }
}

}  // namespace
}  // namespace cclz::lossless
