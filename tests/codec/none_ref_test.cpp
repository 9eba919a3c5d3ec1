// The none codec's CPU reference (src/codec/none/ref.cpp): every dtype round trips, the frame is
// the header plus the bytes, and bad frames are rejected without stray writes.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "codec/frame.h"
#include "codec/none/ref.h"
#include "support/data.h"
#include "support/frame_view.h"
#include "support/guarded_buffer.h"

namespace cclz::test {
namespace {

const std::vector<int>& allDtypes() {
  static const std::vector<int> dtypes = {cclzInt8,    cclzUint8,   cclzInt32,   cclzUint32,
                                          cclzInt64,   cclzUint64,  cclzFloat16, cclzFloat32,
                                          cclzFloat64, cclzBfloat16};
  return dtypes;
}

using NoneParam = std::tuple<int, size_t>;
class NoneRef : public testing::TestWithParam<NoneParam> {};

TEST_P(NoneRef, RoundTripAndRejects) {
  const auto& [dtype, count] = GetParam();
  const size_t esize = elementSize(dtype);
  const auto input = makeData(DataKind::kRandomBits, dtype, count, 0, mixSeed(3, dtype, count));
  std::vector<uint8_t> frame(none::maxEncodedBytes(dtype, count));
  ASSERT_EQ(frame.size(), 64 + count * esize);
  ASSERT_EQ(none::encodeRef(dtype, input.data(), count, frame.data(), frame.size()), frame.size());
  const FrameView v = viewFrame(frame.data());
  EXPECT_EQ(std::memcmp(frame.data(), "CCLZ", 4), 0);
  EXPECT_EQ(v.version, 1);
  EXPECT_EQ(v.codec, cclzCodecNone);
  EXPECT_EQ(v.dtype, dtype);
  EXPECT_EQ(v.count, count);
  EXPECT_EQ(v.frameBytes, frame.size());
  EXPECT_EQ(v.chunkElems, 0u);
  EXPECT_EQ(v.numChunks, 0u);
  EXPECT_EQ(v.checksum, fnv1a32(frame.data(), 60));
  EXPECT_EQ(firstMismatch(frame.data() + 64, input.data(), input.size()), SIZE_MAX);

  GuardedBuffer out(count * esize);
  ASSERT_EQ(none::decodeRef(frame.data(), frame.size(), dtype, count, out.data()), kFrameOk);
  EXPECT_EQ(firstMismatch(out.data(), input.data(), input.size()), SIZE_MAX);
  EXPECT_TRUE(out.guardsIntact());

  // Every truncation, and every header byte flipped, is rejected without a write.
  out.fill(0x3C);
  GuardedBuffer untouched(count * esize);
  untouched.fill(0x3C);
  const size_t step = frame.size() > 4096 ? frame.size() / 997 : 1;
  for (size_t len = 0; len < frame.size(); len += step)
    ASSERT_NE(none::decodeRef(frame.data(), len, dtype, count, out.data()), kFrameOk) << len;
  for (size_t i = 0; i < 64; ++i) {
    std::vector<uint8_t> bad(frame);
    bad[i] ^= 0x10;
    ASSERT_NE(none::decodeRef(bad.data(), bad.size(), dtype, count, out.data()), kFrameOk) << i;
  }
  // Header fields changed with the checksum fixed up.
  for (int field = 0; field < 4; ++field) {
    std::vector<uint8_t> bad(frame);
    if (field == 0) writeLE<uint64_t>(bad.data() + kOffFrameBytes, frame.size() + 1);
    if (field == 1) writeLE<uint64_t>(bad.data() + kOffFrameBytes, frame.size() - 1);
    if (field == 2) writeLE<uint32_t>(bad.data() + kOffChunkElems, 1024);
    if (field == 3) writeLE<uint32_t>(bad.data() + kOffNumChunks, 1);
    fixChecksum(bad.data());
    ASSERT_NE(none::decodeRef(bad.data(), bad.size(), dtype, count, out.data()), kFrameOk) << field;
  }
  EXPECT_EQ(none::decodeRef(frame.data(), frame.size(), dtype, count + 1, out.data()),
            kFrameMismatch);
  EXPECT_EQ(firstMismatch(out.data(), untouched.data(), out.size()), SIZE_MAX)
      << "a rejected frame wrote to the output";
  EXPECT_TRUE(out.guardsIntact());
}

INSTANTIATE_TEST_SUITE_P(All, NoneRef,
                         testing::Combine(testing::ValuesIn(allDtypes()),
                                          testing::Values(size_t{0}, size_t{1}, size_t{2},
                                                          size_t{7}, size_t{4097},
                                                          size_t{1000001})),
                         [](const testing::TestParamInfo<NoneParam>& info) {
                           return std::string(dtypeLabel(std::get<0>(info.param))) + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(NoneRefGolden, FrameBytesArePinned) {
  // 5 bf16 values 1.0, -2.0, 0.5, +Inf, NaN: the header, then the bytes.
  const uint16_t input[5] = {0x3F80, 0xC000, 0x3F00, 0x7F80, 0x7FC1};
  std::vector<uint8_t> frame(none::maxEncodedBytes(cclzBfloat16, 5));
  ASSERT_EQ(none::encodeRef(cclzBfloat16, input, 5, frame.data(), frame.size()), 74u);
  const uint8_t expectedHeader[64] = {
      'C', 'C', 'L', 'Z', 1, 0, 9, 0,  // magic, version, codec none, bf16, flags
      5,   0,   0,   0,   0, 0, 0, 0,  // count
      74,  0,   0,   0,   0, 0, 0, 0,  // frameBytes
      0,   0,   0,   0,   0, 0, 0, 0,  // chunkElems, numChunks
      0,   0,   0,   0,   0, 0, 0, 0,  // params
      0,   0,   0,   0,   0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  // reserved
      0,   0,   0,   0};                                                   // checksum, filled below
  uint8_t header[64];
  std::memcpy(header, expectedHeader, 64);
  writeLE<uint32_t>(header + 60, fnv1a32(header, 60));
  EXPECT_EQ(firstMismatch(frame.data(), header, 64), SIZE_MAX);
  EXPECT_EQ(std::memcmp(frame.data() + 64, input, 10), 0);
}

}  // namespace
}  // namespace cclz::test
