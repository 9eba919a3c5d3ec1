// The split staged encoder's arithmetic (src/codec/lossless/encode_split.h; the kernel:
// encodeChunkSplit in encode_kernel.cu, CCLZ_LOSSLESS_ENCODE_WARPS = 2 or 4) on the CPU.
// Every whole chunk of the frames is encoded again the way the kernel's parts do it: each
// part's lanes cost only their own groups, the lanes' sizes and the parts' bit offsets are
// combined from the parts' packed costs, and each of the 32 * P segments is written with the
// kernel's LaneWriter rule (a word stored whole by the segment that reaches its end, zeros below
// that segment's first bit, the other segments' partial words OR-ed in afterwards). The block
// must equal the reference's byte for byte. No device needed; the GPU suite runs the kernel
// itself (tests/codec/CMakeLists.txt, the `split2.` and `split4.` registrations).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "codec/lossless/encode_split.h"
#include "codec/lossless/ref.h"
#include "support/data.h"
#include "support/frame_view.h"
#include "support/lossless_ref.h"
#include "support/tensors.h"

namespace cclz::test {
namespace {

using lossless::kBlockAlign;
using lossless::kBlockHeaderBytes;
using lossless::kGroup;
using namespace lossless;

constexpr uint32_t kChunk = kMaxChunkElems;  // only whole chunks are split
constexpr uint32_t kStageBytes = (kBlockHeaderBytes + kMaxChunkElems + 15) / 16 * 16;

// LaneWriter (encode_lane.cuh) on the CPU: the store phase (whole words, counted, so that
// two segments storing one word show up) and the finish phase (the partial last word OR-ed in).
struct SegmentWriter {
  std::vector<uint32_t>& words;
  std::vector<int>& stores;
  uint32_t word;
  uint64_t cur = 0;  // bits of the word being filled, zeros below the segment's first bit
  uint32_t fill;

