#include "support/stress.h"

#include <cmath>

#include "common/float_bits.h"

namespace cclz::test {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float toBf16(double v) { return bf16ToFloat(floatToBf16(static_cast<float>(v))); }

}  // namespace

double uniformFrom(uint64_t& state) {
  return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
}

double normalFrom(uint64_t& state) {
  const double u1 = 1.0 - uniformFrom(state), u2 = uniformFrom(state);  // u1 in (0, 1]
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

std::vector<StressTensor> makeStressTensors(uint64_t seed) {
  std::vector<StressTensor> out;
  uint64_t state = seed * 0x2545F4914F6CDD1Dull + 1;
  {
    StressTensor t{"stress.massive_channels", 1024, 768, {}};
    std::vector<double> channelScale(t.cols, 1.0);
    for (int i = 0; i < 6; ++i) {
      const uint64_t col = splitmix64(state) % t.cols;
      channelScale[col] = 100.0 + 900.0 * uniformFrom(state);
    }
    t.values.resize(t.rows * t.cols);
    for (uint64_t i = 0; i < t.values.size(); ++i)
      t.values[i] = toBf16(normalFrom(state) * channelScale[i % t.cols]);
    out.push_back(std::move(t));
  }
  {
    StressTensor t{"stress.grad_rare_spikes", 1024, 768, {}};
    t.values.resize(t.rows * t.cols);
    for (auto& v : t.values) {
      double x = normalFrom(state) * 1e-5;
      if (uniformFrom(state) < 1e-4) x *= 100.0 + 2900.0 * uniformFrom(state);
      v = toBf16(x);
    }
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<float> periodicChannels(size_t period, size_t count,
                                    const std::vector<size_t>& massive) {
  uint64_t state = period * 0x9E3779B97F4A7C15ull ^ count;
  std::vector<double> scale(period);
  for (auto& v : scale) v = std::exp2(normalFrom(state) * 0.5);
  for (size_t c : massive) scale[c] *= 1000;
  std::vector<float> x(count);
  for (size_t i = 0; i < count; ++i) x[i] = float(normalFrom(state) * scale[i % period]);
  for (size_t i = 13; i < count; i += 4001) x[i] = NAN;
  for (size_t i = 31; i < count; i += 6007) x[i] = (i & 1) ? INFINITY : -INFINITY;
  for (size_t i = 7; i < count; i += 101) x[i] = 0.0f;
  return x;
}

}  // namespace cclz::test
