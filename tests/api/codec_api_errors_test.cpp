// Argument checking of the codec entry points (cclz.h): invalid arguments are rejected with the
// documented result code and a message, never guessed, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "support/codec_handle.h"
#include "support/data.h"

namespace cclz::test {
namespace {

cclzResult_t create(const cclzCodecConfig_t& config) {
  cclzCodec_t codec = reinterpret_cast<cclzCodec_t>(0x1);  // must be overwritten
  const cclzResult_t r = cclzCodecCreate(&codec, &config);
  if (r == cclzSuccess) {
    EXPECT_NE(codec, nullptr);
    cclzCodecDestroy(codec);
  } else {
    EXPECT_EQ(codec, nullptr) << "a failed create leaves *codec NULL";
    EXPECT_STRNE(cclzGetLastError(nullptr), "");
  }
  return r;
}

cclzCodecConfig_t lossless(int chunk) {
  cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
  c.chunkElems = chunk;
  return c;
}

TEST(CodecApiErrors, CreateChecksPointersAndConfigIdentity) {
  cclzCodecConfig_t good = CCLZ_CODEC_CONFIG_INITIALIZER;
  cclzCodec_t codec = nullptr;
  EXPECT_EQ(cclzCodecCreate(nullptr, &good), cclzInvalidArgument);
  EXPECT_EQ(cclzCodecCreate(&codec, nullptr), cclzInvalidArgument);
  EXPECT_EQ(create(good), cclzSuccess);

  cclzCodecConfig_t bad = good;
  bad.magic = 0;
  EXPECT_EQ(create(bad), cclzInvalidArgument);
  bad = good;
  bad.size = sizeof(cclzCodecConfig_t) - 4;
  EXPECT_EQ(create(bad), cclzInvalidArgument);
  bad = good;
  bad.size = 0;
  EXPECT_EQ(create(bad), cclzInvalidArgument);
  bad = good;
  bad.version = CCLZ_VERSION_CODE + 100;  // another minor version
  EXPECT_EQ(create(bad), cclzInvalidArgument);
  bad = good;
  bad.version = CCLZ_VERSION_CODE + 10000;  // another major version
  EXPECT_EQ(create(bad), cclzInvalidArgument);
  bad = good;
  bad.codec = static_cast<cclzCodecType_t>(cclzNumCodecs);
  EXPECT_EQ(create(bad), cclzInvalidArgument);
  cclzCodecConfig_t none = good;
  none.codec = cclzCodecNone;
  EXPECT_EQ(create(none), cclzSuccess);
}

TEST(CodecApiErrors, ChunkElems) {
  for (int chunk : {0, 1024, 2048, 4096})
    EXPECT_EQ(create(lossless(chunk)), cclzSuccess) << "chunkElems " << chunk;
  for (int chunk : {1000, 1536, 3072, 512, 16, 1, 8192, 65536, 131072, 1 << 30, -1024, -1})
    EXPECT_EQ(create(lossless(chunk)), cclzInvalidArgument) << "chunkElems " << chunk;
}

// C callers (and ctypes) can pass any int where cclz.h has an enum. The library must reject such
// values, and reading them must not be undefined behaviour in its C++ (UBSan's -fsanitize=enum
// checks this in the CCLZ_SANITIZE build).
// A field of another codec is rejected with a message that names it, for every codec pair.
TEST(CodecApiErrors, FieldsOfAnotherCodec) {
  struct Field {
    const char* name;
    cclzCodecType_t owner;
    void (*set)(cclzCodecConfig_t&);
  };
  const Field fields[] = {
      {"chunkElems", cclzCodecLossless, [](cclzCodecConfig_t& c) { c.chunkElems = 4096; }},
      {"bits", cclzCodecQgrad, [](cclzCodecConfig_t& c) { c.bits = 8; }},
      {"blockElems", cclzCodecQgrad, [](cclzCodecConfig_t& c) { c.blockElems = 64; }},
      {"rounding", cclzCodecQgrad, [](cclzCodecConfig_t& c) { c.rounding = cclzRoundStochastic; }},
      {"seed", cclzCodecQgrad, [](cclzCodecConfig_t& c) { c.seed = 7; }},
      {"fp8Format", cclzCodecFp8, [](cclzCodecConfig_t& c) { c.fp8Format = cclzFp8E5M2; }},
      {"fp8RowElems", cclzCodecFp8, [](cclzCodecConfig_t& c) { c.fp8RowElems = 2048; }},
      {"fp8HadamardSize", cclzCodecFp8, [](cclzCodecConfig_t& c) { c.fp8HadamardSize = 32; }},
      {"fp8Rotation", cclzCodecFp8,
       [](cclzCodecConfig_t& c) { c.fp8Rotation = cclzFp8RotateAlways; }},
      {"fp8RotateThreshold", cclzCodecFp8, [](cclzCodecConfig_t& c) { c.fp8RotateThreshold = 3; }},
      {"fp8ScaleCandidates", cclzCodecFp8, [](cclzCodecConfig_t& c) { c.fp8ScaleCandidates = 4; }},
  };
  for (cclzCodecType_t codec : {cclzCodecNone, cclzCodecLossless, cclzCodecFp8, cclzCodecQgrad}) {
    for (const Field& f : fields) {
      cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
      c.codec = codec;
      f.set(c);
      if (f.owner == codec) {
        EXPECT_EQ(create(c), cclzSuccess) << f.name << " on its own codec " << codec;
        continue;
      }
      EXPECT_EQ(create(c), cclzInvalidArgument) << f.name << " on codec " << codec;
      EXPECT_NE(std::string(cclzGetLastError(nullptr)).find(f.name), std::string::npos)
          << cclzGetLastError(nullptr);
    }
  }
}

TEST(CodecApiErrors, EnumValuesOutsideTheEnum) {
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  for (int type : {-1, static_cast<int>(cclzNumCodecs), 1000}) {
    int raw = type;
    std::memcpy(&config.codec, &raw, sizeof raw);
    EXPECT_EQ(create(config), cclzInvalidArgument) << "codec " << type;
  }
  config = CCLZ_CODEC_CONFIG_INITIALIZER;
  CodecPtr codec = makeCodec(config);
  ASSERT_TRUE(codec);
  std::vector<uint8_t> buffer(4096);
  size_t n = 0;
  for (int t : {-1, 16, 1000, 1 << 30}) {
    cclzDataType_t type;
    std::memcpy(&type, &t, sizeof t);
    EXPECT_EQ(cclzCodecMaxEncodedSize(codec.get(), 10, type, &n), cclzInvalidArgument) << t;
    EXPECT_EQ(
        cclzEncodeHost(codec.get(), buffer.data(), 10, type, buffer.data(), buffer.size(), &n),
        cclzInvalidArgument)
        << t;
    EXPECT_EQ(cclzDecodeHost(codec.get(), buffer.data(), buffer.size(), buffer.data(), 10, type),
              cclzInvalidArgument)
        << t;
  }
}

class CodecApiCalls : public testing::Test {
 protected:
  void SetUp() override {
    cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
    codec_ = makeCodec(config);
    ASSERT_TRUE(codec_);
    input_ = makeData(DataKind::kGauss1, cclzBfloat16, kCount, 4096, 17);
    ASSERT_EQ(cclzCodecMaxEncodedSize(codec_.get(), kCount, cclzBfloat16, &capacity_), cclzSuccess);
    frame_.resize(capacity_);
    ASSERT_EQ(cclzEncodeHost(codec_.get(), input_.data(), kCount, cclzBfloat16, frame_.data(),
                             capacity_, &bytes_),
              cclzSuccess);
    out_.resize(input_.size());
  }
  static constexpr size_t kCount = 3000;
  CodecPtr codec_;
  std::vector<uint8_t> input_, frame_, out_;
  size_t capacity_ = 0, bytes_ = 0;
};

TEST_F(CodecApiCalls, NullPointers) {
  cclzCodec_t c = codec_.get();
  size_t n = 0;
  EXPECT_EQ(cclzCodecMaxEncodedSize(nullptr, kCount, cclzBfloat16, &n), cclzInvalidArgument);
  EXPECT_EQ(cclzCodecMaxEncodedSize(c, kCount, cclzBfloat16, nullptr), cclzInvalidArgument);
  EXPECT_EQ(
      cclzEncodeHost(nullptr, input_.data(), kCount, cclzBfloat16, frame_.data(), capacity_, &n),
      cclzInvalidArgument);
  EXPECT_EQ(cclzEncodeHost(c, nullptr, kCount, cclzBfloat16, frame_.data(), capacity_, &n),
            cclzInvalidArgument);
  EXPECT_EQ(cclzEncodeHost(c, input_.data(), kCount, cclzBfloat16, nullptr, capacity_, &n),
            cclzInvalidArgument);
  EXPECT_EQ(cclzDecodeHost(nullptr, frame_.data(), bytes_, out_.data(), kCount, cclzBfloat16),
            cclzInvalidArgument);
  EXPECT_EQ(cclzDecodeHost(c, nullptr, bytes_, out_.data(), kCount, cclzBfloat16),
            cclzInvalidArgument);
  EXPECT_EQ(cclzDecodeHost(c, frame_.data(), bytes_, nullptr, kCount, cclzBfloat16),
            cclzInvalidArgument);
  EXPECT_EQ(cclzCodecSynchronize(nullptr, &n), cclzInvalidArgument);
  EXPECT_EQ(cclzEncode(nullptr, input_.data(), kCount, cclzBfloat16, frame_.data(), capacity_,
                       nullptr, nullptr),
            cclzInvalidArgument);
  EXPECT_EQ(cclzDecode(nullptr, frame_.data(), bytes_, out_.data(), kCount, cclzBfloat16, nullptr),
            cclzInvalidArgument);
  EXPECT_EQ(cclzCodecDestroy(nullptr), cclzSuccess);  // like free(NULL)
  // An empty message needs no source or destination.
  std::vector<uint8_t> empty(64);
  ASSERT_EQ(cclzEncodeHost(c, nullptr, 0, cclzBfloat16, empty.data(), empty.size(), &n),
            cclzSuccess);
  EXPECT_EQ(n, 64u);
  EXPECT_EQ(cclzDecodeHost(c, empty.data(), n, nullptr, 0, cclzBfloat16), cclzSuccess);
}

TEST_F(CodecApiCalls, Dtypes) {
  size_t n = 0;
  for (cclzDataType_t t :
       {cclzInt8, cclzUint8, cclzInt32, cclzUint32, cclzInt64, cclzUint64, cclzFloat64}) {
    EXPECT_EQ(cclzCodecMaxEncodedSize(codec_.get(), kCount, t, &n), cclzNotSupported) << t;
    EXPECT_EQ(cclzEncodeHost(codec_.get(), input_.data(), 100, t, frame_.data(), capacity_, &n),
              cclzNotSupported)
        << t;
    EXPECT_EQ(cclzDecodeHost(codec_.get(), frame_.data(), bytes_, out_.data(), 100, t),
              cclzNotSupported)
        << t;
  }
  EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("lossless"), std::string::npos);
  for (int t : {static_cast<int>(cclzNumTypes), 15}) {
    const auto type = static_cast<cclzDataType_t>(t);
    EXPECT_EQ(cclzCodecMaxEncodedSize(codec_.get(), kCount, type, &n), cclzInvalidArgument) << t;
    EXPECT_EQ(cclzEncodeHost(codec_.get(), input_.data(), 100, type, frame_.data(), capacity_, &n),
              cclzInvalidArgument);
    EXPECT_EQ(cclzDecodeHost(codec_.get(), frame_.data(), bytes_, out_.data(), 100, type),
              cclzInvalidArgument);
  }
}

TEST_F(CodecApiCalls, CapacityBelowMaxSizeIsTooSmall) {
  size_t n = 0;
  // Even though this frame would fit, the capacity must cover the worst case.
  ASSERT_LT(bytes_, capacity_ - 1);
  EXPECT_EQ(cclzEncodeHost(codec_.get(), input_.data(), kCount, cclzBfloat16, frame_.data(),
                           capacity_ - 1, &n),
            cclzBufferTooSmall);
  EXPECT_EQ(cclzEncodeHost(codec_.get(), input_.data(), kCount, cclzBfloat16, frame_.data(), 0, &n),
            cclzBufferTooSmall);
  cclzCodecConfig_t none = CCLZ_CODEC_CONFIG_INITIALIZER;
  none.codec = cclzCodecNone;
  CodecPtr noneCodec = makeCodec(none);
  ASSERT_TRUE(noneCodec);
  EXPECT_EQ(cclzEncodeHost(noneCodec.get(), input_.data(), kCount, cclzBfloat16, frame_.data(),
                           64 + 2 * kCount - 1, &n),
            cclzBufferTooSmall);
  EXPECT_EQ(cclzCodecMaxEncodedSize(codec_.get(), size_t{1} << 60, cclzBfloat16, &n),
            cclzInvalidArgument);
}

TEST_F(CodecApiCalls, CorruptFrameCode) {
  std::vector<uint8_t> bad(frame_);
  bad[70] ^= 0xFF;  // the chunk table
  EXPECT_NE(cclzDecodeHost(codec_.get(), bad.data(), bytes_, out_.data(), kCount, cclzBfloat16),
            cclzSuccess);
  bad = frame_;
  bad[10] ^= 1;  // the header's count
  EXPECT_EQ(cclzDecodeHost(codec_.get(), bad.data(), bytes_, out_.data(), kCount, cclzBfloat16),
            cclzCorruptFrame);
  EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("checksum"), std::string::npos)
      << cclzGetLastError(nullptr);
  EXPECT_EQ(cclzDecodeHost(codec_.get(), frame_.data(), 63, out_.data(), kCount, cclzBfloat16),
            cclzCorruptFrame);
}

