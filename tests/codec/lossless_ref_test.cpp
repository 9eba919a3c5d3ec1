#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "codec/lossless/ref.h"

namespace cclz::lossless {
namespace {

TEST(LosslessRef, Smoke) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> x(100000);
  for (auto& v : x) v = normal(rng);
  const Params p{16384, 6, 11};
  std::vector<uint8_t> frame(maxEncodedBytes(p, cclzFloat32, x.size()));
  const uint64_t bytes = encodeRef(p, cclzFloat32, x.data(), x.size(), frame.data(), frame.size());
  std::vector<float> y(x.size());
  ASSERT_EQ(decodeRef(frame.data(), bytes, cclzFloat32, y.size(), y.data()), kFrameOk);
  EXPECT_EQ(std::memcmp(x.data(), y.data(), x.size() * 4), 0);
  EXPECT_LT(bytes, x.size() * 4 / 1.18);
}

}  // namespace
}  // namespace cclz::lossless
