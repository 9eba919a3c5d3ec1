// The compressed collectives, written once against the transport and the engine (DESIGN.md:
// algorithms are written once): all-gather, reduce-scatter, all-reduce, all-to-all, send, recv.
// docs/collectives.md describes the algorithms and what they cost.
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "codec/residual.h"
#include "collective/communicator.h"
#include "collective/descriptor.h"

namespace cclz {

// One call, as the C API received it.
struct CollArgs {
  CollOp op = CollOp::AllGather;
  const void* send = nullptr;
  void* recv = nullptr;
  uint64_t count = 0;  // per rank for all-gather, reduce-scatter and all-to-all, as in NCCL
  int dtype = cclzBfloat16;
  int redOp = cclzSum;
  int peer = -1;                             // send, recv
  const cclzCodecConfig_t* codec = nullptr;  // NULL: the none codec

  // Error feedback (reduce-scatter, all-reduce): the state's residual (no data when it has no
  // elements; fp32 or bf16), its size and memory, and its step (advanced by one when the call has
  // queued its encodes). A non-NULL step is what marks a call with feedback.
  Residual residual;
  uint64_t residualCount = 0;
  cclzMemoryType_t residualMemory = cclzMemoryHost;
  uint64_t* step = nullptr;
  bool* residualZero = nullptr;  // the state's flag: the residual is known to be all zeros

  cclzStream_t stream = nullptr;
};

// Validates the call, checks it against the peers' (Communicator::checkWhen) and runs it.
// Throws cclz::Error; on a host communicator the call is complete when it returns.
void runCollective(Communicator& comm, const CollArgs& args);

}  // namespace cclz
