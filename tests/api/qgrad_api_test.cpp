// Argument checking of the qgrad configuration and the error-feedback entry points (cclz.h): every
// invalid argument is rejected with the documented code and a message, and nothing is changed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "support/codec_handle.h"
#include "support/qgrad_setup.h"

namespace cclz::test {
namespace {

cclzResult_t create(const cclzCodecConfig_t& config) {
  cclzCodec_t codec = reinterpret_cast<cclzCodec_t>(0x1);
  const cclzResult_t r = cclzCodecCreate(&codec, &config);
  if (r == cclzSuccess) {
    cclzCodecDestroy(codec);
  } else {
    EXPECT_EQ(codec, nullptr);
    EXPECT_STRNE(cclzGetLastError(nullptr), "");
  }
  return r;
}

TEST(QgradApi, Configuration) {
  for (int bits : {0, 2, 4, 8})
    for (int block : {0, 32, 64, 128, 256})
      EXPECT_EQ(create(qgradConfig(bits, block)), cclzSuccess) << bits << " " << block;
  for (int bits : {1, 3, 5, 16, -4})
    EXPECT_EQ(create(qgradConfig(bits, 64)), cclzInvalidArgument) << "bits " << bits;
  for (int block : {16, 48, 96, 512, -64, 1})
    EXPECT_EQ(create(qgradConfig(4, block)), cclzInvalidArgument) << "block " << block;
  EXPECT_EQ(create(qgradConfig(4, 64, static_cast<cclzRounding_t>(2))), cclzInvalidArgument);
  EXPECT_EQ(create(qgradConfig(4, 64, static_cast<cclzRounding_t>(-1))), cclzInvalidArgument);
  EXPECT_EQ(create(qgradConfig(4, 64, cclzRoundStochastic, ~0ull)), cclzSuccess);
  cclzCodecConfig_t c = qgradConfig(4, 64);
  c.chunkElems = 1024;  // a lossless field: qgrad's block size is blockElems
  EXPECT_EQ(create(c), cclzInvalidArgument);
  EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("blockElems"), std::string::npos);
}

TEST(QgradApi, Dtypes) {
  CodecPtr codec = makeCodec(qgradConfig(4, 64));
  ASSERT_TRUE(codec);
  size_t bytes = 0;
  EXPECT_EQ(cclzCodecMaxEncodedSize(codec.get(), 10, cclzFloat32, &bytes), cclzSuccess);
  EXPECT_EQ(cclzCodecMaxEncodedSize(codec.get(), 10, cclzBfloat16, &bytes), cclzSuccess);
  for (cclzDataType_t t : {cclzFloat16, cclzFloat64, cclzInt8, cclzInt32}) {
    EXPECT_EQ(cclzCodecMaxEncodedSize(codec.get(), 10, t, &bytes), cclzNotSupported);
    EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("fp32 or bf16"), std::string::npos);
  }
  std::vector<uint8_t> src(64), dst(256);
  EXPECT_EQ(cclzEncodeHost(codec.get(), src.data(), 10, cclzFloat16, dst.data(), dst.size(),
                           nullptr),
            cclzNotSupported);
  EXPECT_EQ(cclzEncodeHost(codec.get(), src.data(), 10, static_cast<cclzDataType_t>(42),
                           dst.data(), dst.size(), nullptr),
            cclzInvalidArgument);
}

