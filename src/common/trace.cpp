#include "common/trace.h"

#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

namespace cclz {

// Read at every step (a scan of the environment, well under a microsecond), so that it can be
// switched on in a running process, e.g. a test or a debugger.
bool traceEnabled() {
  const char* v = std::getenv("CCLZ_TRACE");
  return v && std::strcmp(v, "1") == 0;
}

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
