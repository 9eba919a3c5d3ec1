// The overlapped GEMMs' entry from the C API (cclzAllGatherMatmul, cclzMatmulReduceScatter): the
// call's arguments checked here and against every peer's, then its path (host_overlap.h,
// device_overlap.h), or, where an adaptive communicator measured it faster, its serial form: the
// collective and one GEMM one after the other (docs/overlap.md, "Adaptive calls").
#pragma once

#include "overlap/host_overlap.h"

namespace cclz {

class Communicator;
enum class CollOp : uint8_t;

namespace overlap {

// op: CollOp::AllGatherMatmul or CollOp::MatmulReduceScatter; codec: the caller's (NULL: plain).
// Throws cclz::Error. On a host communicator the call is complete when it returns; on a device
// communicator it is queued on `stream` (device_overlap.h).
void runOverlapCall(Communicator& comm, CollOp op, OverlapCall call,
                    const cclzCodecConfig_t* codec, cclzStream_t stream);

}  // namespace overlap
}  // namespace cclz
