// The scalar pieces of the lossless format shared by the reference and the kernels
// (src/codec/lossless/format.h): element splitting, layout, streams, code construction.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <queue>
#include <random>
#include <vector>

#include "codec/lossless/elements.h"
#include "codec/lossless/format.h"
#include "support/data.h"

namespace cclz::lossless {
namespace {

// Every 16-bit word, and a sweep of 32-bit words: split then join gives the word back, and the
// symbol is the field the spec names (checked against the tests' own derivation).
TEST(LosslessFormat, SplitJoinEveryBf16AndFp16Word) {
  for (uint32_t w = 0; w < 65536; ++w) {
    const auto v = static_cast<uint16_t>(w);
    ASSERT_EQ(bf16Symbol(v), test::symbolOf(cclzBfloat16, v));
    ASSERT_EQ(bf16Join(bf16Symbol(v), bf16PlaneA(v)), v);
    ASSERT_EQ(fp16Symbol(v), test::symbolOf(cclzFloat16, v));
    ASSERT_EQ(fp16Join(fp16Symbol(v), fp16PlaneA(v)), v);
    ASSERT_LT(bf16PlaneA(v), 256u);
    ASSERT_LT(fp16PlaneA(v), 256u);
  }
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
      for (uint32_t chunk : {1024u, 16384u, 65536u}) {
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

TEST(LosslessFormat, StreamsPartitionTheChunk) {
  for (uint32_t n : {1u, 7u, 8u, 9u, 63u, 64u, 65u, 1000u, 1024u, 4095u, 65536u}) {
    for (uint32_t streams : {1u, 2u, 16u, 64u, 256u, 1024u}) {
      uint64_t total = 0;
      for (uint32_t s = 0; s < streams; ++s) {
        // Count by walking the groups, as the format defines it.
        uint32_t expected = 0;
        for (uint32_t g = s; g * kGroup < n; g += streams)
          expected += std::min<uint32_t>(kGroup, n - g * kGroup);
        EXPECT_EQ(streamSymbols(n, streams, s), expected)
            << "n " << n << " S " << streams << " s " << s;
        total += streamSymbols(n, streams, s);
      }
      EXPECT_EQ(total, n);
    }
  }
}

TEST(LosslessFormat, ValidParamsBounds) {
  EXPECT_TRUE(validParams({1024, 4, 8}));
  EXPECT_TRUE(validParams({65536, 4, 12}));   // 4096 symbols per stream
  EXPECT_TRUE(validParams({65536, 10, 11}));  // 64 per stream
  EXPECT_FALSE(validParams({65536, 3, 11}));  // 8192 per stream
  EXPECT_FALSE(validParams({1024, 5, 11}));   // 32 per stream
  EXPECT_FALSE(validParams({512, 0, 11}));
  EXPECT_FALSE(validParams({131072, 8, 11}));
  EXPECT_FALSE(validParams({3072, 4, 11}));
  EXPECT_FALSE(validParams({0, 0, 11}));
  EXPECT_FALSE(validParams({1024, 4, 7}));
  EXPECT_FALSE(validParams({1024, 4, 13}));
  EXPECT_FALSE(validParams({1024, 40, 11}));
}

// Optimal code cost from a textbook heap-based Huffman construction.
uint64_t huffmanCost(const std::vector<uint32_t>& weights) {
  std::priority_queue<uint64_t, std::vector<uint64_t>, std::greater<>> heap(weights.begin(),
                                                                            weights.end());
  uint64_t cost = 0;
  while (heap.size() > 1) {
    const uint64_t a = heap.top();
    heap.pop();
    const uint64_t b = heap.top();
    heap.pop();
    cost += a + b;
    heap.push(a + b);
  }
  return cost;
}

TEST(LosslessFormat, InPlaceHuffmanIsOptimal) {
  std::mt19937_64 rng(2);
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 255);
    std::vector<uint32_t> w(n);
    for (auto& x : w) x = 1 + static_cast<uint32_t>(rng() % (trial % 2 ? 10 : 100000));
    std::sort(w.begin(), w.end());
    std::vector<uint32_t> lengths(w);
    huffmanLengthsInPlace(lengths.data(), n);
    uint64_t cost = 0, kraft = 0;  // kraft in units of 2^-32
    for (int i = 0; i < n; ++i) {
      ASSERT_GE(lengths[i], 1u);
      ASSERT_LT(lengths[i], 32u);
      if (i) {
        ASSERT_LE(lengths[i], lengths[i - 1]) << "lengths do not increase with weight";
      }
      cost += uint64_t{w[i]} * lengths[i];
      kraft += uint64_t{1} << (32 - lengths[i]);
    }
    EXPECT_EQ(kraft, uint64_t{1} << 32) << "a full binary tree";
    EXPECT_EQ(cost, huffmanCost(w));
  }
}

// Code lengths for a histogram, through codeLengthsFromRanked as the encoder calls it.
std::vector<uint8_t> lengthsFor(const std::vector<uint32_t>& histogram, int maxLen) {
  std::vector<uint8_t> ranked;
  for (int s = 0; s < 256; ++s)
    if (histogram[s]) ranked.push_back(static_cast<uint8_t>(s));
  std::sort(ranked.begin(), ranked.end(),
            [&](uint8_t a, uint8_t b) { return rankBefore(histogram[a], a, histogram[b], b); });
  std::vector<uint32_t> weights(256);
  std::vector<uint8_t> length(256, 0);
  codeLengthsFromRanked(ranked.data(), histogram.data(), static_cast<int>(ranked.size()), maxLen,
                        weights.data(), length.data());
  return length;
}

TEST(LosslessFormat, LimitedLengthsFormAPrefixCode) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 3000; ++trial) {
    const int maxLen = 8 + trial % 5;
    std::vector<uint32_t> histogram(256, 0);
    const int present = 1 + static_cast<int>(rng() % 256);
    if (trial % 3 == 0) {
      // Fibonacci-like counts: unbounded Huffman lengths reach present - 1.
      uint32_t a = 1, b = 1;
      for (int k = 0; k < std::min(present, 40); ++k) {
        histogram[k] = a;
        const uint32_t next = a + b;
        a = b;
        b = next;
      }
    } else {
      for (int k = 0; k < present; ++k)
        histogram[rng() % 256] = 1 + static_cast<uint32_t>(rng() % 65536);
    }
    const std::vector<uint8_t> length = lengthsFor(histogram, maxLen);
    uint64_t kraft = 0;
    for (int s = 0; s < 256; ++s) {
      if (!histogram[s]) {
        ASSERT_EQ(length[s], 0) << "absent symbol " << s << " got a code";
        continue;
      }
      ASSERT_GE(length[s], 1);
      ASSERT_LE(length[s], maxLen);
      kraft += uint64_t{1} << (maxLen - length[s]);
    }
    ASSERT_LE(kraft, uint64_t{1} << maxLen) << "trial " << trial;
    // A heavier symbol never gets a longer code than a lighter one.
    for (int s = 0; s < 256; ++s)
      for (int t = 0; t < 256; ++t)
        if (histogram[s] && histogram[t] && histogram[s] > histogram[t]) {
          ASSERT_LE(length[s], length[t]);
        }
  }
}

