// The staged decoder's pair-window arithmetic (src/codec/lossless/window.h) on the CPU. The
// kernel's loop (src/codec/lossless/decode_window.cuh) is replayed here with the same
// functions and the same shared-memory addressing (a table at a nonzero multiple of 2 KiB, the
// stage after the tables, swizzled in 128-byte rows where the kernel swizzles it, bit positions
// counted from the start of "shared memory"), on every
// whole coded chunk of the frames, against decodeRef: the same elements whenever the
// reference accepts the frame, and a lane that fails its check exactly when the reference
// rejects it (lane stream bits flipped, the escape flag toggled, the top symbol moved by one).
// No device needed; the device runs the same functions in the GPU suite.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/lossless/ref.h"
#include "codec/lossless/window.h"
#include "support/data.h"
#include "support/frame_view.h"
#include "support/lossless_ref.h"
#include "support/tensors.h"

namespace cclz::test {
namespace {

using lossless::kBlockHeaderBytes;
using lossless::kGroup;
using namespace lossless;
using namespace lossless::window;

constexpr uint32_t kChunk = kMaxChunkElems;  // whole chunks only take the window loop
constexpr uint32_t kGroupsPerLane = kChunk / (kGroup * kLanes);  // 16
// The kernel's layout (decode_kernel.cu, kWindow): four 2 KiB tables, then the stages, in
// whole 128-byte rows. Here the chunk's table sits at the second table slot, so the OR in
// entryAtWindow adds a nonzero offset, and the stage at the second stage slot, so its rows'
// swizzle (swizzledStageOffset) does not start at 0; the stage is followed by room for a corrupt
// lane's over-read (plane A in the kernel).
constexpr uint32_t kTableAt = 2048;
constexpr uint32_t kStage = (kBlockHeaderBytes + kMaxChunkElems + 15 + 127) / 128 * 128;
constexpr uint32_t kStageAt = 4 * 2048 + kStage;
constexpr uint32_t kSharedBytes = kStageAt + kStage + kChunk;  // the stage, then "plane A"

uint32_t readLE32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

template <int D>
using JoinOf = PairJoiner<D == cclzFloat16 ? cclzBfloat16 : D>;

// The window loop's elements for whole coded chunks, chunk by chunk; `chunkOk[k]` false where a
// lane of chunk k failed its check. Chunks that are not whole and coded keep ok = true and no
// elements (the lane loop decodes them).
struct WindowResult {
  std::vector<bool> windowed, chunkOk;
  std::vector<uint8_t> out;  // the frame's elements, filled for windowed chunks only
};

template <int D>
WindowResult decodeWithWindow(const std::vector<uint8_t>& frame, uint64_t count) {
  using Join = JoinOf<D>;
  constexpr bool kSwizzled = swizzledStage(D);  // the kernel's stage for D
  constexpr size_t kElem = D == cclzFloat32 ? 4 : 2;
  static const Codes codes = makeCodes();
  const FrameView v = viewFrame(frame.data());
  WindowResult r;
  r.windowed.assign(v.numChunks, false);
  r.chunkOk.assign(v.numChunks, true);
  r.out.assign(count * kElem, 0);
  std::vector<uint32_t> sharedWords(kSharedBytes / 4);
  const uint8_t* shared = reinterpret_cast<const uint8_t*>(sharedWords.data());
  for (uint32_t k = 0; k < v.numChunks; ++k) {
    if ((k + 1) * uint64_t{kChunk} > count) continue;
    const uint64_t begin = k ? v.chunkEnds[k - 1] : 0, blockBytes = v.chunkEnds[k] - begin;
    const uint8_t* block = frame.data() + v.blocksOffset + begin;
    const uint32_t header = readLE32(block);
    if ((header & 0xFFu) != 1) continue;  // stored or constant: the lane loop's
    r.windowed[k] = true;
    const uint32_t tableIndex = (header >> 8) & 7u, top = (header >> 16) & 0xFFu;
    const uint32_t width = header >> 24, base = readLE32(block + 4) & 0xFFFFu;
    const bool escapes = (header >> 8) & kEscapeFlag;
    std::fill(sharedWords.begin(), sharedWords.end(), 0u);
    for (uint32_t i = 0; i < blockBytes; i += 16) {  // as the kernel stages a whole chunk
      const uint32_t at = kSwizzled ? swizzledStageOffset(kStageAt + i) : kStageAt + i;
      std::memcpy(reinterpret_cast<uint8_t*>(sharedWords.data()) + at, block + i, 16);
    }
    std::memcpy(reinterpret_cast<uint8_t*>(sharedWords.data()) + kTableAt,
                codes.decode[family(D)][tableIndex], 2u << kCodeBits);
    const uint32_t topWord = ((top << 8) | 0xFFu) * 0x00010001u;
    uint32_t start = 8 * streamsOffset(width);
    for (uint32_t lane = 0; lane < kLanes; ++lane) {
      uint32_t laneBits = base;
      if (width) {
        const uint64_t bit = 8 * lossless::kHeaderBytes + uint64_t{lane} * width;
        uint64_t two = 0;
        std::memcpy(&two, block + bit / 8, 4);  // 16-bit deltas at most: 4 bytes hold one
        laneBits += static_cast<uint32_t>(two >> (bit % 8)) & ((1u << width) - 1);
      }
      const uint32_t first = 8 * kStageAt + start - 1;
      uint32_t p = first, check = 0;
      StageWords<false> words = stageWordsAt<false, kSwizzled>(shared, first);
      StageWords<true> wordsEscapes = stageWordsAt<true, kSwizzled>(shared, first);
      for (uint32_t j = 0; j < kGroupsPerLane; ++j) {
        const uint64_t g = uint64_t{k} * kChunk / kGroup + lane + kLanes * j;  // frame group
        uint32_t y[4], x[4];
        for (int q = 0; q < 4; ++q)
          y[q] = escapes
                     ? decodePair<true, kSwizzled>(shared, kTableAt, topWord, p, wordsEscapes, x[q])
                     : decodePair<false, kSwizzled>(shared, kTableAt, topWord, p, words, x[q]);
        check = max3Halves(check, x[0], x[1]);
        check = max3Halves(check, x[2], x[3]);
        uint32_t planeA[2] = {}, planeB[4] = {};
        std::memcpy(planeA, frame.data() + v.planeAOffset + g * kGroup, 8);
        if (D == cclzFloat32) std::memcpy(planeB, frame.data() + v.planeBOffset + g * 16, 16);
        uint32_t words[Join::kWords];
        Join::join(y, planeA, planeB, words);
        std::memcpy(r.out.data() + g * kGroup * kElem, words, sizeof(words));
      }
      if (!laneOk(D, escapes, top, p - first, laneBits, check)) r.chunkOk[k] = false;
      start += laneBits;
    }
  }
  return r;
}

WindowResult decodeWithWindow(int dtype, const std::vector<uint8_t>& frame, uint64_t count) {
  switch (dtype) {
    case cclzBfloat16:
      return decodeWithWindow<cclzBfloat16>(frame, count);
    case cclzFloat16:
      return decodeWithWindow<cclzFloat16>(frame, count);
    default:
      return decodeWithWindow<cclzFloat32>(frame, count);
  }
}

// The window loop against decodeRef on one frame. Returns the reference's verdict.
uint32_t expectWindowAgrees(int dtype, const std::vector<uint8_t>& frame, uint64_t count,
                            const std::string& what) {
  const size_t esize = elementSize(dtype);
  std::vector<uint8_t> ref(count * esize);
  const uint32_t verdict =
      lossless::decodeRef(frame.data(), frame.size(), dtype, count, ref.data());
  const WindowResult w = decodeWithWindow(dtype, frame, count);
  bool allOk = true;
  for (bool ok : w.chunkOk) allOk &= ok;
  EXPECT_EQ(allOk, verdict == kFrameOk) << what << ": the reference says " << verdict;
  if (verdict == kFrameOk) {
    for (size_t k = 0; k < w.windowed.size(); ++k) {
      if (!w.windowed[k]) continue;
      const size_t at = k * kChunk * esize;
      EXPECT_EQ(firstMismatch(w.out.data() + at, ref.data() + at, kChunk * esize), SIZE_MAX)
          << what << ", chunk " << k;
    }
  }
  return verdict;
}

std::vector<uint8_t> encodeReference(int dtype, const std::vector<uint8_t>& input, uint64_t count) {
  return encodeRefFrame(dtype, input, count, kChunk);
}

// Flips, toggles and moves what the lane checks depend on, in whole coded chunks, and expects
// the window loop to agree with the reference each time.
void corruptAndCompare(int dtype, const std::vector<uint8_t>& frame, uint64_t count,
                       uint64_t seed) {
  const FrameView v = viewFrame(frame.data());
  std::vector<uint32_t> coded;
  for (uint32_t k = 0; (k + 1) * uint64_t{kChunk} <= count; ++k)
    if (viewBlock(frame.data(), v, k).mode == 1) coded.push_back(k);
  if (coded.empty()) return;
  std::mt19937_64 rng(seed);
  int rejected = 0;
  for (int trial = 0; trial < 48; ++trial) {
    std::vector<uint8_t> bad(frame);
    const BlockView b = viewBlock(bad.data(), v, coded[rng() % coded.size()]);
    uint8_t* block = &bad[b.offset];
    const uint32_t streams = 8 + 4 * block[3];
    switch (trial % 4) {
      case 0:
      case 1: {  // a bit of a lane stream
        const uint64_t bit = 8 * streams + rng() % (8 * (b.bytes - streams));
        block[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
        break;
      }
      case 2:  // the escape flag
        block[1] ^= 0x80;
        break;
      default:  // the top symbol, one up or one down
        block[2] = static_cast<uint8_t>(block[2] + (rng() % 2 ? 1 : 255));
    }
    rejected += expectWindowAgrees(dtype, bad, count, "trial " + std::to_string(trial)) != kFrameOk;
  }
  EXPECT_GT(rejected, 4) << "the corruptions should mostly be caught";
}

TEST(LosslessWindow, MatchesReferenceOnEveryDataKind) {
  const uint64_t count = uint64_t{kChunk} * 6 + 1000;  // whole chunks and a short last one
  for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32})
    for (DataKind kind : allDataKinds()) {
      SCOPED_TRACE(std::string(dtypeLabel(dtype)) + " " + dataKindLabel(kind));
      const std::vector<uint8_t> input =
          makeData(kind, dtype, count, kChunk, mixSeed(static_cast<uint64_t>(kind), dtype, 31));
      const std::vector<uint8_t> frame = encodeReference(dtype, input, count);
      ASSERT_EQ(expectWindowAgrees(dtype, frame, count, "as encoded"), kFrameOk);
      corruptAndCompare(dtype, frame, count, mixSeed(static_cast<uint64_t>(kind), dtype, 32));
    }
}

// Escapes under a top below 128 (symbols shifted down by 40, zeros among them): an escape's
// offset byte 0x80 is subtracted from a smaller top, and the borrow must stop short of the
// neighbouring symbol (window.h, decodePair).
TEST(LosslessWindow, EscapesUnderALowTop) {
  const uint64_t count = uint64_t{kChunk} * 4;
  for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32}) {
    SCOPED_TRACE(dtypeLabel(dtype));
    std::vector<uint8_t> input =
        makeData(DataKind::kGauss1, dtype, count, kChunk, mixSeed(dtype, 41));
    const size_t esize = elementSize(dtype);
    const int shift = dtype == cclzFloat32 ? 23 : 7;
    for (uint64_t i = 0; i < count; ++i) {
      uint32_t bits = 0;
      std::memcpy(&bits, &input[i * esize], esize);
      const uint32_t sym = (bits >> shift) & 0xFFu;
      bits = (bits & ~(0xFFu << shift)) | ((sym > 40 ? sym - 40 : 0) << shift);
      if (i % 61 == 0) bits = 0;
      std::memcpy(&input[i * esize], &bits, esize);
    }
    const std::vector<uint8_t> frame = encodeReference(dtype, input, count);
    const FrameView v = viewFrame(frame.data());
    const BlockView b = viewBlock(frame.data(), v, 0);
    ASSERT_EQ(b.mode, 1);
    EXPECT_TRUE(frame[b.offset + 1] & 0x80) << "expected escapes";
    EXPECT_LT(frame[b.offset + 2], 128) << "expected a top below 128";
    ASSERT_EQ(expectWindowAgrees(dtype, frame, count, "as encoded"), kFrameOk);
    corruptAndCompare(dtype, frame, count, mixSeed(dtype, 42));
  }
}

