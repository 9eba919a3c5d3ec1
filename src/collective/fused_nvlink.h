// The fused NVLink paths of the fp8 codec, all-gather and reduce-scatter (docs/collectives.md,
// "Fused NVLink paths"): no NCCL kernel on the data path. Each piece's frames are encoded locally;
// a kernel stores each into its peer's slot of an NCCL symmetric window over NVLink and meets the
// peers at an LSA barrier; the frames are decoded (and, for a reduce-scatter, summed in rank
// order) from local memory; a closing barrier frees the slots for the next piece. Or the frames
// are copied by the copy engines, with flags in place of barriers (fused_copy_engines.cpp).
// Opt-in (CCLZ_FUSED=1 or ce at communicator creation); only where every rank is in one LSA team.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cclz/cclz.h"

namespace cclz {

class Transport;
struct CollArgs;
struct Plan;

class FusedNvlink {
 public:
  virtual ~FusedNvlink() = default;
  // Whether this call takes the fused path, on a communicator whose ranks all share one LSA
  // team, with elements to move: an fp8 all-gather or reduce-scatter without error feedback
  // (frames stored by a kernel); also the all-reduce, the qgrad codec and error feedback (frames
  // copied by the copy engines). The same answer on every rank for the same call (nothing in it
  // is local).
  virtual bool takes(const CollArgs& a, const Plan& plan) const = 0;
  // Queues the call on a.stream (no host synchronization, capturable once a call of the size has
  // run outside a capture: the window and scratch grow only outside one). Checked and planned
  // already (plan.cpp); every rank makes it at the same point of its calls.
  virtual void run(const CollArgs& a, const Plan& plan) = 0;
  // A frame the fused decode rejected, in work that has finished (read without waiting beyond a
  // small copy, then cleared): cclzCorruptFrame with *message, else cclzSuccess.
  virtual cclzResult_t pollError(std::string* message) = 0;
  // Ends the fused kernels that wait for their peers (a mismatched call, an aborted peer): call it
  // before the NCCL communicator is aborted (Communicator::abort, a failed deferred check), whose
  // abort does not end them. Their outputs are then undefined. Any thread.
  virtual void abort() noexcept = 0;
};

// Collective over the transport's ranks (ncclDevCommCreate): an NCCL transport built against
// NCCL's device API (2.28 or later). Throws cclzNotSupported otherwise. Where the ranks are not
// all in one LSA team the object exists and takes no call (every rank alike), and the reason is
// traced (CCLZ_TRACE). copyEngines (CCLZ_FUSED=ce): the frames move by the copy engines
// (fused_copy_engines.cpp), else a kernel stores them (fused_nvlink.cpp). replayGraphs
// (CCLZ_FUSED_GRAPHS): the copy engines' path replays direct calls as CUDA graphs.
// pieceBytesSetting (CCLZ_PIECE_BYTES, 0 where unset): the kernel path's pieces are its own
// (fusedPieceBytes) unless it is set; the copy engines' are the pipeline's. direct
// (CCLZ_FUSED=direct): the kernel path's all-gather encodes its frame into every peer's window
// too (a batch of n encodes), and its reduce-scatter each destination's frame straight
// into that peer's window, and only a barrier follows (no push kernel).
std::unique_ptr<FusedNvlink> makeFusedNvlink(Transport& transport, bool copyEngines,
                                             bool replayGraphs, uint64_t pieceBytesSetting,
                                             bool direct = false);

class NcclTransport;
std::unique_ptr<FusedNvlink> makeFusedCopyEngines(NcclTransport& transport, bool replayGraphs);

}  // namespace cclz