TEST(QgradApi, Bf16ResidualLifecycle) {
  cclzFeedback_t f = nullptr;
  EXPECT_EQ(cclzFeedbackCreateWithDtype(&f, 10, cclzMemoryHost, cclzFloat16), cclzNotSupported);
  EXPECT_EQ(f, nullptr);
  EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("cclzFloat32 or cclzBfloat16"),
            std::string::npos);
  ASSERT_EQ(cclzFeedbackCreateWithDtype(&f, 10, cclzMemoryHost, cclzBfloat16), cclzSuccess);
  float* asFloats = nullptr;
  EXPECT_EQ(cclzFeedbackGetState(f, &asFloats, nullptr, nullptr), cclzInvalidUsage);
  EXPECT_EQ(asFloats, nullptr);
  void* residual = nullptr;
  cclzDataType_t dtype = cclzFloat32;
  EXPECT_EQ(cclzFeedbackGetResidual(f, nullptr, &dtype), cclzInvalidArgument);
  ASSERT_EQ(cclzFeedbackGetResidual(f, &residual, &dtype), cclzSuccess);
  EXPECT_EQ(dtype, cclzBfloat16);
  ASSERT_NE(residual, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(residual) % 16, 0u);
  auto* r = static_cast<uint16_t*>(residual);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(r[i], 0u);
  r[3] = 0x3FC0;  // 1.5
  EXPECT_EQ(cclzFeedbackReset(f, nullptr), cclzSuccess);
  EXPECT_EQ(r[3], 0u);
  EXPECT_EQ(cclzFeedbackDestroy(f), cclzSuccess);
  // An fp32 state tells its dtype too.
  ASSERT_EQ(cclzFeedbackCreate(&f, 4, cclzMemoryHost), cclzSuccess);
  ASSERT_EQ(cclzFeedbackGetResidual(f, &residual, &dtype), cclzSuccess);
  EXPECT_EQ(dtype, cclzFloat32);
  EXPECT_EQ(cclzFeedbackDestroy(f), cclzSuccess);
  EXPECT_EQ(cclzFeedbackGetResidual(nullptr, &residual, &dtype), cclzInvalidArgument);
}

TEST(QgradApi, FeedbackLifecycle) {
  cclzFeedback_t f = nullptr;
  EXPECT_EQ(cclzFeedbackCreate(nullptr, 10, cclzMemoryHost), cclzInvalidArgument);
  EXPECT_EQ(cclzFeedbackCreate(&f, 10, static_cast<cclzMemoryType_t>(7)), cclzInvalidArgument);
  EXPECT_EQ(f, nullptr);
  EXPECT_EQ(cclzFeedbackCreate(&f, (size_t{1} << 36) + 1, cclzMemoryHost), cclzInvalidArgument);
  cclzBuildInfo_t info{};
  info.size = sizeof info;
  ASSERT_EQ(cclzGetBuildInfo(&info), cclzSuccess);
  if (!info.hasCuda) {
    EXPECT_EQ(cclzFeedbackCreate(&f, 10, cclzMemoryDevice), cclzInvalidUsage);
    EXPECT_EQ(f, nullptr);
  }
  ASSERT_EQ(cclzFeedbackCreate(&f, 10, cclzMemoryHost), cclzSuccess);
  float* residual = nullptr;
  size_t count = 0;
  uint64_t step = 99;
  ASSERT_EQ(cclzFeedbackGetState(f, &residual, &count, &step), cclzSuccess);
  ASSERT_NE(residual, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(residual) % 16, 0u);
  EXPECT_EQ(count, 10u);
  EXPECT_EQ(step, 0u);
  for (size_t i = 0; i < 10; ++i) EXPECT_EQ(residual[i], 0.0f);
  EXPECT_EQ(cclzFeedbackSetStep(f, 123), cclzSuccess);
  residual[3] = 1.5f;
  ASSERT_EQ(cclzFeedbackGetState(f, nullptr, nullptr, &step), cclzSuccess);
  EXPECT_EQ(step, 123u);
  EXPECT_EQ(cclzFeedbackReset(f, nullptr), cclzSuccess);
  ASSERT_EQ(cclzFeedbackGetState(f, nullptr, nullptr, &step), cclzSuccess);
  EXPECT_EQ(step, 0u);
  EXPECT_EQ(residual[3], 0.0f);
  EXPECT_EQ(cclzFeedbackDestroy(f), cclzSuccess);
  EXPECT_EQ(cclzFeedbackDestroy(nullptr), cclzSuccess);
  EXPECT_EQ(cclzFeedbackGetState(nullptr, &residual, &count, &step), cclzInvalidArgument);
  EXPECT_EQ(cclzFeedbackSetStep(nullptr, 1), cclzInvalidArgument);
  EXPECT_EQ(cclzFeedbackReset(nullptr, nullptr), cclzInvalidArgument);
  // An empty bucket is allowed.
  ASSERT_EQ(cclzFeedbackCreate(&f, 0, cclzMemoryHost), cclzSuccess);
  EXPECT_EQ(cclzFeedbackDestroy(f), cclzSuccess);
}