// Device calls: a build without CUDA says so (cclzInvalidUsage); a build with CUDA rejects host
// pointers (cclzInvalidArgument), with or without a GPU.
TEST_F(CodecApiCalls, DeviceCalls) {
  cclzBuildInfo_t info{};
  info.size = sizeof info;
  ASSERT_EQ(cclzGetBuildInfo(&info), cclzSuccess);
  const cclzResult_t expected = info.hasCuda ? cclzInvalidArgument : cclzInvalidUsage;
  EXPECT_EQ(cclzEncode(codec_.get(), input_.data(), kCount, cclzBfloat16, frame_.data(), capacity_,
                       nullptr, nullptr),
            expected);
  EXPECT_STRNE(cclzGetLastError(nullptr), "");
  EXPECT_EQ(
      cclzDecode(codec_.get(), frame_.data(), bytes_, out_.data(), kCount, cclzBfloat16, nullptr),
      expected);
  if (!info.hasCuda) {
    EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("CUDA"), std::string::npos);
    size_t last = 123;
    EXPECT_EQ(cclzCodecSynchronize(codec_.get(), &last), cclzSuccess);
    EXPECT_EQ(last, 0u);
  }
}

TEST_F(CodecApiCalls, LastErrorFollowsEachCall) {
  size_t n = 0;
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec_.get(), kCount, cclzInt32, &n), cclzNotSupported);
  const std::string message = cclzGetLastError(nullptr);
  EXPECT_FALSE(message.empty());
  EXPECT_NE(message.find("cclzCodecMaxEncodedSize"), std::string::npos) << message;
  // (cclzGetLastError(comm) with a communicator: tests/collective, loopback_test.cpp.)
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec_.get(), kCount, cclzBfloat16, &n), cclzSuccess);
  EXPECT_STREQ(cclzGetLastError(nullptr), "");
  ASSERT_EQ(cclzDecodeHost(codec_.get(), frame_.data(), 10, out_.data(), kCount, cclzBfloat16),
            cclzCorruptFrame);
  EXPECT_STRNE(cclzGetLastError(nullptr), "");
  ASSERT_EQ(cclzDecodeHost(codec_.get(), frame_.data(), bytes_, out_.data(), kCount, cclzBfloat16),
            cclzSuccess);
  EXPECT_STREQ(cclzGetLastError(nullptr), "");
}

}  // namespace
}  // namespace cclz::test
