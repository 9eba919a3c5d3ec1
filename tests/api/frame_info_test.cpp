// cclzFrameGetInfo: reads and validates a frame header in host memory.
#include <gtest/gtest.h>

#include <vector>

#include "cclz/cclz.h"
#include "support/codec_handle.h"
#include "support/data.h"
#include "support/frame_view.h"

namespace cclz::test {
namespace {

std::vector<uint8_t> encode(cclzCodecType_t type, cclzDataType_t dtype, size_t count) {
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = type;
  if (type == cclzCodecLossless) config.chunkElems = 1024;
  CodecPtr codec = makeCodec(config);
  const auto input = makeData(DataKind::kGauss1, dtype, count, 1024, 21);
  size_t capacity = 0, bytes = 0;
  EXPECT_EQ(cclzCodecMaxEncodedSize(codec.get(), count, dtype, &capacity), cclzSuccess);
  std::vector<uint8_t> frame(capacity);
  EXPECT_EQ(cclzEncodeHost(codec.get(), input.data(), count, dtype, frame.data(), capacity, &bytes),
            cclzSuccess);
  frame.resize(bytes);
  return frame;
}

cclzFrameInfo_t freshInfo() {
  cclzFrameInfo_t info;
  std::memset(&info, 0xEE, sizeof info);
  info.size = sizeof info;
  return info;
}

TEST(FrameInfo, ValidFrames) {
  const auto frame = encode(cclzCodecLossless, cclzFloat32, 5000);
  cclzFrameInfo_t info = freshInfo();
  ASSERT_EQ(cclzFrameGetInfo(frame.data(), frame.size(), &info), cclzSuccess);
  EXPECT_EQ(info.codec, cclzCodecLossless);
  EXPECT_EQ(info.dtype, cclzFloat32);
  EXPECT_EQ(info.count, 5000u);
  EXPECT_EQ(info.frameBytes, frame.size());
  EXPECT_EQ(info.chunkElems, 1024u);
  EXPECT_EQ(info.numChunks, 5u);
  EXPECT_EQ(info.size, sizeof info);
  // The header alone is enough: the frame may be longer than the bytes given.
  info = freshInfo();
  ASSERT_EQ(cclzFrameGetInfo(frame.data(), 64, &info), cclzSuccess);
  EXPECT_EQ(info.frameBytes, frame.size());

  const auto none = encode(cclzCodecNone, cclzInt64, 33);
  info = freshInfo();
  ASSERT_EQ(cclzFrameGetInfo(none.data(), none.size(), &info), cclzSuccess);
  EXPECT_EQ(info.codec, cclzCodecNone);
  EXPECT_EQ(info.dtype, cclzInt64);
  EXPECT_EQ(info.count, 33u);
  EXPECT_EQ(info.frameBytes, 64u + 33 * 8);
  EXPECT_EQ(info.chunkElems, 0u);
  EXPECT_EQ(info.numChunks, 0u);
}

TEST(FrameInfo, InvalidCalls) {
  const auto frame = encode(cclzCodecLossless, cclzBfloat16, 3000);
  cclzFrameInfo_t info = freshInfo();
  EXPECT_EQ(cclzFrameGetInfo(nullptr, frame.size(), &info), cclzInvalidArgument);
  EXPECT_EQ(cclzFrameGetInfo(frame.data(), frame.size(), nullptr), cclzInvalidArgument);
  info.size = sizeof info - 1;
  EXPECT_EQ(cclzFrameGetInfo(frame.data(), frame.size(), &info), cclzInvalidArgument);
  info = freshInfo();
  EXPECT_EQ(cclzFrameGetInfo(frame.data(), 63, &info), cclzCorruptFrame);
  EXPECT_EQ(cclzFrameGetInfo(frame.data(), 0, &info), cclzCorruptFrame);
}

TEST(FrameInfo, CorruptHeaders) {
  const auto frame = encode(cclzCodecLossless, cclzBfloat16, 3000);
  for (size_t i = 0; i < 64; ++i) {
    std::vector<uint8_t> bad(frame);
    bad[i] ^= 0x04;
    cclzFrameInfo_t info = freshInfo();
    EXPECT_EQ(cclzFrameGetInfo(bad.data(), bad.size(), &info), cclzCorruptFrame) << "byte " << i;
  }
  // Fields out of range behind a valid checksum.
  auto fixed = [&](size_t offset, uint32_t value, size_t width) {
    std::vector<uint8_t> bad(frame);
    std::memcpy(bad.data() + offset, &value, width);
    fixChecksum(bad.data());
    cclzFrameInfo_t info = freshInfo();
    return cclzFrameGetInfo(bad.data(), bad.size(), &info);
  };
  EXPECT_EQ(fixed(kOffCodec, 7, 1), cclzCorruptFrame);
  EXPECT_EQ(fixed(kOffDtype, cclzInt32, 1), cclzCorruptFrame);  // lossless takes floats only
  EXPECT_EQ(fixed(kOffChunkElems, 1000, 4), cclzCorruptFrame);
  EXPECT_EQ(fixed(kOffNumChunks, 4, 4), cclzCorruptFrame);
  EXPECT_EQ(fixed(kOffParams + 1, 13, 1), cclzCorruptFrame);
  EXPECT_EQ(fixed(kOffFrameBytes, 63, 4), cclzCorruptFrame);
  EXPECT_EQ(fixed(kOffVersion, 1, 1), cclzCorruptFrame);  // lossless frames are version 2
  EXPECT_EQ(fixed(kOffVersion, 3, 1), cclzCorruptFrame);
}

}  // namespace
}  // namespace cclz::test
