// A communicator: a transport, the engine that runs codecs on the transport's memory, and the
// settings every call uses. The C handle (struct cclzComm) wraps one.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collective/deferred_checks.h"
#include "collective/descriptor.h"
#include "collective/done_events.h"
#include "collective/engine.h"
#include "collective/fused_nvlink.h"
#include "collective/node_layout.h"
#include "collective/proxy.h"
#include "overlap/copy_path.h"
#include "transport/transport.h"
#include "tune/tuner.h"

namespace cclz {

namespace overlap {
class DeviceOverlap;
}
class PlanMemo;

// Which calls check their descriptors with the peers (docs/collectives.md, "Checking the call").
// Every: each call waits for the verdict. First: only the first call of each op does, the others
// go unchecked (NCCL's behaviour on a mismatch: a hang or garbage). Deferred: the first call of
// each op waits for its verdict, later calls queue theirs and go on (deferred_checks.h) where
// the transport has a control mesh (device communicators) and there is no proxy; host
// communicators check every call.
enum class CheckCalls { Every, First, Deferred };
// What one call does about its check.
enum class CheckWhen { Skip, Now, Deferred };

struct CommSettings {
  // Input bytes per frame (CCLZ_PIECE_BYTES); 0, the default: chosen per call from the message
  // (defaultPieceBytes in tune/piece_size.h).
  uint64_t pieceBytes = 0;
  // CCLZ_CHECK_CALLS=deferred (the default), 1 (every call) or first. A check costs one small
  // exchange, and on a device communicator a host synchronization unless it is deferred.
  CheckCalls checkCalls = CheckCalls::Deferred;
  // Device communicators: every call hands its data part to a proxy thread and returns; the
  // caller's stream waits only at cclzCommStreamWait (cclzCommConfig_t.asyncCalls, chosen in
  // code; docs/collectives.md, "Calls that return at once"). A host communicator refuses it.
  bool async = false;
  // Device communicators: the move stream (the transport's transfers) at the device's greatest
  // stream priority, the codec streams at the least (CCLZ_MOVE_PRIORITY=high, the default), or
  // every stream at the default priority (=normal). A codec kernel fills every multiprocessor;
  // at equal priority the block scheduler finishes dispatching it before the transfer kernel
  // queued after it gets a multiprocessor, so encoding and moving take turns instead of
  // overlapping (docs/collectives.md, "Stream priorities").
  bool highPriorityMove = true;
  // Device communicators: frames in memory the transport provides (CCLZ_NCCL_WINDOWS=1: NCCL
  // symmetric windows, Transport::frameMemory) instead of cudaMalloc. Off by default until
  // measured (docs/collectives.md, "NCCL windows").
  bool transportFrames = false;
  // Compressed calls choose between their codec and plain data from measured trials
  // (tune/tuner.h; cclzCommConfig_t.adaptive, else CCLZ_ADAPTIVE=0|1; on by default). Not with
  // async: a queued call's time is known too late to choose the next one's path.
  bool adaptive = true;
  // Device communicators: the fused NVLink paths (CCLZ_FUSED=1, frames stored by a kernel, or
  // CCLZ_FUSED=ce, copied by the copy engines; collective/fused_nvlink.h), made at creation (a
  // collective: NCCL's device communicator). Off by default: not yet faster than NCCL
  // (docs/collectives.md, "Fused NVLink paths").
  bool fused = false;
  bool fusedCopyEngines = false;  // CCLZ_FUSED=ce
  // CCLZ_FUSED=direct: the kernel path, with the reduce-scatter's encodes storing each frame
  // straight into its owner's window (no push kernel; an experiment until measured).
  bool fusedDirect = false;
  // The copy-engine path replays a direct call as a CUDA graph where its arguments repeat
  // (CCLZ_FUSED_GRAPHS=1, the default; 0: every call queued anew). Each rank's own: a replay
  // and a queued call move the same bytes with the same flags.
  bool fusedGraphs = true;
  // Device communicators: the multiprocessors the overlapped GEMMs leave to the transfers,
  // encodes and decodes that run beside them (CCLZ_OVERLAP_COMM_SMS; 0: the GEMMs plan for every
  // one; -1, unset: overlapReservedSms() chooses). cuBLASLt's Hopper GEMMs keep one CTA on every
  // multiprocessor they plan for until they end, so a transfer kernel queued beside one would
  // otherwise wait for the whole GEMM (docs/overlap.md, "The device path").
  int overlapCommSms = -1;
  // What the GEMMs leave: CCLZ_OVERLAP_COMM_SMS where set; else 16 beside NCCL's transfer
  // kernels, and 0 beside copy-engine transfers, which take no multiprocessor (measured faster
  // at every shape on 2 H200s, docs/overlap.md, "Copy-engine transfers").
  int overlapReservedSms(bool copyEngines) const {
    return overlapCommSms >= 0 ? overlapCommSms : copyEngines ? 0 : 16;
  }
  // Device communicators: the overlapped all-gather + GEMM's GEMMs one per chunk as it arrives
  // (CCLZ_OVERLAP_GATHER=ring, the default), or this rank's chunk first and the others in at most
  // two GEMMs once all have arrived (=merged: no partial last wave per chunk, the transfers after
  // the own chunk's GEMM exposed). An experiment until measured (docs/overlap.md).
  bool overlapMergedGather = false;

