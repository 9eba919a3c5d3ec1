// Corrupt, truncated and mismatched lossless frames (DESIGN.md: a decoder validates the header
// and every offset before it reads; bad input returns an error and never reads or writes out of
// bounds). Outputs are guarded; run under CCLZ_SANITIZE=ON to check the reads too.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "codec/lossless/ref.h"
#include "codec/none/ref.h"
#include "support/codec_handle.h"
#include "support/configs.h"
#include "support/data.h"
#include "support/frame_view.h"
#include "support/guarded_buffer.h"

namespace cclz::test {
namespace {

// A valid frame and what it encodes. Gaussian data, so every full chunk is coded, with a short
// last chunk; plus specials so that some blocks are far from uniform.
struct ValidFrame {
  int dtype;
  size_t count;
  lossless::Params params;
  std::vector<uint8_t> input;
  std::vector<uint8_t> bytes;  // exactly the frame
};

ValidFrame makeFrame(int dtype, const CodecSetup& setup, size_t count, DataKind kind) {
  ValidFrame f{dtype, count, setup.params(), {}, {}};
  f.input = makeData(kind, dtype, count, f.params.chunkElems, mixSeed(7, dtype, count));
  f.bytes.resize(lossless::maxEncodedBytes(f.params, dtype, count));
  f.bytes.resize(
      lossless::encodeRef(f.params, dtype, f.input.data(), count, f.bytes.data(), f.bytes.size()));
  return f;
}

// Decodes `frame` as (dtype, count) into a guarded buffer of exactly count elements; checks the
// guards. Returns the decoder's FrameError.
uint32_t decodeGuarded(const std::vector<uint8_t>& frame, size_t srcBytes, int dtype, size_t count,
                       std::vector<uint8_t>* decoded = nullptr) {
  GuardedBuffer out(count * elementSize(dtype));
  const uint32_t err = lossless::decodeRef(frame.data(), srcBytes, dtype, count, out.data());
  EXPECT_TRUE(out.guardsIntact()) << "the decoder wrote outside its output";
  if (decoded) decoded->assign(out.data(), out.data() + out.size());
  return err;
}

using CorruptParam = std::tuple<int, CodecSetup>;

class LosslessCorrupt : public testing::TestWithParam<CorruptParam> {
 protected:
  void SetUp() override {
    const auto& [dtype, setup] = GetParam();
    // 3 chunks and a bit of the 1024-element configuration; one short chunk of the others.
    frame_ = makeFrame(dtype, setup, 3 * 1024 + 517, DataKind::kGauss1);
    ASSERT_EQ(decodeGuarded(frame_.bytes, frame_.bytes.size(), dtype, frame_.count), kFrameOk);
    codec_ = makeCodec(setup.apiConfig());
    ASSERT_TRUE(codec_);
  }

  cclzResult_t decodeApi(const std::vector<uint8_t>& frame, size_t srcBytes, size_t count,
                         int dtype) {
    GuardedBuffer out(count * elementSize(dtype));
    const cclzResult_t r = cclzDecodeHost(codec_.get(), frame.data(), srcBytes, out.data(), count,
                                          static_cast<cclzDataType_t>(dtype));
    EXPECT_TRUE(out.guardsIntact());
    return r;
  }

