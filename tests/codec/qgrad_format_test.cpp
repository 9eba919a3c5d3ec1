// The qgrad format, pinned by hand-checked frames (docs/formats.md, "qgrad"): header fields, layout,
// bf16 scales rounded up, two's complement codes packed least significant first, ties to even,
// the stochastic-rounding draws (splitmix64, recomputed here from the spec) and the frame size.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "support/codec_handle.h"
#include "support/frame_view.h"
#include "support/qgrad_setup.h"
#include "support/qgrad_view.h"

namespace cclz::test {
namespace {

std::vector<uint8_t> asBytes(const std::vector<float>& v) {
  std::vector<uint8_t> b(4 * v.size());
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

std::vector<uint8_t> asBytes(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> b(2 * v.size());
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

void expectHeader(const std::vector<uint8_t>& f, int dtype, uint64_t count, uint32_t block,
                  int bits, int rounding, uint64_t frameBytes) {
  const FrameView v = viewFrame(f.data());
  EXPECT_EQ(readLE<uint32_t>(f.data()), 0x5A4C4343u);
  EXPECT_EQ(v.version, 1);
  EXPECT_EQ(v.codec, 3);
  EXPECT_EQ(v.dtype, dtype);
  EXPECT_EQ(v.flags, 0);
  EXPECT_EQ(v.count, count);
  EXPECT_EQ(v.frameBytes, frameBytes);
  EXPECT_EQ(f.size(), frameBytes);
  EXPECT_EQ(v.chunkElems, block);
  EXPECT_EQ(v.numChunks, (count + block - 1) / block);
  EXPECT_EQ(v.params[0], bits);
  EXPECT_EQ(v.params[1], rounding);
  for (int i = 2; i < 8; ++i) EXPECT_EQ(v.params[i], 0);
  EXPECT_EQ(v.checksum, fnv1a32(f.data(), 60));
}

// int4, fp32, one block: scale 7/7 = 1 (0x3F80); codes 1, -0.5 -> 0 (ties to even), 0, 7,
// -3.5 -> -4 (ties to even, 0xC); bytes 0x01, 0x70, 0x0C; codes at alignUp(64 + 2, 16) = 80.
TEST(QgradFormat, Int4HandChecked) {
  CodecPtr codec = makeCodec(qgradConfig(4, 32));
  ASSERT_TRUE(codec);
  const std::vector<float> x = {1.0f, -0.5f, 0.25f, 7.0f, -3.5f};
  const HostFrame f = encodeHost(codec.get(), cclzFloat32, asBytes(x), x.size());
  ASSERT_NO_FATAL_FAILURE(expectHeader(f.bytes, cclzFloat32, 5, 32, 4, 0, 96));
  EXPECT_EQ(f.capacity, 96u);
  EXPECT_EQ(readLE<uint16_t>(&f.bytes[64]), 0x3F80);
  for (size_t i = 66; i < 80; ++i) EXPECT_EQ(f.bytes[i], 0) << "gap byte " << i;
  EXPECT_EQ(f.bytes[80], 0x01);
  EXPECT_EQ(f.bytes[81], 0x70);
  EXPECT_EQ(f.bytes[82], 0x0C);
  for (size_t i = 83; i < 96; ++i) EXPECT_EQ(f.bytes[i], 0) << "padding byte " << i;

  std::vector<float> out(5, 99.0f);
  ASSERT_EQ(cclzDecodeHost(codec.get(), f.bytes.data(), f.bytes.size(), out.data(), 5, cclzFloat32),
            cclzSuccess);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 0.0f, 0.0f, 7.0f, -4.0f}));

