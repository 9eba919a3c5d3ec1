// Host-side timing: median over iterations after warm-ups, as nccl-tests and MEASURING.md ask.
#pragma once

#include <functional>
#include <vector>

namespace perf {

double median(std::vector<double> values);

// Runs fn `warmup` times untimed, then returns the median over `iters` samples of the time of one
// call, in microseconds (std::chrono::steady_clock). A sample repeats calls shorter than ~20 us
// (counted on the last warm-up) and divides, so that the clock's resolution does not dominate.
double timeHost(int warmup, int iters, const std::function<void()>& fn);

// Keeps the compiler from removing work whose result is never read (a memcpy into a buffer that
// is freed later, for example).
inline void doNotOptimize(void* p) { asm volatile("" : : "r"(p) : "memory"); }

}  // namespace perf
