// Which way an NCCL call goes: through cclz, or to NCCL unchanged, and why. A pure function of
// what the call says and of the settings. It depends on what NCCL requires every rank to pass
// alike (op, dtype, count, reduction), the group depth and the environment, so that every rank
// sends the same call the same way (docs/collectives.md, "The NCCL drop-in"). The one
// exception, an all-to-all whose buffers overlap, is a call NCCL does not define either.
#pragma once

#include <cstddef>

#include "cclz/cclz.h"
#include "settings.h"

namespace cclz::interpose {

enum class Op { AllGather, Broadcast, Send, Recv, AllToAll, AllReduce, ReduceScatter, Count };

// Why a call went to NCCL unchanged (None: it goes through cclz).
enum class Reason {
  None,
  Internal,   // a call on one of cclz's own communicators, or NCCL calling its own API: not counted
  Off,        // CCLZ_INTERPOSE=0, or a CCLZ_INTERPOSE* value it does not know
  NoCclzOp,   // broadcast: cclz has none
  Reduction,  // a reduction without CCLZ_INTERPOSE_REDUCE=1, or one other than sum and average
  Dtype,      // not bf16, fp16 or fp32, the lossless codec's dtypes
  Empty,      // count 0
  Group,      // between ncclGroupStart and ncclGroupEnd
  InPlace,    // an all-to-all whose buffers overlap
  Peer,       // a send or receive whose peer is this rank, or no rank of the communicator
  Capture,    // the stream is being captured into a CUDA graph
  Cuda,       // CUDA could not say whether the stream is being captured
  NoCompanion,  // a send or receive before any collective made cclz's communicator
  Unavailable,  // cclz's communicator could not be made, or the communicator has one rank
  Count
};

// What an NCCL call says that the route depends on. dtype and redOp in NCCL's numbering, which is
// cclz's (cclzDataType_t, cclzRedOp_t).
struct Call {
  Op op;
  int dtype;
  size_t count;    // NCCL's count: per rank for all-gather, reduce-scatter, all-to-all
  int redOp = -1;  // reductions only
  const void* send = nullptr;
  const void* recv = nullptr;
  int ranks = 0;  // all-to-all: to size its buffers (count * ranks elements each)
};

bool isPointToPoint(Op op);
bool isReduction(Op op);

// The route that follows from the call and the settings alone; the caller adds what needs CUDA or
// the communicator (Capture, Cuda, Peer, NoCompanion, Unavailable).
Reason route(const Call& call, int groupDepth, const Settings& settings);

const char* opName(Op op);         // "all-gather", ...
const char* reasonName(Reason r);  // "group", ...

}  // namespace cclz::interpose
