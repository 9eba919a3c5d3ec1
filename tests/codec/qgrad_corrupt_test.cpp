// Corrupt and truncated qgrad frames (docs/formats.md, qgrad, "Validation"): every header field
// out of range is rejected with cclzCorruptFrame and leaves the output (and an accumulator)
// untouched; payload bytes, which no offset depends on, decode at their values without any read or
// write outside the buffers (guarded here; ASan in CI).
#include <gtest/gtest.h>

#include <cstring>
#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "support/codec_handle.h"
#include "support/data.h"
#include "support/frame_view.h"
#include "support/guarded_buffer.h"
#include "support/qgrad_setup.h"

namespace cclz::test {
namespace {

struct Fixture {
  CodecPtr codec = makeCodec(qgradConfig(4, 64));
  size_t count = 1000;
  std::vector<uint8_t> input = makeData(DataKind::kGauss1, cclzFloat32, 1000, 0, 11);
  HostFrame frame = encodeHost(codec.get(), cclzFloat32, input, 1000);
};

// Decodes (srcBytes of) a heap copy of exactly those bytes, so that ASan sees any over-read; also
// through decode-and-accumulate. Checks the outputs are untouched when the frame is rejected.
cclzResult_t decodeBoth(Fixture& fx, const std::vector<uint8_t>& frame, size_t srcBytes,
                        size_t count = 1000, cclzDataType_t dtype = cclzFloat32) {
  const size_t n = std::min(srcBytes, frame.size());
  std::unique_ptr<uint8_t[]> exact(new uint8_t[std::max<size_t>(n, 1)]);  // never NULL
  std::copy(frame.begin(), frame.begin() + n, exact.get());
  GuardedBuffer out(count * 4);
  out.fill(0x77);
  const cclzResult_t r = cclzDecodeHost(fx.codec.get(), exact.get(), n, out.data(), count, dtype);
  EXPECT_TRUE(out.guardsIntact()) << "decode wrote outside the output";
  std::vector<float> acc(count, 2.5f);
  const cclzResult_t ra =
      cclzDecodeAccumulateHost(fx.codec.get(), exact.get(), n, acc.data(), count, dtype);
  EXPECT_EQ(r, ra) << "decode and decode-and-accumulate disagree";
  if (r != cclzSuccess) {
    EXPECT_STRNE(cclzGetLastError(nullptr), "");
    for (size_t i = 0; i < out.size(); ++i)
      if (out.data()[i] != 0x77) {
        ADD_FAILURE() << "a rejected frame wrote output byte " << i;
        break;
      }
    for (float a : acc)
      if (a != 2.5f) {
        ADD_FAILURE() << "a rejected frame changed the accumulator";
        break;
      }
  }
  return r;
}

TEST(QgradCorrupt, Truncated) {
  Fixture fx;
  ASSERT_TRUE(fx.codec);
  const size_t bytes = fx.frame.bytes.size();
  ASSERT_EQ(decodeBoth(fx, fx.frame.bytes, bytes), cclzSuccess);
  for (size_t cut : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, bytes / 2,
                     bytes - 16, bytes - 1})
    EXPECT_EQ(decodeBoth(fx, fx.frame.bytes, cut), cclzCorruptFrame) << cut << " bytes";
}

TEST(QgradCorrupt, HeaderFields) {
  Fixture fx;
  ASSERT_TRUE(fx.codec);
  const auto edited = [&](const std::function<void(uint8_t*)>& edit, bool fix = true) {
    std::vector<uint8_t> f = fx.frame.bytes;
    edit(f.data());
    if (fix) fixChecksum(f.data());
    return f;
  };
  struct Edit {
    const char* what;
    std::function<void(uint8_t*)> edit;
  };
  const std::vector<Edit> edits = {
      {"bits 3", [](uint8_t* f) { f[kOffParams] = 3; }},
      {"bits 16", [](uint8_t* f) { f[kOffParams] = 16; }},
      {"bits 0", [](uint8_t* f) { f[kOffParams] = 0; }},
      {"bits 2 (size no longer matches)", [](uint8_t* f) { f[kOffParams] = 2; }},
      {"rounding 2", [](uint8_t* f) { f[kOffParams + 1] = 2; }},
      {"params[2]", [](uint8_t* f) { f[kOffParams + 2] = 1; }},
      {"params[7]", [](uint8_t* f) { f[kOffParams + 7] = 0x80; }},
      {"block 48", [](uint8_t* f) { writeLE<uint32_t>(f + kOffChunkElems, 48); }},
      {"block 512", [](uint8_t* f) { writeLE<uint32_t>(f + kOffChunkElems, 512); }},
      {"block 0", [](uint8_t* f) { writeLE<uint32_t>(f + kOffChunkElems, 0); }},
      {"block 32 (counts no longer match)",
       [](uint8_t* f) { writeLE<uint32_t>(f + kOffChunkElems, 32); }},
      {"numChunks", [](uint8_t* f) { writeLE<uint32_t>(f + kOffNumChunks, 15); }},
      {"frameBytes - 16",
       [](uint8_t* f) { writeLE<uint64_t>(f + kOffFrameBytes, readLE<uint64_t>(f + 16) - 16); }},
      {"frameBytes + 16",
       [](uint8_t* f) { writeLE<uint64_t>(f + kOffFrameBytes, readLE<uint64_t>(f + 16) + 16); }},
      {"flags", [](uint8_t* f) { f[kOffFlags] = 1; }},
      {"dtype fp16", [](uint8_t* f) { f[kOffDtype] = cclzFloat16; }},
      {"dtype bf16", [](uint8_t* f) { f[kOffDtype] = cclzBfloat16; }},
      {"codec lossless", [](uint8_t* f) { f[kOffCodec] = cclzCodecLossless; }},
      {"codec 2", [](uint8_t* f) { f[kOffCodec] = 2; }},
      {"count", [](uint8_t* f) { writeLE<uint64_t>(f + kOffCount, 999); }},
      {"count 2^40", [](uint8_t* f) { writeLE<uint64_t>(f + kOffCount, uint64_t{1} << 40); }},
      {"reserved", [](uint8_t* f) { f[kOffReserved + 3] = 1; }},
      {"version", [](uint8_t* f) { f[kOffVersion] = 2; }},
      {"magic", [](uint8_t* f) { f[0] ^= 1; }},
  };
  for (const Edit& e : edits) {
    EXPECT_EQ(decodeBoth(fx, edited(e.edit), fx.frame.bytes.size() + 16), cclzCorruptFrame)
        << e.what;
    EXPECT_EQ(decodeBoth(fx, edited(e.edit, false), fx.frame.bytes.size()), cclzCorruptFrame)
        << e.what << " (checksum not fixed)";
  }
  // The call's own count and dtype must match the frame's.
  EXPECT_EQ(decodeBoth(fx, fx.frame.bytes, fx.frame.bytes.size(), 999), cclzCorruptFrame);
  EXPECT_EQ(decodeBoth(fx, fx.frame.bytes, fx.frame.bytes.size(), 1000, cclzBfloat16),
            cclzCorruptFrame);
  EXPECT_EQ(decodeBoth(fx, fx.frame.bytes, fx.frame.bytes.size()), cclzSuccess);
}

// Random payload bytes: valid frames (nothing depends on them), decoded without stray accesses.
TEST(QgradCorrupt, PayloadBytesAreValues) {
  Fixture fx;
  ASSERT_TRUE(fx.codec);
  std::mt19937_64 rng(5);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<uint8_t> f = fx.frame.bytes;
    for (int e = 0; e < 1 + trial; ++e) f[64 + rng() % (f.size() - 64)] = static_cast<uint8_t>(rng());
    EXPECT_EQ(decodeBoth(fx, f, f.size()), cclzSuccess) << "trial " << trial;
  }
}

