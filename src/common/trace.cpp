#include "common/trace.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

namespace cclz {

namespace {

bool traceSetting() {
  const char* v = std::getenv("CCLZ_TRACE");
  return v && std::strcmp(v, "1") == 0;
}

std::atomic<bool> traceOn{traceSetting()};

}  // namespace

// A look at the environment scans all of it: asked at every step, it was a quarter of a small
// call's host time (bench/probes/callcost.cpp). So each thread reads it again every 256th ask,
// and every communicator's creation does (traceRefresh): set in a running process, e.g. by a
// test or a debugger, it takes effect within 256 steps.
bool traceEnabled() {
  thread_local uint32_t asks = 0;
  if ((asks++ & 255u) == 0) traceOn.store(traceSetting(), std::memory_order_relaxed);
  return traceOn.load(std::memory_order_relaxed);
}

void traceRefresh() { traceOn.store(traceSetting(), std::memory_order_relaxed); }

void traceLine(const char* format, ...) {
  using Clock = std::chrono::steady_clock;
  static const Clock::time_point origin = Clock::now();
  static std::mutex mutex;
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - origin).count();
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  const unsigned thread =
      static_cast<unsigned>(std::hash<std::thread::id>{}(std::this_thread::get_id()) % 10000);
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "cclz-trace pid %d thread %04u %12.1f us  %s\n", static_cast<int>(getpid()),
               thread, us, text);
  std::fflush(stderr);
}

}  // namespace cclz
