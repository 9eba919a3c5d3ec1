// Typed errors inside cclz. Internals throw cclz::Error; every C entry point catches it and
// returns its code (src/api/guard.h), so nothing crosses the C boundary as an exception.
#pragma once

#include <stdexcept>
#include <string>

#include "cclz/cclz.h"

namespace cclz {

class Error : public std::runtime_error {
 public:
  Error(cclzResult_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  cclzResult_t code() const { return code_; }

 private:
  cclzResult_t code_;
};

[[noreturn]] void throwError(cclzResult_t code, const std::string& message, const char* file,
                             int line);

}  // namespace cclz

// Fails with `code` and a message that names where, unless `cond` holds.
#define CCLZ_REQUIRE(cond, code, msg)                                   \
  do {                                                                  \
    if (!(cond)) ::cclz::throwError((code), (msg), __FILE__, __LINE__); \
  } while (0)

#define CCLZ_FAIL(code, msg) ::cclz::throwError((code), (msg), __FILE__, __LINE__)