// The decode table built from canonical codes inverts the codes.
TEST(LosslessFormat, CanonicalCodesDecode) {
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 300; ++trial) {
    const int maxLen = 8 + trial % 5;
    std::vector<uint32_t> histogram(256, 0);
    for (int k = 0; k < 1 + static_cast<int>(rng() % 200); ++k)
      histogram[rng() % 256] = 1 + static_cast<uint32_t>(rng() % 1000);
    const std::vector<uint8_t> length = lengthsFor(histogram, maxLen);
    int first = 255, last = 0;
    for (int s = 0; s < 256; ++s)
      if (length[s]) first = std::min(first, s), last = std::max(last, s);
    uint16_t code[256] = {};
    canonicalCodes(length.data(), first, last - first, code);
    std::vector<uint16_t> table(1u << maxLen);
    ASSERT_TRUE(buildDecodeTable(length.data(), first, last - first, maxLen, table.data()));
    for (int s = first; s <= last; ++s) {
      if (!length[s]) continue;
      // Any continuation bits after the code decode to the same symbol and length.
      const uint32_t pad = static_cast<uint32_t>(rng()) << length[s];
      const uint16_t entry = table[(code[s] | pad) & ((1u << maxLen) - 1)];
      ASSERT_EQ(entry & 0xFF, s);
      ASSERT_EQ(entry >> 8, length[s]);
    }
  }
}

TEST(LosslessFormat, DecodeTableRejectsBadLengths) {
  uint8_t length[256] = {};
  std::vector<uint16_t> table(1u << 11);
  EXPECT_FALSE(buildDecodeTable(length, 0, 10, 11, table.data())) << "no code at all";
  length[0] = length[1] = length[2] = 1;
  EXPECT_FALSE(buildDecodeTable(length, 0, 2, 11, table.data())) << "Kraft sum above 1";
  length[2] = 0;
  EXPECT_TRUE(buildDecodeTable(length, 0, 2, 11, table.data()));
  length[0] = 1;
  length[1] = 0;
  EXPECT_TRUE(buildDecodeTable(length, 0, 2, 11, table.data())) << "an incomplete code is allowed";
}

}  // namespace
}  // namespace cclz::lossless
