#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace perf {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  if (values.size() % 2) return values[mid];
  const double upper = values[mid];
  return (upper + *std::max_element(values.begin(), values.begin() + mid)) / 2;
}

double timeHost(int warmup, int iters, const std::function<void()>& fn) {
  using Clock = std::chrono::steady_clock;
  const auto micros = [](Clock::duration d) {
    return std::chrono::duration<double, std::micro>(d).count();
  };
  constexpr double kMinSampleUs = 20;
  int reps = 1;
  for (int i = 0; i < warmup; ++i) {
    const auto start = Clock::now();
    fn();
    const double us = micros(Clock::now() - start);
    if (i == warmup - 1 && us < kMinSampleUs)
      reps = static_cast<int>(std::ceil(kMinSampleUs / std::max(us, 0.01)));
  }
  std::vector<double> samples;
  for (int i = 0; i < iters; ++i) {
    const auto start = Clock::now();
    for (int r = 0; r < reps; ++r) fn();
    samples.push_back(micros(Clock::now() - start) / reps);
  }
  return median(samples);
}

}  // namespace perf