  SegmentWriter(std::vector<uint32_t>& w, std::vector<int>& s, uint32_t bitPos)
      : words(w), stores(s), word(bitPos / 32), fill(bitPos % 32) {}
  void put(uint32_t value, uint32_t len) {
    cur |= static_cast<uint64_t>(value) << fill;
    fill += len;
    while (fill >= 32) {
      words.at(word) = static_cast<uint32_t>(cur);
      ++stores[word];
      cur >>= 32;
      fill -= 32;
      ++word;
    }
  }
  void finish() {
    if (cur) words.at(word) |= static_cast<uint32_t>(cur);
  }
};

// The symbol (docs/formats.md): bits 14..7 of bf16 and fp16, the exponent of fp32.
uint32_t v2Symbol(int dtype, uint32_t word) {
  return dtype == cclzFloat32 ? (word >> 23) & 0xFFu : (word >> 7) & 0xFFu;
}

struct SplitStats {
  int constant = 0, stored = 0, coded = 0, codedWithEscapes = 0;
};

// The kernel's block for one whole chunk of symbols with `parts` warps, as the replay builds it.
std::vector<uint8_t> splitBlock(int dtype, const uint8_t* symbols, uint32_t parts,
                                SplitStats& stats) {
  static const Codes codes = makeCodes();
  const int fam = family(dtype);
  const uint32_t offsets = familyOffsets(dtype);
  const uint32_t groups = splitGroupsPerPart(parts);
  auto symbolOfGroup = [&](uint32_t g, uint32_t i) { return uint32_t{symbols[g * kGroup + i]}; };

  // Each part's extremes, then the chunk's (what the parts exchange first).
  uint32_t top = 0, bottom = 255;
  for (uint32_t p = 0; p < parts; ++p) {
    uint32_t partTop = 0, partBottom = 255;
    for (uint32_t lane = 0; lane < kLanes; ++lane)
      for (uint32_t j = 0; j < groups; ++j)
        for (uint32_t i = 0; i < kGroup; ++i) {
          const uint32_t s = symbolOfGroup(splitGroup(lane, p, groups, j), i);
          partTop = std::max(partTop, s);
          partBottom = std::min(partBottom, s);
        }
    top = std::max(top, partTop);
    bottom = std::min(bottom, partBottom);
  }
  std::vector<uint8_t> block(kStageBytes, 0);
  if (top == bottom) {
    ++stats.constant;
    block[0] = kModeConstant;
    block[1] = static_cast<uint8_t>(top);
    block.resize(kBlockAlign);
    return block;
  }
  const bool escapes = top - bottom >= offsets;
  auto indexOf = [&](uint32_t s) { return std::min(top - s, offsets); };

  // Every thread's packed costs over its own groups (what the parts exchange second).
  std::vector<uint32_t> packed(parts * kLanes * 4, 0);
  auto packedAt = [&](uint32_t p, uint32_t lane) -> uint32_t* {
    return &packed[(p * kLanes + lane) * 4];
  };
  for (uint32_t p = 0; p < parts; ++p)
    for (uint32_t lane = 0; lane < kLanes; ++lane)
      for (uint32_t j = 0; j < groups; ++j)
        for (uint32_t i = 0; i < kGroup; ++i) {
          const uint32_t* c =
              codes.cost[fam][indexOf(symbolOfGroup(splitGroup(lane, p, groups, j), i))];
          uint32_t(&sum)[4] = *reinterpret_cast<uint32_t(*)[4]>(packedAt(p, lane));
          addPacked(sum, c[0], c[1], c[2], c[3]);
        }

  // Each part combines them: the lane's totals, and the parts before its own.
  std::vector<uint32_t> laneBits(kLanes), partOffset(parts * kLanes);
  uint32_t table = 0, best = 0;
  for (uint32_t p = 0; p < parts; ++p) {
    uint32_t totals[kLanes][4] = {}, before[kLanes][4] = {};
    for (uint32_t lane = 0; lane < kLanes; ++lane)
      for (uint32_t q = 0; q < parts; ++q) {
        const uint32_t* c = packedAt(q, lane);
        addPacked(totals[lane], c[0], c[1], c[2], c[3]);
        if (q < p) addPacked(before[lane], c[0], c[1], c[2], c[3]);
      }
    uint32_t partBest = 0xffffffffu, partTable = 0;
    for (uint32_t t = 0; t < kTables; ++t) {
      uint32_t sum = 0;
      for (uint32_t lane = 0; lane < kLanes; ++lane) sum += packedField(totals[lane], t);
      if (sum < partBest) partBest = sum, partTable = t;
    }
    if (p == 0) {
      table = partTable, best = partBest;
      for (uint32_t lane = 0; lane < kLanes; ++lane)
        laneBits[lane] = packedField(totals[lane], table);
    }
    EXPECT_EQ(partTable, table) << "the parts chose different codes";
    for (uint32_t lane = 0; lane < kLanes; ++lane) {
      partOffset[p * kLanes + lane] = packedField(before[lane], table);
      EXPECT_EQ(packedField(totals[lane], table), laneBits[lane]);
    }
  }
  const uint32_t base = *std::min_element(laneBits.begin(), laneBits.end());
  const uint32_t width = bitWidth(*std::max_element(laneBits.begin(), laneBits.end()) - base);
  const uint32_t coded = streamsOffset(width) + (best + 7) / 8;
  std::vector<uint32_t> words(kStageBytes / 4, 0);
  if (coded >= kBlockHeaderBytes + kChunk) {  // stored: each part writes its groups
    ++stats.stored;
    for (uint32_t p = 0; p < parts; ++p)
      for (uint32_t lane = 0; lane < kLanes; ++lane)
        for (uint32_t j = 0; j < groups; ++j) {
          const uint32_t g = splitGroup(lane, p, groups, j);
          std::memcpy(&words[1 + 2 * g], symbols + g * kGroup, kGroup);
        }
    std::memcpy(block.data(), words.data(), kStageBytes);
    block[0] = lossless::kModeStored;
    block.resize((kBlockHeaderBytes + kChunk + kBlockAlign - 1) / kBlockAlign * kBlockAlign);
    return block;
  }
  ++stats.coded;
  stats.codedWithEscapes += escapes;
  words[0] = lossless::kModeHuffman | ((table | (escapes ? kEscapeFlag : 0)) << 8) | (top << 16) |
             (width << 24);
  words[1] = base;
  for (uint32_t lane = 0; lane < kLanes && width; ++lane) {
    const uint32_t bit = 8 * lossless::kHeaderBytes + lane * width, delta = laneBits[lane] - base;
    words[bit / 32] |= delta << (bit % 32);
    if (bit % 32 + width > 32) words[bit / 32 + 1] |= delta >> (32 - bit % 32);
  }
  std::vector<int> stores(words.size(), 0);
  std::vector<SegmentWriter> writers;
  uint32_t prefix = 0, expectedStart = 8 * streamsOffset(width);
  for (uint32_t lane = 0; lane < kLanes; ++lane) {
    for (uint32_t p = 0; p < parts; ++p) {
      const uint32_t start = splitSegmentBit(width, prefix, partOffset[p * kLanes + lane]);
      EXPECT_EQ(start, expectedStart) << "segments must tile the streams: lane " << lane;
      writers.emplace_back(words, stores, start);
      SegmentWriter& w = writers.back();
      for (uint32_t j = 0; j < groups; ++j)
        for (uint32_t i = 0; i < kGroup; ++i) {
          const uint32_t s = symbolOfGroup(splitGroup(lane, p, groups, j), i);
          const uint32_t index = indexOf(s);
          const uint32_t code = codes.code[fam][table][index], len = code >> 16;
          const bool escape = index == offsets;
          w.put((code & 0xFFFFu) | (escape ? s << len : 0u), len + (escape ? kEscapeBits : 0u));
          expectedStart += len + (escape ? kEscapeBits : 0u);
        }
    }
    prefix += laneBits[lane];
  }
  EXPECT_EQ(expectedStart, 8 * streamsOffset(width) + best);
  for (size_t i = 0; i < stores.size(); ++i) EXPECT_LE(stores[i], 1) << "word " << i;
  for (SegmentWriter& w : writers) w.finish();  // after the barrier
  std::memcpy(block.data(), words.data(), kStageBytes);
  block.resize((coded + kBlockAlign - 1) / kBlockAlign * kBlockAlign);
  return block;
}

std::vector<uint8_t> encodeReference(int dtype, const std::vector<uint8_t>& input, uint64_t count) {
  return encodeRefFrame(dtype, input, count, kChunk);
}

// Every whole chunk of the input, split into 2 and 4 parts, against the reference's block.
SplitStats expectSplitMatches(int dtype, const std::vector<uint8_t>& input, uint64_t count) {
  const std::vector<uint8_t> frame = encodeReference(dtype, input, count);
  const FrameView v = viewFrame(frame.data());
  const size_t esize = elementSize(dtype);
  SplitStats stats;
  std::vector<uint8_t> symbols(kChunk);
  for (uint32_t k = 0; (k + 1) * uint64_t{kChunk} <= count; ++k) {
    for (uint32_t i = 0; i < kChunk; ++i) {
      uint32_t word = 0;
      std::memcpy(&word, &input[(uint64_t{k} * kChunk + i) * esize], esize);
      symbols[i] = static_cast<uint8_t>(v2Symbol(dtype, word));
    }
    const BlockView b = viewBlock(frame.data(), v, k);
    const std::vector<uint8_t> ref(frame.begin() + b.offset, frame.begin() + b.offset + b.bytes);
    for (uint32_t parts : {2u, 4u}) {
      SplitStats s;
      const std::vector<uint8_t> mine = splitBlock(dtype, symbols.data(), parts, s);
      EXPECT_EQ(mine.size(), ref.size()) << "chunk " << k << ", " << parts << " parts";
      if (mine.size() != ref.size()) continue;
      const auto at = std::mismatch(mine.begin(), mine.end(), ref.begin());
      EXPECT_TRUE(at.first == mine.end())
          << "chunk " << k << ", " << parts << " parts: differs at block byte "
          << (at.first - mine.begin());
      if (parts == 2) {
        stats.constant += s.constant;
        stats.stored += s.stored;
        stats.coded += s.coded;
        stats.codedWithEscapes += s.codedWithEscapes;
      }
    }
  }
  return stats;
}

TEST(LosslessEncodeSplit, MatchesReferenceOnEveryDataKind) {
  const uint64_t count = uint64_t{kChunk} * 6 + 1000;  // the short last chunk is not split
  SplitStats all;
  for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32})
    for (DataKind kind : allDataKinds()) {
      SCOPED_TRACE(std::string(dtypeLabel(dtype)) + " " + dataKindLabel(kind));
      const std::vector<uint8_t> input =
          makeData(kind, dtype, count, kChunk, mixSeed(static_cast<uint64_t>(kind), dtype, 51));
      const SplitStats s = expectSplitMatches(dtype, input, count);
      all.constant += s.constant;
      all.stored += s.stored;
      all.coded += s.coded;
      all.codedWithEscapes += s.codedWithEscapes;
    }
  EXPECT_GT(all.constant, 0);
  EXPECT_GT(all.stored, 0);
  EXPECT_GT(all.coded, all.codedWithEscapes);
  EXPECT_GT(all.codedWithEscapes, 0);
}

