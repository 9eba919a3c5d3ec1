#pragma once

#include <new>

#include "common/error.h"

namespace cclz {

template <typename Body>
cclzResult_t guarded(const char* function, Body&& body) noexcept {
  try {
    clearLastError();
    body();
    return cclzSuccess;
  } catch (const Error& e) {
    setLastError(std::string(function) + ": " + e.what());
    return e.code();
  } catch (const std::bad_alloc&) {
    setLastError(std::string(function) + ": out of host memory");
    return cclzSystemError;
  } catch (const std::exception& e) {
    setLastError(std::string(function) + ": internal error: " + e.what());
    return cclzInternalError;
  } catch (...) {
    setLastError(std::string(function) + ": internal error: unknown exception");
    return cclzInternalError;
  }
}

}  // namespace cclz
