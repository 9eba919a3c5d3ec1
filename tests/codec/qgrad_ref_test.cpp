// The qgrad codec through the host API, against the spec (docs/formats.md, "qgrad"):
//   round trip over dtype x size (ragged) x bits x block x rounding: the decode equals the values
//   the frame's bytes define (read independently, tests/support/qgrad_view.h); the error of every
//   element is within half a step (nearest) or one step (stochastic) of its block's scale, and the
//   scale is absmax/qmax rounded up to bf16; decode-and-accumulate adds exactly those values;
//   error feedback keeps g + r_old == dequant + r_new to fp32 rounding, step after step;
//   stochastic rounding is unbiased over seeds and over steps, and reproducible;
//   NaN and Inf are reported, their blocks decode to NaN and keep their residual.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "cclz/cclz.h"
#include "support/codec_handle.h"
#include "support/data.h"
#include "support/qgrad_setup.h"
#include "support/qgrad_view.h"

namespace cclz::test {
namespace {

// Gaussian gradients whose scale changes from block to block (0.001 to 10), as real gradients do.
std::vector<uint8_t> gradient(int dtype, size_t count, uint64_t seed) {
  std::vector<uint8_t> g = makeData(DataKind::kGauss1, cclzFloat32, count, 0, seed);
  std::vector<float> f(count);
  std::memcpy(f.data(), g.data(), 4 * count);
  for (size_t i = 0; i < count; ++i)
    f[i] *= std::pow(10.0f, static_cast<float>((i / 97 + seed) % 5) - 3.0f);
  if (dtype == cclzFloat32) {
    std::memcpy(g.data(), f.data(), 4 * count);
    return g;
  }
  std::vector<uint16_t> h(count);
  for (size_t i = 0; i < count; ++i) h[i] = floatToBf16(f[i]);
  std::vector<uint8_t> out(2 * count);
  std::memcpy(out.data(), h.data(), out.size());
  return out;
}

int qmaxOf(int bits) { return (1 << (bits - 1)) - 1; }

// Checks the frame of x against the spec: scales and error bounds per block. x is what was
// encoded (in fp32).
void checkFrame(const std::vector<uint8_t>& f, const std::vector<float>& x, int bits, int block,
                bool stochastic) {
  const QgradView v(f.data());
  ASSERT_EQ(v.frameBytes, f.size());
  const int qmax = qmaxOf(bits);
  for (uint64_t k = 0; k < v.numBlocks; ++k) {
    const size_t begin = k * block, end = std::min(x.size(), begin + block);
    float m = 0;
    for (size_t i = begin; i < end; ++i) m = std::max(m, std::fabs(x[i]));
    const double s = v.scale(f.data(), k);
    const double exact = static_cast<double>(m) / qmax;
    ASSERT_GE(s, std::max(exact, 0x1p-126)) << "block " << k << ": the scale must not round down";
    ASSERT_LE(s, std::max(exact * (1 + 0x1p-7) * (1 + 0x1p-23), 0x1p-126)) << "block " << k;
    for (size_t i = begin; i < end; ++i) {
      const int q = v.code(f.data(), i);
      ASSERT_LE(std::abs(q), qmax) << "element " << i;
      const double err = std::fabs(static_cast<double>(q) * s - x[i]);
      ASSERT_LE(err, (stochastic ? 1.0 : 0.5) * s * (1 + 1e-6)) << "element " << i << " x " << x[i];
    }
  }
}

using RefParam = std::tuple<int, size_t, int, int, cclzRounding_t>;  // dtype count bits block round

class QgradRef : public testing::TestWithParam<RefParam> {};

TEST_P(QgradRef, RoundTripWithinBounds) {
  const auto& [dtype, count, bits, block, rounding] = GetParam();
  const auto type = static_cast<cclzDataType_t>(dtype);
  const bool stochastic = rounding == cclzRoundStochastic;
  CodecPtr codec = makeCodec(qgradConfig(bits, block, rounding, 42));
  ASSERT_TRUE(codec);
  const std::vector<uint8_t> input = gradient(dtype, count, mixSeed(dtype, count, bits, block));
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = elementAsFloat(dtype, input, i);

  const HostFrame f = encodeHost(codec.get(), dtype, input, count);
  ASSERT_EQ(f.bytes.size(), f.capacity) << "every frame has the size MaxEncodedSize gives";
  ASSERT_NO_FATAL_FAILURE(checkFrame(f.bytes, x, bits, block, stochastic));
  const HostFrame again = encodeHost(codec.get(), dtype, input, count);
  EXPECT_EQ(again.bytes, f.bytes) << "encoding is deterministic";

  // Plain decode: the frame's values, as fp32 or rounded to bf16.
  const QgradView v(f.bytes.data());
  std::vector<uint8_t> out(count * (dtype == cclzFloat32 ? 4 : 2) + 1, 0xEE);
  ASSERT_EQ(cclzDecodeHost(codec.get(), f.bytes.data(), f.bytes.size(), out.data(), count, type),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  for (size_t i = 0; i < count; ++i) {
    const float y = v.value(f.bytes.data(), i);
    if (dtype == cclzFloat32) {
      ASSERT_EQ(elementAsFloat(dtype, out, i), y) << "element " << i;
    } else {
      uint16_t h;
      std::memcpy(&h, out.data() + 2 * i, 2);
      ASSERT_EQ(h, floatToBf16(y)) << "element " << i;
    }
  }
  EXPECT_EQ(out.back(), 0xEE) << "decode wrote past the output";

  // Decode-and-accumulate: acc + the fp32 values (not rounded to the dtype).
  std::vector<float> acc(count);
  for (size_t i = 0; i < count; ++i) acc[i] = 0.125f * static_cast<float>(i % 13) - 0.75f;
  const std::vector<float> before = acc;
  ASSERT_EQ(cclzDecodeAccumulateHost(codec.get(), f.bytes.data(), f.bytes.size(), acc.data(),
                                     count, type),
            cclzSuccess);
  for (size_t i = 0; i < count; ++i)
    ASSERT_EQ(acc[i], before[i] + v.value(f.bytes.data(), i)) << "element " << i;
}

// Error feedback, three steps: x = fl(g + r_old) is encoded, and r_new = fl(x - dequant), so
// dequant + r_new equals x to the rounding of one fp32 subtraction.
TEST_P(QgradRef, ResidualIdentity) {
  const auto& [dtype, count, bits, block, rounding] = GetParam();
  const auto type = static_cast<cclzDataType_t>(dtype);
  if (count > 100000) GTEST_SKIP() << "the small sizes cover it";
  CodecPtr codec = makeCodec(qgradConfig(bits, block, rounding, 7));
  ASSERT_TRUE(codec);
  FeedbackPtr fb = makeFeedback(count);
  ASSERT_TRUE(fb);
  float* residual = residualOf(fb);
  for (uint64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const std::vector<uint8_t> g = gradient(dtype, count, mixSeed(step, dtype, count, bits));
    std::vector<float> x(count), old(residual, residual + count);
    for (size_t i = 0; i < count; ++i) x[i] = elementAsFloat(dtype, g, i) + old[i];
    const std::vector<uint8_t> f = encodeFeedbackHost(codec.get(), fb.get(), g.data(), count, type);
    ASSERT_NO_FATAL_FAILURE(checkFrame(f, x, bits, block, rounding == cclzRoundStochastic));
    const QgradView v(f.data());
    for (size_t i = 0; i < count; ++i) {
      const double y = v.value(f.data(), i), r = residual[i];
      ASSERT_LE(std::fabs(y + r - x[i]), std::fabs(r) * 0x1p-24) << "element " << i;
      ASSERT_EQ(residual[i], x[i] - static_cast<float>(y)) << "element " << i;
    }
    uint64_t next = 0;
    ASSERT_EQ(cclzFeedbackGetState(fb.get(), nullptr, nullptr, &next), cclzSuccess);
    EXPECT_EQ(next, step + 1);
  }
  // Reset: residual zero, step 0, so the next frame is the plain encode of the gradient at step 0.
  ASSERT_EQ(cclzFeedbackReset(fb.get(), nullptr), cclzSuccess);
  for (size_t i = 0; i < count; ++i) ASSERT_EQ(residual[i], 0.0f);
  const std::vector<uint8_t> g = gradient(dtype, count, 99);
  const std::vector<uint8_t> fromReset =
      encodeFeedbackHost(codec.get(), fb.get(), g.data(), count, type);
  EXPECT_EQ(fromReset, encodeHost(codec.get(), dtype, g, count).bytes);
}

// A bf16 residual: every step's frame and residual are those of the fp32 state with its residual
// rounded to bf16 (to nearest even) after each step.
TEST_P(QgradRef, Bf16ResidualIsTheRoundedFp32One) {
  const auto& [dtype, count, bits, block, rounding] = GetParam();
  const auto type = static_cast<cclzDataType_t>(dtype);
  if (count > 100000) GTEST_SKIP() << "the small sizes cover it";
  CodecPtr codec = makeCodec(qgradConfig(bits, block, rounding, 7));
  ASSERT_TRUE(codec);
  FeedbackPtr half = makeFeedback(count, cclzMemoryHost, cclzBfloat16);
  FeedbackPtr full = makeFeedback(count);
  ASSERT_TRUE(half && full);
  cclzDataType_t got = cclzFloat32;
  void* halfResidual = nullptr;
  ASSERT_EQ(cclzFeedbackGetResidual(half.get(), &halfResidual, &got), cclzSuccess);
  EXPECT_EQ(got, cclzBfloat16);
  float* fullResidual = residualOf(full);
  for (uint64_t step = 0; step < 3; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const std::vector<uint8_t> g = gradient(dtype, count, mixSeed(step, dtype, count, bits));
    const std::vector<uint8_t> fromHalf =
        encodeFeedbackHost(codec.get(), half.get(), g.data(), count, type);
    const std::vector<uint8_t> fromFull =
        encodeFeedbackHost(codec.get(), full.get(), g.data(), count, type);
    ASSERT_EQ(fromHalf, fromFull);
    const auto* h = static_cast<const uint16_t*>(halfResidual);
    for (size_t i = 0; i < count; ++i) {
      const uint16_t want = floatToBf16(fullResidual[i]);
      ASSERT_EQ(h[i], want) << "element " << i;
      const uint32_t widened = uint32_t{want} << 16;  // the bf16 value as fp32, exactly
      std::memcpy(&fullResidual[i], &widened, 4);
    }
  }
}

std::string refName(const testing::TestParamInfo<RefParam>& info) {
  const auto& [dtype, count, bits, block, rounding] = info.param;
  return std::string(dtypeLabel(dtype)) + "_n" + std::to_string(count) + "_" + "int" +
         std::to_string(bits) + "_b" + std::to_string(block) +
         (rounding == cclzRoundStochastic ? "_sr" : "_rn");
}

std::vector<RefParam> refParams() {
  std::vector<RefParam> params;
  for (int dtype : {cclzFloat32, cclzBfloat16})
    for (size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{33}, size_t{4097}})
      for (int bits : {8, 4, 2})
        for (int block : {32, 64, 128, 256})
          for (cclzRounding_t r : {cclzRoundNearest, cclzRoundStochastic})
            params.emplace_back(dtype, count, bits, block, r);
  for (int dtype : {cclzFloat32, cclzBfloat16})
    for (int bits : {8, 4, 2}) params.emplace_back(dtype, 1000001, bits, 64, cclzRoundNearest);
  return params;
}

INSTANTIATE_TEST_SUITE_P(All, QgradRef, testing::ValuesIn(refParams()), refName);

// ---- Stochastic rounding. ----

// One block of fp32 values with scale exactly 1/4 (absmax 1.75 = 7 * 0.25 for int4), so every
// value sits at a known fraction of a step.
std::vector<float> fractions() {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = -1.7f + 3.4f * static_cast<float>(i) / 63.0f;  // fractions of a step all over [0, 1)
  x[0] = 1.75f;
  return x;
}

void expectUnbiased(const std::vector<double>& mean, const std::vector<float>& x, double step,
                    int trials, const char* what) {
  for (size_t i = 0; i < x.size(); ++i) {
    // A draw's standard deviation is at most step/2: 6 standard errors.
    EXPECT_NEAR(mean[i], x[i], 6 * 0.5 * step / std::sqrt(trials)) << what << ", element " << i;
  }
}

TEST(QgradStochastic, UnbiasedOverSeedsAndSteps) {
  const std::vector<float> x = fractions();
  const int trials = 4000;
  std::vector<double> overSeeds(x.size()), overSteps(x.size()), nearest(x.size());
  CodecPtr stepCodec = makeCodec(qgradConfig(4, 64, cclzRoundStochastic, 12345));
  FeedbackPtr fb = makeFeedback(x.size());
  ASSERT_TRUE(stepCodec && fb);
  float* residual = residualOf(fb);
  for (int t = 0; t < trials; ++t) {
    CodecPtr codec = makeCodec(qgradConfig(4, 64, cclzRoundStochastic, mixSeed(t, 3)));
    ASSERT_TRUE(codec);
    const std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t*>(x.data()),
                                     reinterpret_cast<const uint8_t*>(x.data() + x.size()));
    const HostFrame f = encodeHost(codec.get(), cclzFloat32, bytes, x.size());
    const QgradView v(f.bytes.data());
    ASSERT_EQ(v.scale(f.bytes.data(), 0), 0.25f);
    for (size_t i = 0; i < x.size(); ++i) overSeeds[i] += v.value(f.bytes.data(), i) / trials;

    // One seed, step t: the feedback state's step numbers the draws (residual zeroed each time).
    std::memset(residual, 0, x.size() * sizeof(float));
    ASSERT_EQ(cclzFeedbackSetStep(fb.get(), static_cast<uint64_t>(t)), cclzSuccess);
    const std::vector<uint8_t> g =
        encodeFeedbackHost(stepCodec.get(), fb.get(), x.data(), x.size(), cclzFloat32);
    for (size_t i = 0; i < x.size(); ++i) overSteps[i] += v.value(g.data(), i) / trials;
  }
  expectUnbiased(overSeeds, x, 0.25, trials, "over seeds");
  expectUnbiased(overSteps, x, 0.25, trials, "over steps");