// The stage's swizzle keeps each 128-byte row's bytes in that row (a row never holds two warps'
// bytes in the kernel, whose stages are whole rows), keeps 16-byte units whole (the staging copy
// moves 16 bytes), and places no two bytes at one offset.
TEST(LosslessWindow, StageSwizzleKeepsRowsAndUnits) {
  std::vector<bool> taken(4 * 128, false);
  for (uint32_t at = 0; at < 4 * 128; ++at) {
    const uint32_t to = swizzledStageOffset(at);
    ASSERT_EQ(to / 128, at / 128) << at;
    ASSERT_EQ(to % 16, at % 16) << at;
    ASSERT_EQ(to / 16, swizzledStageOffset(at - at % 16) / 16) << at;
    ASSERT_FALSE(taken[to]) << at;
    taken[to] = true;
  }
  // Rows 1..7 move their units: the swizzle is not the identity there.
  for (uint32_t row = 1; row < 8; ++row) EXPECT_NE(swizzledStageOffset(128 * row), 128 * row);
}

// The real tensors (bf16), where small gradients give low tops with escapes.
TEST(LosslessWindow, MatchesReferenceOnRealTensors) {
  const std::string dir = realTensorDir();
  if (dir.empty()) GTEST_SKIP() << "no real tensors: set CCLZ_SHARED_DATA";
  for (const RealTensor& t : loadRealTensors(dir)) {
    SCOPED_TRACE(t.name);
    const std::vector<uint8_t> input = bf16Bytes(t);
    const std::vector<uint8_t> frame = encodeReference(cclzBfloat16, input, t.values.size());
    ASSERT_EQ(expectWindowAgrees(cclzBfloat16, frame, t.values.size(), "as encoded"), kFrameOk);
  }
}

}  // namespace
}  // namespace cclz::test