// The header alone is enough for cclzFrameGetInfo, which knows qgrad frames.
TEST(QgradCorrupt, FrameInfo) {
  Fixture fx;
  ASSERT_TRUE(fx.codec);
  cclzFrameInfo_t info{};
  info.size = sizeof info;
  ASSERT_EQ(cclzFrameGetInfo(fx.frame.bytes.data(), 64, &info), cclzSuccess);
  EXPECT_EQ(info.codec, cclzCodecQgrad);
  EXPECT_EQ(info.count, 1000u);
  EXPECT_EQ(info.chunkElems, 64u);
  EXPECT_EQ(info.numChunks, 16u);
  EXPECT_EQ(info.frameBytes, fx.frame.bytes.size());
  std::vector<uint8_t> f = fx.frame.bytes;
  f[kOffCodec] = 2;  // reserved for fp8, unknown to this build
  fixChecksum(f.data());
  EXPECT_EQ(cclzFrameGetInfo(f.data(), 64, &info), cclzCorruptFrame);
  f = fx.frame.bytes;
  f[kOffParams] = 5;
  fixChecksum(f.data());
  EXPECT_EQ(cclzFrameGetInfo(f.data(), 64, &info), cclzCorruptFrame);
}

}  // namespace
}  // namespace cclz::test