  // With error feedback from a zero residual: the residual is what was not sent.
  FeedbackPtr fb = makeFeedback(5);
  const std::vector<uint8_t> g = encodeFeedbackHost(codec.get(), fb.get(), x.data(), 5, cclzFloat32);
  EXPECT_EQ(g, f.bytes) << "the first step from a zero residual encodes the gradient itself";
  const float* r = residualOf(fb);
  EXPECT_EQ(std::vector<float>(r, r + 5), (std::vector<float>{0.0f, -0.5f, 0.25f, 0.0f, 0.5f}));
  uint64_t step = 0;
  ASSERT_EQ(cclzFeedbackGetState(fb.get(), nullptr, nullptr, &step), cclzSuccess);
  EXPECT_EQ(step, 1u);
}

// int2 (ternary), bf16: scale 1; 0.25 -> 0, -1 -> -1 (0b11), 0.75 -> 1, 0.125 -> 0, -0.375 -> 0,
// 0.5 -> 0 (ties to even); byte 0 = 0b00'01'11'00 = 0x1C, byte 1 = 0.
TEST(QgradFormat, Int2HandChecked) {
  CodecPtr codec = makeCodec(qgradConfig(2, 32));
  ASSERT_TRUE(codec);
  const std::vector<uint16_t> x = {0x3E80, 0xBF80, 0x3F40, 0x3E00, 0xBEC0, 0x3F00};
  const HostFrame f = encodeHost(codec.get(), cclzBfloat16, asBytes(x), x.size());
  ASSERT_NO_FATAL_FAILURE(expectHeader(f.bytes, cclzBfloat16, 6, 32, 2, 0, 96));
  EXPECT_EQ(readLE<uint16_t>(&f.bytes[64]), 0x3F80);
  EXPECT_EQ(f.bytes[80], 0x1C);
  EXPECT_EQ(f.bytes[81], 0x00);
  std::vector<uint16_t> out(6, 0x1234);
  ASSERT_EQ(
      cclzDecodeHost(codec.get(), f.bytes.data(), f.bytes.size(), out.data(), 6, cclzBfloat16),
      cclzSuccess);
  EXPECT_EQ(out, (std::vector<uint16_t>{0, 0xBF80, 0x3F80, 0, 0, 0}));
}

// int8, two blocks of 32, the second ragged (2 elements): its scale 1/127 = 0x3C010204 in fp32
// rounds *up* to bf16 0x3C02 (0.0079345703125), so 1.0 becomes 126 (1 * 126.0307...) and -0.5
// becomes -63 (0xC1), not 127 and -64. The first block is 32 x 0.5: scale 0.5/127 -> 0x3B82.
TEST(QgradFormat, Int8ScaleRoundsUp) {
  CodecPtr codec = makeCodec(qgradConfig(8, 32));
  ASSERT_TRUE(codec);
  std::vector<float> x(34, 0.5f);
  x[32] = 1.0f;
  x[33] = -0.5f;
  const HostFrame f = encodeHost(codec.get(), cclzFloat32, asBytes(x), x.size());
  // scales 64..68, codes at 80, 34 bytes -> 48: 128 bytes.
  ASSERT_NO_FATAL_FAILURE(expectHeader(f.bytes, cclzFloat32, 34, 32, 8, 0, 128));
  EXPECT_EQ(readLE<uint16_t>(&f.bytes[64]), 0x3B82);
  EXPECT_EQ(readLE<uint16_t>(&f.bytes[66]), 0x3C02);
  EXPECT_EQ(f.bytes[80 + 32], 126);
  EXPECT_EQ(f.bytes[80 + 33], 0xC1);
  const QgradView v(f.bytes.data());
  EXPECT_EQ(v.frameBytes, 128u);
  for (size_t i = 0; i < 32; ++i) EXPECT_EQ(v.code(f.bytes.data(), i), 126) << "element " << i;
}

// A block of zeros gets the smallest normal scale (2^-126, 0x0080) and zero codes; the empty
// message is a bare header.
TEST(QgradFormat, ZerosAndEmpty) {
  CodecPtr codec = makeCodec(qgradConfig(4, 64));
  ASSERT_TRUE(codec);
  const std::vector<float> zeros(64, 0.0f);
  const HostFrame f = encodeHost(codec.get(), cclzFloat32, asBytes(zeros), 64);
  ASSERT_NO_FATAL_FAILURE(expectHeader(f.bytes, cclzFloat32, 64, 64, 4, 0, 80 + 32));
  EXPECT_EQ(readLE<uint16_t>(&f.bytes[64]), 0x0080);
  for (size_t i = 80; i < f.bytes.size(); ++i) EXPECT_EQ(f.bytes[i], 0);
  const HostFrame empty = encodeHost(codec.get(), cclzFloat32, {}, 0);
  ASSERT_NO_FATAL_FAILURE(expectHeader(empty.bytes, cclzFloat32, 0, 64, 4, 0, 64));
}

// frameBytes = alignUp(64 + 2*nb, 16) + alignUp(ceil(count*b/8), 16), for every setting.
TEST(QgradFormat, FrameSizeFormula) {
  for (int bits : {2, 4, 8}) {
    for (int block : {32, 64, 128, 256}) {
      CodecPtr codec = makeCodec(qgradConfig(bits, block));
      ASSERT_TRUE(codec);
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{33}, size_t{4097},
                           size_t{1} << 20, (size_t{1} << 36)}) {
        const uint64_t nb = (count + block - 1) / block;
        const uint64_t expected = align16(64 + 2 * nb) + align16((count * bits + 7) / 8);
        for (cclzDataType_t dtype : {cclzFloat32, cclzBfloat16}) {
          size_t bytes = 0;
          ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), count, dtype, &bytes), cclzSuccess);
          EXPECT_EQ(bytes, expected) << "bits " << bits << " block " << block << " n " << count;
        }
      }
      size_t bytes = 0;
      EXPECT_EQ(cclzCodecMaxEncodedSize(codec.get(), (size_t{1} << 36) + 1, cclzFloat32, &bytes),
                cclzInvalidArgument);
    }
  }
  // The wire target: int4 at block 64 is 34 bytes per 64 elements.
  CodecPtr codec = makeCodec(qgradConfig(0, 0));  // the defaults: int4, 64
  size_t bytes = 0;
  const size_t n = size_t{64} << 20;
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), n, cclzBfloat16, &bytes), cclzSuccess);
  EXPECT_LE(static_cast<double>(bytes) / (2.0 * n), 0.27);
  EXPECT_GE(4.0 * n / static_cast<double>(bytes), 7.4);
}