TEST(QgradApi, EncodeFeedbackHostErrors) {
  CodecPtr codec = makeCodec(qgradConfig(4, 64));
  ASSERT_TRUE(codec);
  const size_t n = 100;
  FeedbackPtr fb = makeFeedback(n);
  ASSERT_TRUE(fb);
  std::vector<float> g(n, 0.5f);
  size_t capacity = 0, size = 7;
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), n, cclzFloat32, &capacity), cclzSuccess);
  std::vector<uint8_t> dst(capacity);
  const auto stepOf = [&] {
    uint64_t s = 0;
    EXPECT_EQ(cclzFeedbackGetState(fb.get(), nullptr, nullptr, &s), cclzSuccess);
    return s;
  };
  EXPECT_EQ(cclzEncodeFeedbackHost(nullptr, fb.get(), g.data(), n, cclzFloat32, dst.data(),
                                   capacity, &size),
            cclzInvalidArgument);
  EXPECT_EQ(cclzEncodeFeedbackHost(codec.get(), nullptr, g.data(), n, cclzFloat32, dst.data(),
                                   capacity, &size),
            cclzInvalidArgument);
  EXPECT_EQ(cclzEncodeFeedbackHost(codec.get(), fb.get(), nullptr, n, cclzFloat32, dst.data(),
                                   capacity, &size),
            cclzInvalidArgument);
  EXPECT_EQ(cclzEncodeFeedbackHost(codec.get(), fb.get(), g.data(), n, cclzFloat32, nullptr,
                                   capacity, &size),
            cclzInvalidArgument);
  EXPECT_EQ(cclzEncodeFeedbackHost(codec.get(), fb.get(), g.data(), n - 1, cclzFloat32,
                                   dst.data(), capacity, &size),
            cclzInvalidArgument);
  EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("holds 100 elements"), std::string::npos)
      << cclzGetLastError(nullptr);
  EXPECT_EQ(cclzEncodeFeedbackHost(codec.get(), fb.get(), g.data(), n, cclzFloat32, dst.data(),
                                   capacity - 1, &size),
            cclzBufferTooSmall);
  EXPECT_EQ(cclzEncodeFeedbackHost(codec.get(), fb.get(), g.data(), n, cclzFloat16, dst.data(),
                                   capacity, &size),
            cclzNotSupported);
  EXPECT_EQ(size, 7u) << "a rejected call reports no size";
  EXPECT_EQ(stepOf(), 0u) << "a rejected call does not advance the step";
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(residualOf(fb)[i], 0.0f);

  // Codecs without a residual.
  for (cclzCodecType_t type : {cclzCodecLossless, cclzCodecNone}) {
    cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
    c.codec = type;
    CodecPtr other = makeCodec(c);
    size_t cap = 0;
    ASSERT_EQ(cclzCodecMaxEncodedSize(other.get(), n, cclzFloat32, &cap), cclzSuccess);
    std::vector<uint8_t> d(cap);
    EXPECT_EQ(cclzEncodeFeedbackHost(other.get(), fb.get(), g.data(), n, cclzFloat32, d.data(),
                                     cap, &size),
              cclzNotSupported);
    EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("no error feedback"), std::string::npos);
  }
  EXPECT_EQ(stepOf(), 0u);

  ASSERT_EQ(cclzEncodeFeedbackHost(codec.get(), fb.get(), g.data(), n, cclzFloat32, dst.data(),
                                   capacity, &size),
            cclzSuccess);
  EXPECT_EQ(size, capacity);
  EXPECT_EQ(stepOf(), 1u);
}

// The device entry points exist in every build; without CUDA they say so.
TEST(QgradApi, DeviceCallsWithoutCuda) {
  cclzBuildInfo_t info{};
  info.size = sizeof info;
  ASSERT_EQ(cclzGetBuildInfo(&info), cclzSuccess);
  if (info.hasCuda) GTEST_SKIP() << "this build has CUDA (qgrad_gpu_test covers the device)";
  CodecPtr codec = makeCodec(qgradConfig(4, 64));
  FeedbackPtr fb = makeFeedback(4);
  float g[4] = {1, 2, 3, 4};
  uint8_t dst[128];
  EXPECT_EQ(cclzEncodeFeedback(codec.get(), fb.get(), g, 4, cclzFloat32, dst, sizeof dst, nullptr,
                               nullptr),
            cclzInvalidUsage);
  EXPECT_EQ(cclzEncodeFeedback(nullptr, fb.get(), g, 4, cclzFloat32, dst, sizeof dst, nullptr,
                               nullptr),
            cclzInvalidArgument);
}

}  // namespace
}  // namespace cclz::test