  // Nearest rounding is biased on the same values, so the check above can fail.
  CodecPtr rn = makeCodec(qgradConfig(4, 64));
  const std::vector<uint8_t> bytes(reinterpret_cast<const uint8_t*>(x.data()),
                                   reinterpret_cast<const uint8_t*>(x.data() + x.size()));
  const HostFrame f = encodeHost(rn.get(), cclzFloat32, bytes, x.size());
  const QgradView v(f.bytes.data());
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(v.value(f.bytes.data(), i)) - x[i]));
  EXPECT_GT(worst, 6 * 0.5 * 0.25 / std::sqrt(trials));
}

TEST(QgradStochastic, Reproducible) {
  const size_t n = 5000;
  const std::vector<uint8_t> g = gradient(cclzFloat32, n, 17);
  const auto frameAt = [&](uint64_t seed, uint64_t step) {
    CodecPtr codec = makeCodec(qgradConfig(2, 128, cclzRoundStochastic, seed));
    FeedbackPtr fb = makeFeedback(n);
    EXPECT_EQ(cclzFeedbackSetStep(fb.get(), step), cclzSuccess);
    return encodeFeedbackHost(codec.get(), fb.get(), g.data(), n, cclzFloat32);
  };
  EXPECT_EQ(frameAt(1, 10), frameAt(1, 10)) << "same seed and step: the same choices";
  EXPECT_NE(frameAt(1, 10), frameAt(1, 11)) << "another step draws again";
  EXPECT_NE(frameAt(1, 10), frameAt(2, 10)) << "another seed draws again";
}

