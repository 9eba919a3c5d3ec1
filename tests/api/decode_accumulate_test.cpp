// cclzDecodeAccumulateHost: acc += the decoded frame, in fp32, for every codec and dtype that
// takes it; a rejected frame leaves acc as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "cclz/cclz.h"
#include "support/codec_handle.h"
#include "support/data.h"

namespace cclz::test {
namespace {

using AccParam = std::tuple<cclzCodecType_t, int, size_t>;
class DecodeAccumulateHost : public testing::TestWithParam<AccParam> {};

TEST_P(DecodeAccumulateHost, AddsTheDecodedValues) {
  const auto& [codecType, dtype, count] = GetParam();
  const auto type = static_cast<cclzDataType_t>(dtype);
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = codecType;
  CodecPtr codec = makeCodec(config);
  ASSERT_TRUE(codec);
  const auto input = makeData(DataKind::kGauss1, dtype, count, 4096, mixSeed(dtype, count, 5));
  const HostFrame frame = encodeHost(codec.get(), dtype, input, count);

  std::vector<float> acc(count);
  for (size_t i = 0; i < count; ++i) acc[i] = 0.25f * static_cast<float>(i % 17) - 2.0f;
  const std::vector<float> before = acc;
  ASSERT_EQ(cclzDecodeAccumulateHost(codec.get(), frame.bytes.data(), frame.bytes.size(),
                                     acc.data(), count, type),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(acc[i], before[i] + elementAsFloat(dtype, input, i)) << "element " << i;

  // A corrupt frame is rejected and the accumulator keeps its values.
  if (count == 0) return;
  std::vector<uint8_t> corrupt = frame.bytes;
  corrupt[20] ^= 0x40;  // inside the header: the checksum no longer matches
  const std::vector<float> kept = acc;
  EXPECT_EQ(cclzDecodeAccumulateHost(codec.get(), corrupt.data(), corrupt.size(), acc.data(),
                                     count, type),
            cclzCorruptFrame);
  EXPECT_EQ(std::memcmp(acc.data(), kept.data(), count * sizeof(float)), 0);
  EXPECT_EQ(cclzDecodeAccumulateHost(codec.get(), frame.bytes.data(), frame.bytes.size() - 1,
                                     acc.data(), count, type),
            cclzCorruptFrame);
  EXPECT_EQ(std::memcmp(acc.data(), kept.data(), count * sizeof(float)), 0);
}

// A NaN in the frame (a payload NaN) makes a NaN sum, stored as 0x7FFFFFFF whatever the payload:
// the bytes the GPU's adder gives, so CPU and GPU reductions agree.
TEST(DecodeAccumulateHostNaN, SumIsTheCanonicalNaN) {
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  const std::vector<uint8_t> input = {0xc1, 0x7f, 0x80, 0x3f, 0x81, 0xff};  // bf16: NaN, 1, -NaN
  for (cclzCodecType_t type : {cclzCodecNone, cclzCodecLossless}) {
    config.codec = type;
    CodecPtr codec = makeCodec(config);
    const HostFrame frame = encodeHost(codec.get(), cclzBfloat16, input, 3);
    std::vector<float> acc = {1.0f, 2.0f, 3.0f};
    ASSERT_EQ(cclzDecodeAccumulateHost(codec.get(), frame.bytes.data(), frame.bytes.size(),
                                       acc.data(), 3, cclzBfloat16),
              cclzSuccess);
    uint32_t bits[3];
    std::memcpy(bits, acc.data(), sizeof bits);
    EXPECT_EQ(bits[0], 0x7FFFFFFFu) << type;
    EXPECT_EQ(acc[1], 3.0f) << type;
    EXPECT_EQ(bits[2], 0x7FFFFFFFu) << type;
  }
}

std::string accName(const testing::TestParamInfo<AccParam>& info) {
  const auto& [codecType, dtype, count] = info.param;
  return std::string(codecType == cclzCodecNone ? "none" : "lossless") + "_" + dtypeLabel(dtype) +
         "_n" + std::to_string(count);
}

INSTANTIATE_TEST_SUITE_P(All, DecodeAccumulateHost,
                         testing::Combine(testing::Values(cclzCodecNone, cclzCodecLossless),
                                          testing::Values(cclzBfloat16, cclzFloat16, cclzFloat32),
                                          testing::Values(size_t{0}, size_t{1}, size_t{7},
                                                          size_t{4097})),
                         accName);

TEST(DecodeAccumulateHostErrors, RejectsBadArguments) {
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = cclzCodecNone;
  CodecPtr codec = makeCodec(config);
  ASSERT_TRUE(codec);
  const std::vector<uint8_t> input(8, 0);
  const HostFrame frame = encodeHost(codec.get(), cclzInt32, input, 2);
  float acc[2] = {};
  EXPECT_EQ(cclzDecodeAccumulateHost(nullptr, frame.bytes.data(), frame.bytes.size(), acc, 2,
                                     cclzFloat32),
            cclzInvalidArgument);
  EXPECT_EQ(cclzDecodeAccumulateHost(codec.get(), nullptr, 64, acc, 2, cclzFloat32),
            cclzInvalidArgument);
  EXPECT_EQ(cclzDecodeAccumulateHost(codec.get(), frame.bytes.data(), frame.bytes.size(), nullptr,
                                     2, cclzFloat32),
            cclzInvalidArgument);
  // Integers do not accumulate into floats.
  EXPECT_EQ(cclzDecodeAccumulateHost(codec.get(), frame.bytes.data(), frame.bytes.size(), acc, 2,
                                     cclzInt32),
            cclzNotSupported);
  EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("int32"), std::string::npos);
}

}  // namespace
}  // namespace cclz::test
