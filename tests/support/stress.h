// The synthetic stress set of the fp8 codec, seeded: tensors built to break a lossy
// codec's scales. Used by the tests and by tools/fp8-quality; a pure function of the seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cclz::test {

struct StressTensor {
  std::string name;
  uint64_t rows = 0, cols = 0;
  std::vector<float> values;  // rows * cols, row-major, exactly representable in bf16
};

// stress.massive_channels: 1024 x 768 N(0, 1) activations with 6 channels (columns) scaled by
//   100..1000 (uniform), the "massive activations" of LLMs.
// stress.grad_rare_spikes: 1024 x 768 N(0, 1e-5^2) gradients; each value with probability 1e-4
//   scaled by 100..3000.
// Values are rounded to bf16 (ties to even), the dtype of the traffic they stand for.
std::vector<StressTensor> makeStressTensors(uint64_t seed);

// count values with channel structure of period `period` for the fp8 encoder's row-length and
// smoothing choices: channel scales 2^N(0, 0.5^2), the channels listed in `massive` scaled by 1000
// more, NaN, Inf and zeros sprinkled in; seeded by (period, count).
std::vector<float> periodicChannels(size_t period, size_t count,
                                    const std::vector<size_t>& massive = {});

// A standard normal value from a 64-bit generator state (splitmix64 + Box-Muller): the same on
// every platform, unlike std::normal_distribution.
double normalFrom(uint64_t& state);
double uniformFrom(uint64_t& state);  // [0, 1)

}  // namespace cclz::test
