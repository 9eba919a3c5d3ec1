// Runs one case on one rank through the C API, so that the loopback, MPI and NCCL tests make the
// very same calls.
#pragma once

#include <vector>

#include "cclz/cclz.h"
#include "coll_cases.h"

namespace cclz::test {

// The call(s) of case c on rank `me` of n with the buffers given (host or device memory, as the
// communicator takes). Send/recv go around the ring of ringNext/ringPrev, even ranks sending
// first. Returns the first failed result.
cclzResult_t callCase(cclzComm_t comm, const CollCase& c, int n, int me, const void* send,
                      void* recv, cclzStream_t stream);

// callCase on host buffers: the rank's input (makeInput), and *out (recvElems, prefilled 0xA5).
cclzResult_t runCase(cclzComm_t comm, const CollCase& c, int n, int me, std::vector<uint8_t>* out);

}  // namespace cclz::test