// Stochastic rounding, recomputed here from the spec's splitmix64 for a small fp32 block.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

TEST(QgradFormat, StochasticDrawsFollowTheSpec) {
  const uint64_t seed = 0x1234567890ABCDEFull, step = 5;
  CodecPtr codec = makeCodec(qgradConfig(4, 32, cclzRoundStochastic, seed));
  ASSERT_TRUE(codec);
  // absmax 7 -> scale exactly 1, so v = x and the fraction is exact.
  std::vector<float> x(32);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -6.5f + 0.40625f * static_cast<float>(i);
  x[0] = 7.0f;
  FeedbackPtr fb = makeFeedback(32);
  ASSERT_EQ(cclzFeedbackSetStep(fb.get(), step), cclzSuccess);
  const std::vector<uint8_t> f = encodeFeedbackHost(codec.get(), fb.get(), x.data(), 32, cclzFloat32);
  ASSERT_EQ(f[kOffParams + 1], 1) << "the header records stochastic rounding";
  const QgradView v(f.data());
  ASSERT_EQ(v.scale(f.data(), 0), 1.0f);
  const uint64_t key = mix(seed + mix(step));
  int roundedUp = 0;
  for (uint64_t i = 0; i < 32; ++i) {
    const uint64_t h = mix(key + (i + 1) * 0x9E3779B97F4A7C15ull);
    const double u = static_cast<double>(h >> 40) / 16777216.0;
    const double fl = std::floor(x[i]);
    const int expected = static_cast<int>(fl) + (u < x[i] - fl ? 1 : 0);
    EXPECT_EQ(v.code(f.data(), i), expected) << "element " << i << " x " << x[i] << " u " << u;
    roundedUp += expected != static_cast<int>(fl);
  }
  EXPECT_GT(roundedUp, 0);
  EXPECT_LT(roundedUp, 31);  // both directions happen
}

}  // namespace
}  // namespace cclz::test
