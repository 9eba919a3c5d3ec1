// Round trips through the public C API on host memory (cclzEncodeHost / cclzDecodeHost): the
// frame equals the CPU reference's for the parameters the API documents, and decodes exactly.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "cclz/cclz.h"
#include "codec/lossless/ref.h"
#include "support/codec_handle.h"
#include "support/configs.h"
#include "support/data.h"
#include "support/frame_view.h"
#include "support/guarded_buffer.h"

namespace cclz::test {
namespace {

using ApiParam = std::tuple<int, size_t, CodecSetup, DataKind>;

class CodecApiRoundTrip : public testing::TestWithParam<ApiParam> {};

std::string apiName(const testing::TestParamInfo<ApiParam>& info) {
  const auto& [dtype, count, setup, kind] = info.param;
  return std::string(dtypeLabel(dtype)) + "_n" + std::to_string(count) + "_" + setup.name + "_" +
         dataKindLabel(kind);
}

TEST_P(CodecApiRoundTrip, LosslessHostExact) {
  const auto& [dtype, count, setup, kind] = GetParam();
  const auto type = static_cast<cclzDataType_t>(dtype);
  const lossless::Params p = setup.params();
  const auto input = makeData(kind, dtype, count, p.chunkElems,
                              mixSeed(static_cast<uint64_t>(kind), dtype, count, 99));
  CodecPtr codec = makeCodec(setup.apiConfig());
  ASSERT_TRUE(codec);

  size_t capacity = 0;
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), count, type, &capacity), cclzSuccess);
  EXPECT_EQ(capacity, lossless::maxEncodedBytes(p, dtype, count));
  std::vector<uint8_t> frame(capacity, 0xCD);
  size_t bytes = 0;
  ASSERT_EQ(cclzEncodeHost(codec.get(), input.data(), count, type, frame.data(), capacity, &bytes),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  EXPECT_STREQ(cclzGetLastError(nullptr), "");
  ASSERT_LE(bytes, capacity);

  // The API uses the parameters cclz.h documents: the frame is the reference's for them.
  std::vector<uint8_t> reference(capacity);
  ASSERT_EQ(lossless::encodeRef(p, dtype, input.data(), count, reference.data(), capacity), bytes);
  EXPECT_EQ(firstMismatch(frame.data(), reference.data(), bytes), SIZE_MAX);

  cclzFrameInfo_t info{};
  info.size = sizeof info;
  ASSERT_EQ(cclzFrameGetInfo(frame.data(), bytes, &info), cclzSuccess);
  EXPECT_EQ(info.codec, cclzCodecLossless);
  EXPECT_EQ(info.dtype, type);
  EXPECT_EQ(info.count, count);
  EXPECT_EQ(info.frameBytes, bytes);
  EXPECT_EQ(info.chunkElems, p.chunkElems);
  EXPECT_EQ(info.numChunks, (count + p.chunkElems - 1) / p.chunkElems);

  GuardedBuffer out(input.size());
  ASSERT_EQ(cclzDecodeHost(codec.get(), frame.data(), bytes, out.data(), count, type), cclzSuccess)
      << cclzGetLastError(nullptr);
  EXPECT_EQ(firstMismatch(out.data(), input.data(), input.size()), SIZE_MAX);
  EXPECT_TRUE(out.guardsIntact());

  // The encoded size may be left out; the frame is the same.
  std::vector<uint8_t> again(capacity, 0x11);
  ASSERT_EQ(cclzEncodeHost(codec.get(), input.data(), count, type, again.data(), capacity, nullptr),
            cclzSuccess);
  EXPECT_EQ(firstMismatch(again.data(), frame.data(), bytes), SIZE_MAX);
}

INSTANTIATE_TEST_SUITE_P(All, CodecApiRoundTrip,
                         testing::Combine(testing::ValuesIn(losslessDtypes()),
                                          testing::ValuesIn(testSizes()),
                                          testing::ValuesIn(losslessSetups()),
                                          testing::ValuesIn(allDataKinds())),
                         apiName);

// The none codec takes every dtype.
using NoneApiParam = std::tuple<int, size_t>;
class CodecApiNone : public testing::TestWithParam<NoneApiParam> {};

