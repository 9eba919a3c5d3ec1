// How cclz-perf fails: every error (bad flag value, unreadable input, a failed cclz or CUDA call)
// throws perf::Error; main() prints its message and exits non-zero. Destructors free the buffers.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

#include "cclz/cclz.h"

namespace perf {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

// A non-success result names the call, the result and the library's own message.
inline void checkCclz(cclzResult_t result, const char* call) {
  if (result != cclzSuccess)
    fail("{} failed: {}: {}", call, cclzGetErrorString(result), cclzGetLastError(nullptr));
}

}  // namespace perf

#define PERF_CCLZ_CHECK(call) ::perf::checkCclz((call), #call)
