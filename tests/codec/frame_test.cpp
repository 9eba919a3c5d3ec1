// The frame header shared by every codec (src/codec/frame.h).
#include "codec/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

#include "support/frame_view.h"

namespace cclz {
namespace {

FrameHeader validHeader() {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kFrameVersion;
  h.codec = cclzCodecNone;
  h.dtype = cclzFloat32;
  h.count = 10;
  h.frameBytes = 104;
  h.checksum = headerChecksum(h);
  return h;
}

TEST(Frame, HeaderLayoutMatchesTheSpec) {
  EXPECT_EQ(sizeof(FrameHeader), 64u);
  EXPECT_EQ(offsetof(FrameHeader, magic), test::kOffMagic);
  EXPECT_EQ(offsetof(FrameHeader, version), test::kOffVersion);
  EXPECT_EQ(offsetof(FrameHeader, codec), test::kOffCodec);
  EXPECT_EQ(offsetof(FrameHeader, dtype), test::kOffDtype);
  EXPECT_EQ(offsetof(FrameHeader, flags), test::kOffFlags);
  EXPECT_EQ(offsetof(FrameHeader, count), test::kOffCount);
  EXPECT_EQ(offsetof(FrameHeader, frameBytes), test::kOffFrameBytes);
  EXPECT_EQ(offsetof(FrameHeader, chunkElems), test::kOffChunkElems);
  EXPECT_EQ(offsetof(FrameHeader, numChunks), test::kOffNumChunks);
  EXPECT_EQ(offsetof(FrameHeader, params), test::kOffParams);
  EXPECT_EQ(offsetof(FrameHeader, reserved), test::kOffReserved);
  EXPECT_EQ(offsetof(FrameHeader, checksum), test::kOffChecksum);
  uint32_t magic = kFrameMagic;
  EXPECT_EQ(std::memcmp(&magic, "CCLZ", 4), 0);
  EXPECT_EQ(kFrameVersion, 1);
}

// FNV-1a 32 of the published test vectors, and the checksum covers bytes [0, 60).
TEST(Frame, Fnv1a32) {
  EXPECT_EQ(fnv1a32(reinterpret_cast<const uint8_t*>(""), 0), 0x811c9dc5u);
  EXPECT_EQ(fnv1a32(reinterpret_cast<const uint8_t*>("a"), 1), 0xe40c292cu);
  EXPECT_EQ(fnv1a32(reinterpret_cast<const uint8_t*>("foobar"), 6), 0xbf9cf968u);
  const FrameHeader h = validHeader();
  EXPECT_EQ(h.checksum, test::fnv1a32(reinterpret_cast<const uint8_t*>(&h), 60));
}

TEST(Frame, CheckFrameHeader) {
  const FrameHeader good = validHeader();
  EXPECT_EQ(checkFrameHeader(good, 104), kFrameOk);
  EXPECT_EQ(checkFrameHeader(good, 1000), kFrameOk);
  EXPECT_EQ(checkFrameHeader(good, 103), kFrameTruncated);

  FrameHeader h = good;
  h.magic ^= 1;
  EXPECT_EQ(checkFrameHeader(h, 104), kFrameBadMagic);
  h = good;
  h.version = 2;
  h.checksum = headerChecksum(h);
  EXPECT_EQ(checkFrameHeader(h, 104), kFrameBadVersion);
  h = good;
  h.count = 11;  // checksum not updated
  EXPECT_EQ(checkFrameHeader(h, 104), kFrameBadChecksum);
  h = good;
  h.frameBytes = 63;
  h.checksum = headerChecksum(h);
  EXPECT_EQ(checkFrameHeader(h, 104), kFrameBadField);

  EXPECT_EQ(checkFrameMatches(good, cclzCodecNone, cclzFloat32, 10), kFrameOk);
  EXPECT_EQ(checkFrameMatches(good, cclzCodecLossless, cclzFloat32, 10), kFrameMismatch);
  EXPECT_EQ(checkFrameMatches(good, cclzCodecNone, cclzBfloat16, 10), kFrameMismatch);
  EXPECT_EQ(checkFrameMatches(good, cclzCodecNone, cclzFloat32, 9), kFrameMismatch);
}

TEST(Frame, ErrorTextsAreDistinct) {
  std::set<std::string> texts;
  for (uint32_t e = 0; e < kFrameNumErrors; ++e) {
    ASSERT_NE(frameErrorText(e), nullptr);
    EXPECT_GT(std::strlen(frameErrorText(e)), 0u);
    texts.insert(frameErrorText(e));
  }
  EXPECT_EQ(texts.size(), static_cast<size_t>(kFrameNumErrors));
  EXPECT_NE(frameErrorText(kFrameNumErrors), nullptr);
  EXPECT_NE(frameErrorText(0xFFFFFFFFu), nullptr);
}

}  // namespace
}  // namespace cclz