TEST_P(CodecApiNone, RoundTripEveryDtype) {
  const auto& [dtype, count] = GetParam();
  const auto type = static_cast<cclzDataType_t>(dtype);
  const auto input = makeData(DataKind::kRandomBits, dtype, count, 0, mixSeed(4, dtype, count));
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = cclzCodecNone;
  CodecPtr codec = makeCodec(config);
  ASSERT_TRUE(codec);
  size_t capacity = 0;
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), count, type, &capacity), cclzSuccess);
  EXPECT_EQ(capacity, 64 + input.size());
  std::vector<uint8_t> frame(capacity);
  size_t bytes = 0;
  ASSERT_EQ(cclzEncodeHost(codec.get(), input.data(), count, type, frame.data(), capacity, &bytes),
            cclzSuccess);
  EXPECT_EQ(bytes, capacity);
  EXPECT_EQ(firstMismatch(frame.data() + 64, input.data(), input.size()), SIZE_MAX);
  cclzFrameInfo_t info{};
  info.size = sizeof info;
  ASSERT_EQ(cclzFrameGetInfo(frame.data(), bytes, &info), cclzSuccess);
  EXPECT_EQ(info.codec, cclzCodecNone);
  EXPECT_EQ(info.dtype, type);
  EXPECT_EQ(info.count, count);
  GuardedBuffer out(input.size());
  ASSERT_EQ(cclzDecodeHost(codec.get(), frame.data(), bytes, out.data(), count, type), cclzSuccess);
  EXPECT_EQ(firstMismatch(out.data(), input.data(), input.size()), SIZE_MAX);
  EXPECT_TRUE(out.guardsIntact());
  // A truncated frame is a corrupt frame.
  EXPECT_EQ(cclzDecodeHost(codec.get(), frame.data(), bytes - 1, out.data(), count, type),
            cclzCorruptFrame);
}

INSTANTIATE_TEST_SUITE_P(All, CodecApiNone,
                         testing::Combine(testing::Values(cclzInt8, cclzUint8, cclzInt32,
                                                          cclzUint32, cclzInt64, cclzUint64,
                                                          cclzFloat16, cclzFloat32, cclzFloat64,
                                                          cclzBfloat16),
                                          testing::Values(size_t{0}, size_t{1}, size_t{7},
                                                          size_t{4097}, size_t{1000001})),
                         [](const testing::TestParamInfo<NoneApiParam>& info) {
                           return std::string(dtypeLabel(std::get<0>(info.param))) + "_n" +
                                  std::to_string(std::get<1>(info.param));
                         });

// A codec handle is reusable across sizes and dtypes, and a failure in between leaves it usable.
TEST(CodecApi, HandleIsReusable) {
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  CodecPtr codec = makeCodec(config);
  ASSERT_TRUE(codec);
  for (int round = 0; round < 3; ++round) {
    for (int dtype : losslessDtypes()) {
      for (size_t count : {size_t{5000}, size_t{1}, size_t{70000}}) {
        const auto type = static_cast<cclzDataType_t>(dtype);
        const auto input =
            makeData(DataKind::kGauss1, dtype, count, 4096, mixSeed(round, dtype, count));
        size_t capacity = 0;
        ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), count, type, &capacity), cclzSuccess);
        std::vector<uint8_t> frame(capacity);
        size_t bytes = 0;
        ASSERT_EQ(
            cclzEncodeHost(codec.get(), input.data(), count, type, frame.data(), capacity, &bytes),
            cclzSuccess);
        // A failing call in between.
        ASSERT_EQ(cclzEncodeHost(codec.get(), input.data(), count, type, frame.data(), 10, &bytes),
                  cclzBufferTooSmall);
        ASSERT_EQ(
            cclzEncodeHost(codec.get(), input.data(), count, type, frame.data(), capacity, &bytes),
            cclzSuccess);
        std::vector<uint8_t> out(input.size());
        ASSERT_EQ(cclzDecodeHost(codec.get(), frame.data(), bytes, out.data(), count, type),
                  cclzSuccess);
        ASSERT_EQ(firstMismatch(out.data(), input.data(), input.size()), SIZE_MAX);
      }
    }
  }
}

}  // namespace
}  // namespace cclz::test