  // Device communicators: the overlapped GEMMs' transfers as NCCL's point-to-point calls
  // (CCLZ_OVERLAP_COPY=nccl, the default), as copies into the peers' memory on the copy engines
  // announced by flags (=ce; transport/nccl/peer_window.h), or the copy engines where every rank
  // can use them (=auto). The copy engines stay off by default until measured on 4 GPUs (docs/overlap.md).
  OverlapCopy overlapCopy = OverlapCopy::Nccl;
  // Device communicators, copy-engine all-gather + GEMM: this rank's chunk to every peer at once
  // (CCLZ_OVERLAP_PUSH=together, the default), or to one peer after another in the order they
  // multiply it (=inturn), so that the chunk each peer needs next is not sharing the copy
  // engines with chunks needed later. An experiment until measured on 4 GPUs (docs/overlap.md).
  bool overlapPushInTurn = false;

  // The two-level all-gather, reduce-scatter and all-reduce where the ranks span nodes of several
  // ranks each (collective/node_layout.h); CCLZ_TWO_LEVEL=0 keeps the flat algorithms
  // (docs/collectives.md, "Two-level calls across nodes").
  bool twoLevel = true;

  // This rank's node, for the layout: empty, the default, names it by $NCCL_HOSTID or the host
  // (nodeKey). Tests give ranks of one process different nodes with it.
  std::string nodeName;

  // From the environment (CCLZ_PIECE_BYTES, CCLZ_CHECK_CALLS, CCLZ_MOVE_PRIORITY,
  // CCLZ_NCCL_WINDOWS, CCLZ_ADAPTIVE, CCLZ_FUSED, CCLZ_OVERLAP_COMM_SMS, CCLZ_OVERLAP_GATHER,
  // CCLZ_OVERLAP_COPY, CCLZ_TWO_LEVEL); every rank must see the same (creation fails on every
  // rank where they differ, settings_agreement.cpp).
  static CommSettings fromEnvironment();
  // Checks a config of the C API (NULL: the defaults) and applies it.
  void apply(const cclzCommConfig_t* config);
};

class Communicator {
 public:
  Communicator(std::unique_ptr<Transport> transport, CommSettings settings);
  // Waits for the proxy's queued jobs (if any), and for the checking thread's exchanges (peers
  // still waiting for this rank's descriptors would otherwise see its control mesh close and
  // fail), before anything is released; after abort() for neither.
  ~Communicator();

  Transport& transport() { return *transport_; }
  // The data path's engine. With a proxy, the proxy's jobs use it, and the caller's thread only
  // while the proxy is idle.
  Engine& engine() { return *engine_; }
  // The proxy and the done events of its calls: only on a device communicator with
  // settings().async.
  Proxy* proxy() { return proxy_.get(); }
  DoneEvents& doneEvents() { return doneEvents_; }
  // cclzCommStreamWait: `stream` waits for every call queued so far (a no-op without a proxy);
  // throws the first error a queued call met, after the wait.
  void streamWait(cclzStream_t stream);
  // A job that failed on the proxy: the first such error becomes the communicator's
  // asynchronous error and stays (the ranks may no longer agree on what was sent: abort).
  void setJobError(cclzResult_t code, const std::string& message);
  const CommSettings& settings() const { return settings_; }
  // The fused NVLink paths: NULL unless settings().fused on a device communicator. The data part
  // of a call it takes (FusedNvlink::takes) runs there instead of through the pipeline.
  FusedNvlink* fused() { return fused_.get(); }
  // The overlapped GEMMs' device path (overlap/device_overlap.h), made at its first call on a
  // device communicator (CUDA builds).
  overlap::DeviceOverlap& deviceOverlap();
  // The adaptive choice of path: NULL when the communicator is not adaptive.
  Tuner* tuner() { return tuner_.get(); }