// ---- NaN and Inf. ----

TEST(QgradNonFinite, PlainEncodeReportsAndMarksTheBlock) {
  CodecPtr codec = makeCodec(qgradConfig(4, 64));
  ASSERT_TRUE(codec);
  const size_t n = 300;
  for (float bad : {std::nanf(""), INFINITY, -INFINITY}) {
    std::vector<float> g(n);
    for (size_t i = 0; i < n; ++i) g[i] = std::sin(static_cast<float>(i));
    g[70] = bad;
    g[75] = bad;
    g[200] = bad;
    size_t capacity = 0, size = 0;
    ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), n, cclzFloat32, &capacity), cclzSuccess);
    std::vector<uint8_t> f(capacity);
    EXPECT_EQ(cclzEncodeHost(codec.get(), g.data(), n, cclzFloat32, f.data(), capacity, &size),
              cclzInvalidArgument);
    const std::string message = cclzGetLastError(nullptr);
    EXPECT_NE(message.find("element 70 "), std::string::npos) << message;
    EXPECT_EQ(size, capacity) << "the frame is still written and its size reported";
    const QgradView v(f.data());
    for (uint64_t k = 0; k < v.numBlocks; ++k)
      EXPECT_EQ(v.scaleBits(f.data(), k) == 0x7FC0, k == 1 || k == 3) << "block " << k;
    std::vector<float> out(n);
    ASSERT_EQ(cclzDecodeHost(codec.get(), f.data(), size, out.data(), n, cclzFloat32), cclzSuccess);
    for (size_t i = 0; i < n; ++i) {
      const bool badBlock = i / 64 == 1 || i / 64 == 3;
      if (badBlock) {
        EXPECT_TRUE(std::isnan(out[i])) << "element " << i;
        EXPECT_EQ(v.code(f.data(), i), 0);
      } else {
        EXPECT_NEAR(out[i], g[i], 0.5 * v.scale(f.data(), i / 64) * (1 + 1e-6)) << i;
      }
    }
  }
}

