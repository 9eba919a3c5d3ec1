// The fp8 codec's CPU reference through the C API: error bounds per tensor kind (real tensors,
// the stress set, Gaussian data), ragged sizes, the NaN/Inf policy, saturation, and the fused
// decode-and-accumulate against decode-then-add.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cclz/cclz.h"
#include "common/float_bits.h"
#include "support/codec_handle.h"
#include "support/data.h"
#include "support/stress.h"
#include "support/tensors.h"

namespace cclz::test {
namespace {

cclzCodecConfig_t fp8Config(cclzFp8Format_t format = cclzFp8Default, int rowElems = 0,
                            cclzFp8Rotation_t rotation = cclzFp8RotateDefault) {
  cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
  c.codec = cclzCodecFp8;
  c.fp8Format = format;
  c.fp8RowElems = rowElems;
  c.fp8Rotation = rotation;
  return c;
}

std::vector<uint8_t> toDtype(const std::vector<float>& x, int dtype) {
  std::vector<uint8_t> out(x.size() * elementSize(dtype));
  for (size_t i = 0; i < x.size(); ++i) {
    if (dtype == cclzFloat32) std::memcpy(&out[4 * i], &x[i], 4);
    const uint16_t h = dtype == cclzBfloat16 ? cclz::floatToBf16(x[i]) : cclz::floatToHalf(x[i]);
    if (dtype != cclzFloat32) std::memcpy(&out[2 * i], &h, 2);
  }
  return out;
}

std::vector<float> fromDtype(const std::vector<uint8_t>& b, int dtype) {
  std::vector<float> x(b.size() / elementSize(dtype));
  for (size_t i = 0; i < x.size(); ++i) x[i] = loadAsFloat(b.data(), dtype, i);
  return x;
}

// Encodes and decodes x (already representable in dtype) through the host API.
std::vector<float> roundTrip(const cclzCodecConfig_t& config, const std::vector<float>& x,
                             int dtype, std::vector<uint8_t>* frameOut = nullptr) {
  CodecPtr codec = makeCodec(config);
  const std::vector<uint8_t> in = toDtype(x, dtype);
  const HostFrame f = encodeHost(codec.get(), dtype, in, x.size());
  EXPECT_EQ(f.bytes.size(), f.capacity) << "fp8 frames have a fixed size";
  std::vector<uint8_t> out(in.size(), 0xA5);
  EXPECT_EQ(cclzDecodeHost(codec.get(), f.bytes.data(), f.bytes.size(), out.data(), x.size(),
                           static_cast<cclzDataType_t>(dtype)),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  if (frameOut) *frameOut = f.bytes;
  return fromDtype(out, dtype);
}

double nmse(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    ref += double(x[i]) * x[i];
  }
  return err / ref;
}

// NMSE of 1x32 blocks of E4M3 with exact (float64) scales: the target, computed here
// with a rounding written independently of the codec (round to nearest even on E4M3's grid).
double e4m3(double v) {
  const double a = std::fabs(v);
  if (a == 0) return 0;
  const int e = std::max(std::ilogb(a), -6);
  const double step = std::ldexp(1.0, e - 3);
  return std::copysign(std::min(std::nearbyint(a / step) * step, 448.0), v);
}
double blockExactNmse(const std::vector<float>& x) {
  std::vector<float> y(x.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    double a = 0;
    for (size_t i = b; i < std::min(x.size(), b + 32); ++i)
      a = std::max(a, std::fabs(double(x[i])));
    const double s = a > 0 ? a / 448 : 1;
    for (size_t i = b; i < std::min(x.size(), b + 32); ++i) y[i] = float(e4m3(x[i] / s) * s);
  }
  return nmse(x, y);
}

// Per element, E4M3 without rotation: at most half a step (1/16 relative) plus the output's own
// rounding, and an absolute floor of half E4M3's subnormal step (2^-10) at the block's scale. That
// scale is at most 2 amax / 448 for the block's largest |value| amax, unless the block is more
// than 7 octaves below its row's largest (the fine scale's range), where it is at most
// 2^-6 rowMax / 448.
void expectE4m3ElementBounds(const std::vector<float>& x, const std::vector<float>& y, int dtype,
                             const std::string& what, size_t rowElems) {
  const double outRel = dtype == cclzBfloat16 ? 0x1.0p-8 : dtype == cclzFloat16 ? 0x1.0p-11 : 0;
  size_t bad = 0;
  for (size_t b = 0; b < x.size(); b += 64) {
    double amax = 0, rowMax = 0;
    for (size_t i = b; i < std::min(x.size(), b + 64); ++i)
      amax = std::max(amax, std::fabs(double(x[i])));
    const size_t row = b / rowElems * rowElems;
    for (size_t i = row; i < std::min(x.size(), row + rowElems); ++i)
      rowMax = std::max(rowMax, std::fabs(double(x[i])));
    const double scale = std::max(2 * amax, rowMax * 0x1.0p-6) / 448;
    for (size_t i = b; i < std::min(x.size(), b + 64); ++i) {
      const double bound = std::fabs(x[i]) * (1.0 / 16 + outRel) * 1.0001 + scale * 0x1.0p-10;
      if (std::fabs(double(y[i]) - x[i]) > bound && bad++ < 5)
        ADD_FAILURE() << what << ": element " << i << " x " << x[i] << " y " << y[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

std::vector<float> gaussian(size_t n, double sigma, uint64_t seed, int dtype) {
  uint64_t state = seed;
  std::vector<float> x(n);
  for (auto& v : x) v = float(normalFrom(state) * sigma);
  return fromDtype(toDtype(x, dtype), dtype);  // representable in dtype
}

TEST(Fp8Ref, RealTensorsMeetTheTarget) {
  const std::string dir = realTensorDir();
  if (dir.empty()) GTEST_SKIP() << "no real tensors (set CCLZ_SHARED_DATA)";
  double logCodec = 0, logTarget = 0, logInt8 = 0;
  const auto tensors = loadRealTensors(dir);
  for (const auto& t : tensors) {
    std::vector<float> x(t.values.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = bf16ToFloat(t.values[i]);
    const int cols = static_cast<int>(t.cols);
    const std::vector<float> y = roundTrip(fp8Config(cclzFp8Default, cols), x, cclzBfloat16);
    const double got = nmse(x, y), target = blockExactNmse(x);
    EXPECT_LE(got, 1.25 * target) << t.name << ": within 25% of 1x32 blocks with exact scales";
    expectE4m3ElementBounds(x, y, cclzBfloat16, t.name, t.cols);
    const double int8 = nmse(x, roundTrip(fp8Config(cclzFp8Int8, cols), x, cclzBfloat16));
    EXPECT_LE(int8, 0.25 * target) << t.name << ": the INT8-after-Hadamard option";
    logCodec += std::log(got), logTarget += std::log(target), logInt8 += std::log(int8);
  }
  EXPECT_LE(logCodec, logTarget) << "geometric mean of NMSE no worse than the target's";
  RecordProperty("geomean_nmse_e4m3", std::to_string(std::exp(logCodec / tensors.size())));
  RecordProperty("geomean_nmse_int8", std::to_string(std::exp(logInt8 / tensors.size())));
}

TEST(Fp8Ref, StressTensors) {
  for (const auto& t : makeStressTensors(0)) {
    const int cols = static_cast<int>(t.cols);
    for (auto format : {cclzFp8E4M3, cclzFp8Int8, cclzFp8E5M2}) {
      const std::vector<float> y = roundTrip(fp8Config(format, cols), t.values, cclzBfloat16);
      const double limit = format == cclzFp8E5M2 ? 2e-3 : 1e-3;  // E5M2: 2 mantissa bits
      EXPECT_LE(nmse(t.values, y), limit) << t.name << " format " << format;
      if (format == cclzFp8E4M3) expectE4m3ElementBounds(t.values, y, cclzBfloat16, t.name, t.cols);
    }
  }
}

struct Case {
  int dtype;
  size_t count;
  int rowElems;
};

class Fp8RoundTrip : public ::testing::TestWithParam<Case> {};

// Ragged sizes (blocks and rows that are not full), every dtype, every grid and rotation.
TEST_P(Fp8RoundTrip, BoundedErrorAndDeterministicBytes) {
  const Case c = GetParam();
  const std::vector<float> x = gaussian(c.count, 3.0, mixSeed(c.count, c.dtype), c.dtype);
  for (auto format : {cclzFp8E4M3, cclzFp8E5M2, cclzFp8Int8}) {
    for (auto rotation : {cclzFp8RotateNever, cclzFp8RotateAlways, cclzFp8RotateAdaptive}) {
      const cclzCodecConfig_t config = fp8Config(format, c.rowElems, rotation);
      std::vector<uint8_t> frame1, frame2;
      const std::vector<float> y = roundTrip(config, x, c.dtype, &frame1);
      roundTrip(config, x, c.dtype, &frame2);
      EXPECT_EQ(frame1, frame2) << "encoding is deterministic";
      if (c.count == 0) continue;
      for (float v : y) ASSERT_TRUE(std::isfinite(v));
      const double limit = format == cclzFp8E5M2 ? 5e-3 : 1e-3;  // E5M2: 2 mantissa bits
      EXPECT_LE(nmse(x, y), limit) << "format " << format << " rotation " << rotation;
      if (format == cclzFp8E4M3 && rotation == cclzFp8RotateNever)
        expectE4m3ElementBounds(x, y, c.dtype, "gaussian", c.rowElems ? c.rowElems : 1024);
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32})
    for (size_t count : {0, 1, 2, 7, 63, 64, 65, 1000, 4097, 100003})
      for (int row : {0, 256, 768}) out.push_back({dtype, count, row});
  out.push_back({cclzBfloat16, 1000001, 0});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Sizes, Fp8RoundTrip, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::string(dtypeLabel(info.param.dtype)) + "_n" + std::to_string(info.param.count) +
         "_row" + std::to_string(info.param.rowElems);
});

// NaN and Inf decode where they were and nowhere else; the block's other values keep their
// precision (they are left out of the scales); rows with them are never rotated.
TEST(Fp8Ref, NanAndInfPolicy) {
  for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32}) {
    for (auto format : {cclzFp8E4M3, cclzFp8E5M2, cclzFp8Int8}) {
      for (auto rotation : {cclzFp8RotateNever, cclzFp8RotateAlways, cclzFp8RotateAdaptive}) {
        std::vector<float> x = gaussian(3000, 1.0, 5, dtype);
        for (size_t i = 3; i < x.size(); i += 97) x[i] = NAN;
        for (size_t i = 50; i < x.size(); i += 301) x[i] = INFINITY;
        for (size_t i = 51; i < x.size(); i += 401) x[i] = -INFINITY;
        const std::vector<float> y = roundTrip(fp8Config(format, 256, rotation), x, dtype);
        std::vector<float> xf, yf;
        for (size_t i = 0; i < x.size(); ++i) {
          if (std::isnan(x[i])) {
            EXPECT_TRUE(std::isnan(y[i])) << i;
          } else if (std::isinf(x[i])) {
            EXPECT_EQ(y[i], x[i]) << i;
          } else {
            ASSERT_TRUE(std::isfinite(y[i])) << "a finite input decodes finite, element " << i;
            xf.push_back(x[i]), yf.push_back(y[i]);
          }
        }
        EXPECT_LE(nmse(xf, yf), format == cclzFp8E5M2 ? 3e-3 : 1e-3);
      }
    }
  }
}

// Values at the edge of each dtype's range decode finite (saturating), never as Inf; rows of
// tiny fp32 values decode as zeros, as documented.
TEST(Fp8Ref, RangeEdges) {
  const std::vector<float> f32 = {3.4e38f, -3.3e38f, 1.0f, 2e38f, -1e30f, 0.0f, 5.0f, 3.39e38f};
  for (auto rotation : {cclzFp8RotateNever, cclzFp8RotateAlways})
    for (float v : roundTrip(fp8Config(cclzFp8E4M3, 64, rotation), f32, cclzFloat32))
      EXPECT_TRUE(std::isfinite(v));
  const std::vector<float> f16 = {65504.0f, -65504.0f, 65000.0f, 1.0f, 6e-8f, 0.5f, 65504.0f};
  for (auto format : {cclzFp8E4M3, cclzFp8E5M2, cclzFp8Int8}) {
    const std::vector<float> y = roundTrip(fp8Config(format, 64), f16, cclzFloat16);
    for (size_t i = 0; i < y.size(); ++i) {
      EXPECT_TRUE(std::isfinite(y[i])) << i;
      if (std::fabs(f16[i]) >= 1000) {
        EXPECT_NEAR(y[i], f16[i], std::fabs(f16[i]) * 0.07) << i;
      }
    }
  }
  const std::vector<float> tiny(100, 1e-35f);
  for (float v : roundTrip(fp8Config(), tiny, cclzFloat32)) EXPECT_EQ(v, 0.0f);
}

// The fused decode-and-accumulate adds exactly what decode stores.
TEST(Fp8Ref, DecodeAccumulateEqualsDecodeThenAdd) {
  for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32}) {
    std::vector<float> x = gaussian(5000, 2.0, 9, dtype);
    x[17] = NAN, x[18] = INFINITY;
    CodecPtr codec = makeCodec(fp8Config(cclzFp8Default, 512, cclzFp8RotateAdaptive));
    const HostFrame f = encodeHost(codec.get(), dtype, toDtype(x, dtype), x.size());
    std::vector<uint8_t> out(x.size() * elementSize(dtype));
    const auto type = static_cast<cclzDataType_t>(dtype);
    ASSERT_EQ(
        cclzDecodeHost(codec.get(), f.bytes.data(), f.bytes.size(), out.data(), x.size(), type),
        cclzSuccess);
    std::vector<float> acc = gaussian(x.size(), 1.0, 10, cclzFloat32), want = acc;
    for (size_t i = 0; i < x.size(); ++i) {
      want[i] += loadAsFloat(out.data(), dtype, i);
      if (std::isnan(want[i])) want[i] = bitsToFloat(0x7FFFFFFFu);  // the format's NaN sum
    }
    ASSERT_EQ(cclzDecodeAccumulateHost(codec.get(), f.bytes.data(), f.bytes.size(), acc.data(),
                                       x.size(), type),
              cclzSuccess);
    EXPECT_EQ(0, std::memcmp(acc.data(), want.data(), 4 * acc.size()))
        << dtypeLabel(dtype) << ": bitwise equal to decode then add (NaN included)";
    EXPECT_EQ(floatToBits(acc[17]), 0x7FFFFFFFu) << "a NaN sum is stored as 0x7FFFFFFF";
  }
}

}  // namespace
}  // namespace cclz::test
