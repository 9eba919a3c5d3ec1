// Compression ratio of the lossless codec on seeded data (raw bytes / frame bytes), and the
// growth bound on incompressible data.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "codec/lossless/ref.h"
#include "support/codec_handle.h"
#include "support/configs.h"
#include "support/data.h"

namespace cclz::test {
namespace {

constexpr size_t kRatioElems = size_t{1} << 20;

// Encodes through the public API (default configuration) and returns raw/frame.
double apiRatio(int dtype, const std::vector<uint8_t>& input, size_t count) {
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  CodecPtr codec = makeCodec(config);
  const HostFrame frame = encodeHost(codec.get(), dtype, input, count);
  const size_t bytes = frame.bytes.size();
  if (bytes == 0) return 0;
  std::vector<uint8_t> out(input.size());
  EXPECT_EQ(cclzDecodeHost(codec.get(), frame.bytes.data(), bytes, out.data(), count,
                           static_cast<cclzDataType_t>(dtype)),
            cclzSuccess);
  EXPECT_EQ(firstMismatch(out.data(), input.data(), input.size()), SIZE_MAX);
  return static_cast<double>(input.size()) / static_cast<double>(bytes);
}

TEST(LosslessRatio, GaussianBf16AtLeast1_48) {
  const auto input = makeData(DataKind::kGauss1, cclzBfloat16, kRatioElems, 16384, 20240601);
  const double ratio = apiRatio(cclzBfloat16, input, kRatioElems);
  RecordProperty("ratio", std::to_string(ratio));
  std::printf("bf16 N(0,1), 2^20 elements: ratio %.4f\n", ratio);
  EXPECT_GE(ratio, 1.48);
}

TEST(LosslessRatio, GaussianFp32AtLeast1_18) {
  const auto input = makeData(DataKind::kGauss1, cclzFloat32, kRatioElems, 16384, 20240602);
  const double ratio = apiRatio(cclzFloat32, input, kRatioElems);
  RecordProperty("ratio", std::to_string(ratio));
  std::printf("fp32 N(0,1), 2^20 elements: ratio %.4f\n", ratio);
  EXPECT_GE(ratio, 1.18);
}

// fp16 has no target; the static codes must still shrink Gaussian fp16.
TEST(LosslessRatio, GaussianFp16Compresses) {
  const auto input = makeData(DataKind::kGauss1, cclzFloat16, kRatioElems, 16384, 20240603);
  const double ratio = apiRatio(cclzFloat16, input, kRatioElems);
  std::printf("fp16 N(0,1), 2^20 elements: ratio %.4f\n", ratio);
  EXPECT_GE(ratio, 1.15);
}

// Scaling Gaussian data by a power of two moves every exponent by the same amount: the same
// histogram, shifted, so the same frame size.
TEST(LosslessRatio, PowerOfTwoScaleKeepsTheSize) {
  const auto input = makeData(DataKind::kGauss1, cclzFloat32, 100000, 16384, 3);
  std::vector<uint8_t> scaled(input);
  for (size_t i = 0; i < scaled.size(); i += 4) {
    float f;
    std::memcpy(&f, &scaled[i], 4);
    f *= 1024.0f;
    std::memcpy(&scaled[i], &f, 4);
  }
  const double a = apiRatio(cclzFloat32, input, 100000);
  const double b = apiRatio(cclzFloat32, scaled, 100000);
  EXPECT_DOUBLE_EQ(a, b);
  EXPECT_GT(a, 1.1);
}

// Incompressible input grows only by the frame's fixed structure. Asserted bounds:
//   (1) frame <= raw + 64 (header) + 48 (alignment of table and planes: at most 8 + 15 + 15)
//                + 27 per chunk (8-byte table entry, 4-byte block header, up to 15 of padding);
//   (2) where chunks hold at least 4096 bytes and the message more than one chunk's worth of
//       alignment (count >= 4097): frame <= 1.01 * raw + 64 + 48, i.e. at most 1% plus the
//       header and its alignment.
// Both hold for cclzCodecMaxEncodedSize too, which must cover every frame. Chunks of 1024
// two-byte elements cost (8 + 16) / 2048 = 1.17% and are outside (2).
using GrowthParam = std::tuple<int, CodecSetup, size_t>;
class LosslessGrowth : public testing::TestWithParam<GrowthParam> {};

TEST_P(LosslessGrowth, RandomBitsGrowByAtMostTheStructure) {
  const auto& [dtype, setup, count] = GetParam();
  const lossless::Params p = setup.params();
  const auto input =
      makeData(DataKind::kRandomBits, dtype, count, p.chunkElems, mixSeed(5, dtype, count));
  CodecPtr codec = makeCodec(setup.apiConfig());
  ASSERT_TRUE(codec);
  const HostFrame frame = encodeHost(codec.get(), dtype, input, count);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const size_t bytes = frame.bytes.size(), capacity = frame.capacity;
  const double raw = static_cast<double>(input.size());
  const uint64_t chunks = (count + p.chunkElems - 1) / p.chunkElems;
  const double structural = raw + 64 + 48 + 27.0 * static_cast<double>(chunks);
  EXPECT_LE(static_cast<double>(bytes), structural);
  EXPECT_LE(static_cast<double>(capacity), structural);
  EXPECT_LE(bytes, capacity);
  if (p.chunkElems * elementSize(dtype) >= 4096 && count >= 4097) {
    EXPECT_LE(static_cast<double>(bytes), 1.01 * raw + 64 + 48);
    EXPECT_LE(static_cast<double>(capacity), 1.01 * raw + 64 + 48);
  }
  std::printf("%s %s n=%zu: frame/raw = %.5f (+%lld bytes)\n", dtypeLabel(dtype), setup.name, count,
              static_cast<double>(bytes) / raw, static_cast<long long>(bytes - input.size()));
}

INSTANTIATE_TEST_SUITE_P(
    All, LosslessGrowth,
    testing::Combine(testing::ValuesIn(losslessDtypes()), testing::ValuesIn(losslessSetups()),
                     testing::Values(size_t{1}, size_t{7}, size_t{4097}, size_t{1000001})),
    [](const testing::TestParamInfo<GrowthParam>& info) {
      return std::string(dtypeLabel(std::get<0>(info.param))) + "_" + std::get<1>(info.param).name +
             "_n" + std::to_string(std::get<2>(info.param));
    });

}  // namespace
}  // namespace cclz::test