TEST(QgradNonFinite, FeedbackKeepsTheResidualOfBadBlocks) {
  CodecPtr codec = makeCodec(qgradConfig(2, 32));
  ASSERT_TRUE(codec);
  const size_t n = 100;
  FeedbackPtr fb = makeFeedback(n);
  float* residual = residualOf(fb);
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::cos(0.3f * static_cast<float>(i));
  (void)encodeFeedbackHost(codec.get(), fb.get(), g.data(), n, cclzFloat32);  // a residual
  const std::vector<float> before(residual, residual + n);

  // Finite gradient and residual whose sum overflows, in block 2 (elements 64..95).
  g[80] = 3.0e38f;
  residual[80] = 3.0e38f;
  const std::vector<float> kept(residual, residual + n);
  size_t capacity = 0, size = 0;
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), n, cclzFloat32, &capacity), cclzSuccess);
  std::vector<uint8_t> f(capacity);
  EXPECT_EQ(cclzEncodeFeedbackHost(codec.get(), fb.get(), g.data(), n, cclzFloat32, f.data(),
                                   capacity, &size),
            cclzInvalidArgument);
  const std::string message = cclzGetLastError(nullptr);
  EXPECT_NE(message.find("element 80"), std::string::npos) << message;
  EXPECT_NE(message.find("gradient + residual"), std::string::npos) << message;
  EXPECT_EQ(size, capacity);
  const QgradView v(f.data());
  EXPECT_EQ(v.scaleBits(f.data(), 2), 0x7FC0);
  for (size_t i = 0; i < n; ++i) {
    if (i / 32 == 2) {
      EXPECT_EQ(residual[i], kept[i]) << "a non-finite block keeps its residual, element " << i;
    } else {
      const float x = g[i] + kept[i];
      EXPECT_EQ(residual[i], x - v.value(f.data(), i)) << "element " << i;
    }
  }
  uint64_t step = 0;
  ASSERT_EQ(cclzFeedbackGetState(fb.get(), nullptr, nullptr, &step), cclzSuccess);
  EXPECT_EQ(step, 2u) << "the step advances: the frame was written";
  // Decode-and-accumulate carries the NaN into the sum, where the training loop can see it.
  std::vector<float> acc(n, 1.0f);
  ASSERT_EQ(cclzDecodeAccumulateHost(codec.get(), f.data(), size, acc.data(), n, cclzFloat32),
            cclzSuccess);
  EXPECT_TRUE(std::isnan(acc[64]) && std::isnan(acc[95]));
  EXPECT_FALSE(std::isnan(acc[63]) || std::isnan(acc[96]));
}

