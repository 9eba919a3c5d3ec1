// Runs one case on one rank through the C-shaped internal entry point (runCollective) or the C
// API, so that the loopback test and the MPI test run the very same calls.
#pragma once

#include <functional>
#include <vector>

#include "cclz/cclz.h"
#include "coll_cases.h"

namespace cclz::test {

// One collective call as the C API makes it; returns its result.
using CallFn = std::function<cclzResult_t(const CollCase& c, const void* send, void* recv)>;

// Runs case c on rank `me` of n through the C API on `comm` (host memory), filling *out. For
// send/recv the ring order of ringNext/ringPrev is used. Returns the first failed result.
cclzResult_t runCase(cclzComm_t comm, const CollCase& c, int n, int me, std::vector<uint8_t>* out);

}  // namespace cclz::test