  // Which ranks share a node, learned at creation.
  const NodeLayout& nodes() const { return nodes_; }
  // How the last call that reached its data part ran (cclzCommGetLastPath). serial: an
  // overlapped GEMM call that ran serially (path: its collective's).
  void setLastPath(Path path, bool decided, bool serial = false) {
    lastPath_ = path, lastDecided_ = decided, lastSerial_ = serial;
  }
  Path lastPath() const { return lastPath_; }
  bool lastSerial() const { return lastSerial_; }
  bool lastDecided() const { return lastDecided_; }

  // How a call of this op checks its descriptors. Every rank makes the same calls in the same
  // order, so every rank answers alike.
  CheckWhen checkWhen(CollOp op);
  // Whether every control exchange goes through the checking thread (deferredChecks()):
  // CCLZ_CHECK_CALLS=deferred, a transport with a control mesh, no proxy.
  bool checksOnThread() const;
  // The checking thread, started at the first exchange, over the transport's control mesh.
  DeferredChecks& deferredChecks();
  // A control exchange over the transport's control mesh on the calling thread, waited for: the
  // device communicators without a checking thread. Same result as exchangeNow.
  std::vector<uint8_t> exchangeOnCaller(const void* mine, size_t bytes,
                                        const std::vector<int>& peers);
  // Held by each call while it queues work, so that a failed deferred check's abort does not
  // race the caller's thread queuing NCCL work (failCheck).
  std::timed_mutex& callMutex() { return callMutex_; }
  // Throws the failure of a deferred check, if one failed: the communicator was then aborted.
  void throwIfCheckFailed();
  // The plans of calls validated before (plan_memo.h), used under callMutex().
  PlanMemo& planMemo() { return *planMemo_; }

  // cclzCommGetAsyncError: a failed deferred check (cclzInvalidUsage), else the transport's
  // asynchronous error (cclzSystemError), else the device engine's error word of finished work,
  // read without waiting; cclzSuccess when none.
  cclzResult_t asyncError(std::string* message);
  void abort();

  // The message of the last failed call on this communicator (cclzGetLastError(comm)).
  void setLastError(const std::string& message);
  const char* lastError();

 private:
  // On the checking thread: records a deferred check's failure and aborts the transport.
  void failCheck(const std::string& message);
  // At creation, with every rank (settings_agreement.cpp): fails alike on every rank where a
  // setting that the ranks must share differs, and learns nodes_ from the node keys.
  void agreeWithPeers();

  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<FusedNvlink> fused_;  // uses the transport's NCCL communicator
  std::unique_ptr<overlap::DeviceOverlap> overlap_;
  DoneEvents doneEvents_;  // outlives the proxy: its jobs publish here
  std::unique_ptr<DeferredChecks> deferred_;        // uses the transport's mesh
  std::unique_ptr<CheckExchange> callerExchange_;  // exchangeOnCaller's
  uint64_t callerExchanges_ = 0;
  bool aborted_ = false;  // abort(): the destructor does not wait for checks
  std::unique_ptr<Proxy> proxy_;  // declared last: stopped first
  CommSettings settings_;
  std::unique_ptr<Tuner> tuner_;
  NodeLayout nodes_;
  Path lastPath_ = Path::Compressed;
  bool lastSerial_ = false;
  bool lastDecided_ = true;
  cclzResult_t jobError_ = cclzSuccess;
  std::string jobErrorMessage_;
  uint32_t checkedOps_ = 0;  // bit per CollOp already checked
  std::string checkError_;    // a failed deferred check (under errorMutex_)
  std::atomic<bool> checkFailed_{false};  // set with checkError_: ends the engines' host waits
  std::timed_mutex callMutex_;
  std::unique_ptr<PlanMemo> planMemo_;
  std::mutex errorMutex_;
  std::string lastError_;
  std::string lastErrorCopy_;  // what lastError() handed out
};

}  // namespace cclz

// The handle of the C API.
struct cclzComm {
  std::unique_ptr<cclz::Communicator> impl;
};