  ValidFrame frame_;
  CodecPtr codec_;
};

TEST_P(LosslessCorrupt, EveryTruncationIsRejected) {
  const size_t size = frame_.bytes.size();
  for (size_t len = 0; len < size; ++len) {
    ASSERT_NE(decodeGuarded(frame_.bytes, len, frame_.dtype, frame_.count), kFrameOk)
        << "truncated to " << len << " of " << size << " bytes";
    ASSERT_EQ(decodeApi(frame_.bytes, len, frame_.count, frame_.dtype), cclzCorruptFrame)
        << "truncated to " << len;
  }
  EXPECT_STRNE(cclzGetLastError(nullptr), "");
}

// Truncation that also rewrites frameBytes (and the checksum) to match: the header is valid, so
// only the chunk table and the block checks stand between the decoder and the missing bytes.
TEST_P(LosslessCorrupt, TruncationWithConsistentHeaderIsRejected) {
  const size_t size = frame_.bytes.size();
  for (size_t len = kHeaderBytes; len < size; ++len) {
    std::vector<uint8_t> cut(frame_.bytes.begin(), frame_.bytes.begin() + len);
    writeLE<uint64_t>(cut.data() + kOffFrameBytes, len);
    fixChecksum(cut.data());
    ASSERT_NE(decodeGuarded(cut, cut.size(), frame_.dtype, frame_.count), kFrameOk)
        << "cut to " << len << " of " << size;
  }
}

TEST_P(LosslessCorrupt, EveryHeaderByteIsChecked) {
  for (size_t i = 0; i < kHeaderBytes; ++i) {
    for (uint8_t flip : {0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF}) {
      std::vector<uint8_t> bad = frame_.bytes;
      bad[i] ^= flip;
      ASSERT_NE(decodeGuarded(bad, bad.size(), frame_.dtype, frame_.count), kFrameOk)
          << "byte " << i << " ^ " << int{flip};
      ASSERT_EQ(decodeApi(bad, bad.size(), frame_.count, frame_.dtype), cclzCorruptFrame);
    }
  }
}

// Random corruption of the chunk table, the planes and the blocks: an error or a decode, never
// a stray access. Under ASan this shows that every read stays inside the frame.
TEST_P(LosslessCorrupt, RandomCorruptionStaysInBounds) {
  const FrameView v = viewFrame(frame_.bytes.data());
  const size_t size = frame_.bytes.size();
  std::mt19937_64 rng(mixSeed(11, frame_.dtype, v.chunkElems));
  int rejected = 0;
  const int kTrials = 1500;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<uint8_t> bad = frame_.bytes;
    // A third of the trials aim at the chunk table, a third at block headers, a third anywhere.
    const int edits = 1 + static_cast<int>(rng() % 6);
    for (int e = 0; e < edits; ++e) {
      size_t at;
      const int target = trial % 3;
      if (target == 0) {
        at = kHeaderBytes + rng() % (8 * v.numChunks);
      } else if (target == 1) {
        const uint32_t k = static_cast<uint32_t>(rng() % v.numChunks);
        at = v.blocksOffset + (k ? v.chunkEnds[k - 1] : 0) + rng() % 64;  // a block's header
      } else {
        at = kHeaderBytes + rng() % (size - kHeaderBytes);
      }
      at = std::min(at, size - 1);
      bad[at] = rng() % 4 == 0 ? static_cast<uint8_t>(bad[at] ^ (1u << (rng() % 8)))
                               : static_cast<uint8_t>(rng());
    }
    const uint32_t err = decodeGuarded(bad, bad.size(), frame_.dtype, frame_.count);
    ASSERT_LT(err, static_cast<uint32_t>(kFrameNumErrors));
    rejected += err != kFrameOk;
    if (testing::Test::HasFailure()) FAIL() << "trial " << trial;
  }
  // Most corruptions of tables and block headers are caught; the count shows the test bites.
  EXPECT_GT(rejected, kTrials / 3);
  std::printf("rejected %d of %d corrupted frames\n", rejected, kTrials);
}

// Chunk-table entries set to each boundary value in turn.
TEST_P(LosslessCorrupt, ChunkTableBoundariesAreRejected) {
  const FrameView v = viewFrame(frame_.bytes.data());
  const uint64_t blocksBytes = v.frameBytes - v.blocksOffset;
  for (uint32_t k = 0; k < v.numChunks; ++k) {
    for (uint64_t value :
         {uint64_t{0}, v.chunkEnds[k] - 16, v.chunkEnds[k] + 16, v.chunkEnds[k] + 1,
          blocksBytes + 16, blocksBytes + 1, ~uint64_t{0}, uint64_t{1} << 63, ~uint64_t{0} - 15}) {
      if (value == v.chunkEnds[k]) continue;
      std::vector<uint8_t> bad = frame_.bytes;
      writeLE<uint64_t>(bad.data() + kHeaderBytes + 8 * k, value);
      ASSERT_NE(decodeGuarded(bad, bad.size(), frame_.dtype, frame_.count), kFrameOk)
          << "chunk " << k << " end " << value;
    }
  }
}

TEST_P(LosslessCorrupt, MismatchedCallIsRejected) {
  const size_t n = frame_.count;
  const int dtype = frame_.dtype;
  EXPECT_EQ(decodeGuarded(frame_.bytes, frame_.bytes.size(), dtype, n - 1), kFrameMismatch);
  EXPECT_EQ(decodeGuarded(frame_.bytes, frame_.bytes.size(), dtype, n + 1), kFrameMismatch);
  EXPECT_EQ(decodeGuarded(frame_.bytes, frame_.bytes.size(), dtype, 0), kFrameMismatch);
  for (int other : losslessDtypes()) {
    if (other == dtype) continue;
    EXPECT_EQ(decodeGuarded(frame_.bytes, frame_.bytes.size(), other, n), kFrameMismatch);
    EXPECT_EQ(decodeApi(frame_.bytes, frame_.bytes.size(), n, other), cclzCorruptFrame);
  }
  EXPECT_EQ(decodeApi(frame_.bytes, frame_.bytes.size(), n - 1, dtype), cclzCorruptFrame);
  EXPECT_EQ(decodeApi(frame_.bytes, frame_.bytes.size(), n + 1, dtype), cclzCorruptFrame);

  // A none frame of the same data is not a lossless frame, and the other way round.
  std::vector<uint8_t> noneFrame(none::maxEncodedBytes(dtype, n));
  none::encodeRef(dtype, frame_.input.data(), n, noneFrame.data(), noneFrame.size());
  EXPECT_EQ(decodeGuarded(noneFrame, noneFrame.size(), dtype, n), kFrameMismatch);
  GuardedBuffer out(n * elementSize(dtype));
  EXPECT_EQ(none::decodeRef(frame_.bytes.data(), frame_.bytes.size(), dtype, n, out.data()),
            kFrameMismatch);
  EXPECT_TRUE(out.guardsIntact());
  cclzCodecConfig_t noneConfig = CCLZ_CODEC_CONFIG_INITIALIZER;
  noneConfig.codec = cclzCodecNone;
  CodecPtr noneCodec = makeCodec(noneConfig);
  ASSERT_TRUE(noneCodec);
  EXPECT_EQ(cclzDecodeHost(noneCodec.get(), frame_.bytes.data(), frame_.bytes.size(), out.data(), n,
                           static_cast<cclzDataType_t>(dtype)),
            cclzCorruptFrame);
  EXPECT_EQ(cclzDecodeHost(codec_.get(), noneFrame.data(), noneFrame.size(), out.data(), n,
                           static_cast<cclzDataType_t>(dtype)),
            cclzCorruptFrame);
  EXPECT_TRUE(out.guardsIntact());
}

// Header edits with the checksum recomputed: the header is self-consistent as far as the
// checksum goes, so the field checks must hold on their own.
struct HeaderEdit {
  const char* what;
  std::function<void(uint8_t*, const ValidFrame&)> apply;
  std::function<uint64_t(const ValidFrame&)> callCount;  // the count the caller passes
  bool mustReject;  // false: a decode is allowed (the edit may describe another valid frame)
};

uint64_t sameCount(const ValidFrame& f) { return f.count; }

uint32_t chunksFor(uint64_t count, uint32_t chunk) {
  return static_cast<uint32_t>((count + chunk - 1) / chunk);
}

std::vector<HeaderEdit> headerEdits() {
  auto setCount = [](uint64_t delta) {
    return [delta](uint8_t* h, const ValidFrame& f) {
      writeLE<uint64_t>(h + kOffCount, f.count + delta);
    };
  };
  auto countPlus = [](uint64_t delta) {
    return [delta](const ValidFrame& f) { return f.count + delta; };
  };
  return {
      {"count+chunk", setCount(1024), countPlus(1024), true},
      {"count-1", setCount(~uint64_t{0}), countPlus(~uint64_t{0}), false},
      {"count+1", setCount(1), countPlus(1), false},
      {"count=2^40 with numChunks to match",
       [](uint8_t* h, const ValidFrame& f) {
         writeLE<uint64_t>(h + kOffCount, uint64_t{1} << 40);
         writeLE<uint32_t>(h + kOffNumChunks, chunksFor(uint64_t{1} << 40, f.params.chunkElems));
       },
       [](const ValidFrame&) { return uint64_t{1} << 40; }, true},
      {"count=2^62",
       [](uint8_t* h, const ValidFrame&) { writeLE<uint64_t>(h + kOffCount, uint64_t{1} << 62); },
       [](const ValidFrame&) { return uint64_t{1} << 62; }, true},
      {"numChunks+1",
       [](uint8_t* h, const ValidFrame& f) {
         writeLE<uint32_t>(h + kOffNumChunks, chunksFor(f.count, f.params.chunkElems) + 1);
       },
       sameCount, true},
      {"numChunks-1",
       [](uint8_t* h, const ValidFrame& f) {
         writeLE<uint32_t>(h + kOffNumChunks, chunksFor(f.count, f.params.chunkElems) - 1);
       },
       sameCount, true},
      {"numChunks=2^32-1",
       [](uint8_t* h, const ValidFrame&) { writeLE<uint32_t>(h + kOffNumChunks, ~0u); }, sameCount,
       true},
      {"chunkElems*2 with numChunks to match",
       [](uint8_t* h, const ValidFrame& f) {
         writeLE<uint32_t>(h + kOffChunkElems, 2 * f.params.chunkElems);
         writeLE<uint32_t>(h + kOffNumChunks, chunksFor(f.count, 2 * f.params.chunkElems));
       },
       sameCount, false},
      {"chunkElems/2 with numChunks to match",
       [](uint8_t* h, const ValidFrame& f) {
         writeLE<uint32_t>(h + kOffChunkElems, f.params.chunkElems / 2);
         writeLE<uint32_t>(h + kOffNumChunks, chunksFor(f.count, f.params.chunkElems / 2));
       },
       sameCount, false},
      {"chunkElems=1000",
       [](uint8_t* h, const ValidFrame& f) {
         writeLE<uint32_t>(h + kOffChunkElems, 1000);
         writeLE<uint32_t>(h + kOffNumChunks, chunksFor(f.count, 1000));
       },
       sameCount, true},
      {"chunkElems=512",
       [](uint8_t* h, const ValidFrame& f) {
         writeLE<uint32_t>(h + kOffChunkElems, 512);
         writeLE<uint32_t>(h + kOffNumChunks, chunksFor(f.count, 512));
       },
       sameCount, true},
      {"chunkElems=131072",
       [](uint8_t* h, const ValidFrame& f) {
         writeLE<uint32_t>(h + kOffChunkElems, 131072);
         writeLE<uint32_t>(h + kOffNumChunks, chunksFor(f.count, 131072));
       },
       sameCount, true},
      {"chunkElems=0",
       [](uint8_t* h, const ValidFrame&) { writeLE<uint32_t>(h + kOffChunkElems, 0); }, sameCount,
       true},
      {"frameBytes+16",
       [](uint8_t* h, const ValidFrame& f) {
         writeLE<uint64_t>(h + kOffFrameBytes, f.bytes.size() + 16);
       },
       sameCount, true},
      {"frameBytes=63",
       [](uint8_t* h, const ValidFrame&) { writeLE<uint64_t>(h + kOffFrameBytes, 63); }, sameCount,
       true},
      {"frameBytes=2^64-1",
       [](uint8_t* h, const ValidFrame&) { writeLE<uint64_t>(h + kOffFrameBytes, ~uint64_t{0}); },
       sameCount, true},
      {"params[0]=1", [](uint8_t* h, const ValidFrame&) { h[kOffParams] = 1; }, sameCount, true},
      {"params[1]=10", [](uint8_t* h, const ValidFrame&) { h[kOffParams + 1] = 10; }, sameCount,
       true},
      {"params[2]=1", [](uint8_t* h, const ValidFrame&) { h[kOffParams + 2] = 1; }, sameCount,
       true},
      {"params[7]=1", [](uint8_t* h, const ValidFrame&) { h[kOffParams + 7] = 1; }, sameCount,
       true},
      {"flags=1", [](uint8_t* h, const ValidFrame&) { h[kOffFlags] = 1; }, sameCount, true},
      {"version=1", [](uint8_t* h, const ValidFrame&) { h[kOffVersion] = 1; }, sameCount, true},
      {"version=3", [](uint8_t* h, const ValidFrame&) { h[kOffVersion] = 3; }, sameCount, true},
      {"version=0", [](uint8_t* h, const ValidFrame&) { h[kOffVersion] = 0; }, sameCount, true},
      {"magic", [](uint8_t* h, const ValidFrame&) { h[kOffMagic] = 'X'; }, sameCount, true},
      {"codec=none", [](uint8_t* h, const ValidFrame&) { h[kOffCodec] = cclzCodecNone; }, sameCount,
       true},
      {"codec=2", [](uint8_t* h, const ValidFrame&) { h[kOffCodec] = 2; }, sameCount, true},
  };
}

TEST_P(LosslessCorrupt, FixedUpHeadersAreRejectedOrDecodeInBounds) {
  for (const HeaderEdit& edit : headerEdits()) {
    SCOPED_TRACE(edit.what);
    std::vector<uint8_t> bad = frame_.bytes;
    edit.apply(bad.data(), frame_);
    fixChecksum(bad.data());
    const uint64_t count = edit.callCount(frame_);
    // A count the decoder must reject before it writes: give it the original buffer only, so
    // that a write past it is caught (by the guards, and by ASan).
    const size_t outCount = count > frame_.count + 4096 ? frame_.count : count;
    GuardedBuffer out(outCount * elementSize(frame_.dtype));
    const uint32_t err =
        lossless::decodeRef(bad.data(), bad.size(), frame_.dtype, count, out.data());
    EXPECT_TRUE(out.guardsIntact());
    if (edit.mustReject) {
      EXPECT_NE(err, kFrameOk);
    } else {
      std::printf("%s: %s\n", edit.what, err == kFrameOk ? "decoded" : frameErrorText(err));
    }
  }
}

// A frame whose version byte is not the lossless format's (2) is another format: rejected as
// such (kFrameBadVersion), a corrupt frame for the API, with a message that says so.
TEST_P(LosslessCorrupt, OtherVersionIsRejected) {
  for (int version : {0, 1, 3, 255}) {
    SCOPED_TRACE("version " + std::to_string(version));
    std::vector<uint8_t> bad = frame_.bytes;
    bad[kOffVersion] = static_cast<uint8_t>(version);
    fixChecksum(bad.data());
    EXPECT_EQ(decodeGuarded(bad, bad.size(), frame_.dtype, frame_.count), kFrameBadVersion);
    EXPECT_EQ(decodeApi(bad, bad.size(), frame_.count, frame_.dtype), cclzCorruptFrame);
    EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("version"), std::string::npos)
        << cclzGetLastError(nullptr);
  }
}