// Escapes in every chunk (a zero every 61 elements), under a normal and a low top.
TEST(LosslessEncodeSplit, MatchesReferenceWithEscapes) {
  const uint64_t count = uint64_t{kChunk} * 4;
  for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32})
    for (uint32_t down : {0u, 40u}) {
      SCOPED_TRACE(std::string(dtypeLabel(dtype)) + " down " + std::to_string(down));
      std::vector<uint8_t> input =
          makeData(DataKind::kGauss1, dtype, count, kChunk, mixSeed(dtype, 61, down));
      const size_t esize = elementSize(dtype);
      const int shift = dtype == cclzFloat32 ? 23 : 7;
      for (uint64_t i = 0; i < count; ++i) {
        uint32_t bits = 0;
        std::memcpy(&bits, &input[i * esize], esize);
        const uint32_t sym = (bits >> shift) & 0xFFu;
        bits = (bits & ~(0xFFu << shift)) | ((sym > down ? sym - down : 0) << shift);
        if (i % 61 == 0) bits = 0;
        std::memcpy(&input[i * esize], &bits, esize);
      }
      const SplitStats s = expectSplitMatches(dtype, input, count);
      EXPECT_EQ(s.codedWithEscapes, 4);
    }
}

TEST(LosslessEncodeSplit, MatchesReferenceOnRealTensors) {
  const std::string dir = realTensorDir();
  if (dir.empty()) GTEST_SKIP() << "no real tensors: set CCLZ_SHARED_DATA";
  for (const RealTensor& t : loadRealTensors(dir)) {
    SCOPED_TRACE(t.name);
    const std::vector<uint8_t> input = bf16Bytes(t);
    expectSplitMatches(cclzBfloat16, input, t.values.size());
  }
}

}  // namespace
}  // namespace cclz::test
