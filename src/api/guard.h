// The C boundary: runs an entry point's body, turns any exception into a cclzResult_t and keeps
// the message for cclzGetLastError (DESIGN.md: the C API never throws).
#pragma once

#include <string>

#include "cclz/cclz.h"

namespace cclz {

void setLastError(const std::string& message);
void clearLastError();

template <typename Body>
cclzResult_t guarded(const char* function, Body&& body) noexcept;

}  // namespace cclz

#include "api/guard_impl.h"