// The host decoder takes any chunking the frame declares (cclz.h), whatever the codec's config.
TEST_P(LosslessCorrupt, HostDecodeAcceptsOtherChunking) {
  cclzCodecConfig_t other = CCLZ_CODEC_CONFIG_INITIALIZER;
  other.chunkElems = frame_.params.chunkElems == 1024 ? 4096 : 1024;
  CodecPtr codec = makeCodec(other);
  ASSERT_TRUE(codec);
  GuardedBuffer out(frame_.input.size());
  ASSERT_EQ(cclzDecodeHost(codec.get(), frame_.bytes.data(), frame_.bytes.size(), out.data(),
                           frame_.count, static_cast<cclzDataType_t>(frame_.dtype)),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  EXPECT_EQ(firstMismatch(out.data(), frame_.input.data(), frame_.input.size()), SIZE_MAX);
  EXPECT_TRUE(out.guardsIntact());
}

INSTANTIATE_TEST_SUITE_P(All, LosslessCorrupt,
                         testing::Combine(testing::ValuesIn(losslessDtypes()),
                                          testing::ValuesIn(losslessSetups())),
                         [](const testing::TestParamInfo<CorruptParam>& info) {
                           return std::string(dtypeLabel(std::get<0>(info.param))) + "_" +
                                  std::get<1>(info.param).name;
                         });

// Blocks made bad by hand on a valid frame (docs/formats.md, "Lossless payload"): each is
// rejected, never read or written out of bounds.
TEST(LosslessCorruptBlocks, HandMadeBadBlocksAreRejected) {
  const ValidFrame f = makeFrame(cclzBfloat16, smallChunkSetup(), 1024, DataKind::kGauss1);
  const FrameView v = viewFrame(f.bytes.data());
  const size_t block = v.blocksOffset;
  ASSERT_EQ(f.bytes[block], 1) << "a coded block";
  ASSERT_EQ(f.bytes[block + 1] & 0x80, 0) << "without escapes";
  auto expectRejected = [&](const char* what, const std::function<void(uint8_t*)>& edit) {
    SCOPED_TRACE(what);
    std::vector<uint8_t> bad = f.bytes;
    edit(bad.data() + block);
    EXPECT_EQ(decodeGuarded(bad, bad.size(), f.dtype, f.count), kFrameBadChunk);
  };
  expectRejected("mode 3", [](uint8_t* b) { b[0] = 3; });
  expectRejected("reserved table bits", [](uint8_t* b) { b[1] |= 0x08; });
  expectRejected("width 17", [](uint8_t* b) { b[3] = 17; });
  expectRejected("byte 6 not 0", [](uint8_t* b) { b[6] = 1; });
  expectRejected("base one bit more: the sizes no longer add up to the block",
                 [](uint8_t* b) { b[4] += 64; });
  expectRejected("top 0: offsets below symbol 0", [](uint8_t* b) { b[2] = 0; });
  expectRejected("a constant block of 32 bytes", [](uint8_t* b) { b[0] = 2; });
  // A constant block is 16 bytes with bytes 2..3 zero; a stored one holds 4 + n bytes.
  const ValidFrame c = makeFrame(cclzBfloat16, smallChunkSetup(), 1024, DataKind::kConstant);
  std::vector<uint8_t> bad = c.bytes;
  const size_t cb = viewFrame(c.bytes.data()).blocksOffset;
  ASSERT_EQ(bad[cb], 2);
  bad[cb + 2] = 1;
  EXPECT_EQ(decodeGuarded(bad, bad.size(), c.dtype, c.count), kFrameBadChunk);
  bad = c.bytes;
  bad[cb] = 0;  // stored, but 16 bytes cannot hold 1024 symbols
  EXPECT_EQ(decodeGuarded(bad, bad.size(), c.dtype, c.count), kFrameBadChunk);
}

// A chunk-table entry past the end of the frame that claims a full stored chunk's bytes (1040)
// from chunk 1's start: a decoder that trusted the entry would copy ~1 KiB from beyond the frame
// (ASan reports it: the frame is in a buffer of exactly its size). It must reject the table entry
// first.
TEST(LosslessCorruptBlocks, TableEntryPastTheFrameIsRejectedBeforeReading) {
  // Three constant blocks of 16 bytes (the last chunk: one element).
  const ValidFrame f = makeFrame(cclzBfloat16, smallChunkSetup(), 2049, DataKind::kConstant);
  const FrameView v = viewFrame(f.bytes.data());
  ASSERT_EQ(v.numChunks, 3u);
  ASSERT_EQ(viewBlock(f.bytes.data(), v, 1).mode, 2);
  const uint64_t blocksBytes = v.frameBytes - v.blocksOffset;
  ASSERT_EQ(blocksBytes, 48u);
  std::vector<uint8_t> bad = f.bytes;
  writeLE<uint64_t>(bad.data() + kHeaderBytes + 8, v.chunkEnds[0] + 1040);  // chunk 1's end
  EXPECT_EQ(decodeGuarded(bad, bad.size(), cclzBfloat16, 2049), kFrameBadChunkTable);
}

}  // namespace
}  // namespace cclz::test