// bf16 NaN and Inf, and huge finite values that stay finite (the scale clamps to the largest bf16).
TEST(QgradNonFinite, Bf16AndHugeFiniteValues) {
  CodecPtr codec = makeCodec(qgradConfig(2, 32));
  ASSERT_TRUE(codec);
  std::vector<uint16_t> g(64, 0x3F80);
  g[5] = 0x7F80;  // +Inf
  g[40] = 0x7F7F;  // the largest finite bf16
  g[41] = 0xFF7F;
  std::vector<uint8_t> bytes(128);
  std::memcpy(bytes.data(), g.data(), 128);
  size_t capacity = 0, size = 0;
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), 64, cclzBfloat16, &capacity), cclzSuccess);
  std::vector<uint8_t> f(capacity);
  EXPECT_EQ(cclzEncodeHost(codec.get(), g.data(), 64, cclzBfloat16, f.data(), capacity, &size),
            cclzInvalidArgument);
  EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("element 5 of the gradient is +Inf"),
            std::string::npos)
      << cclzGetLastError(nullptr);
  const QgradView v(f.data());
  EXPECT_EQ(v.scaleBits(f.data(), 0), 0x7FC0);
  EXPECT_EQ(v.scaleBits(f.data(), 1), 0x7F7F);
  EXPECT_EQ(v.code(f.data(), 40), 1);
  EXPECT_EQ(v.code(f.data(), 41), -1);
}

}  // namespace
}  // namespace cclz::test
