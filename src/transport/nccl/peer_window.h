// Memory every rank of a communicator can write into its peers' copies of, over NVLink with the
// copy engines, and flags to say when: the overlapped GEMMs' copy-engine transfers
// (CCLZ_OVERLAP_COPY=ce; docs/overlap.md, "Copy-engine transfers") and the fused collectives'
// (CCLZ_FUSED=ce; docs/collectives.md, "Fused NVLink paths"). An NCCL symmetric window
// (ncclMemAlloc, registered collectively) whose peers' copies NCCL maps into this process
// (ncclGetPeerPointer); cudaMemcpyAsync into a peer's copy runs on a copy engine, and the flags
// are written and waited for with CUDA's stream memory operations (cuStreamWriteValue32,
// cuStreamWaitValue32), which take no multiprocessor either: nothing of the transfer competes
// with the GEMMs for the SMs.
//
// Layout of the window, the same on every rank: flags, then data. Two protocols use it:
//   arrived[r]: rank r's data (of the call numbered by the value, or up to that piece) is in
//     this rank's window;
//   consumed[r]: rank r has read what this rank put in r's window.
// Numbered calls (the overlapped GEMMs: nextEpoch): a call numbered e writes into peer p's data
// only once consumed[p] >= e - 1 here, then sets arrived[me] = e in p's window; the reader waits
// for arrived[r] >= e, reads, and sets consumed[me] = e in r's window. Values that repeat (the
// fused collectives, which a CUDA graph may replay): consumed[p] starts at 1 (markConsumed after
// a reserve that grew); a call waits for consumed[p] >= 1, sets it to 0 here, writes its pieces
// into p's data, each followed by arrived[me] = its piece's number + 1 in p's window; the reader
// waits for each piece's number, reads, then sets its own arrived[r] back to 0 and consumed[me]
// = 1 in r's window. Every wait is cuStreamWaitValue32's GEQ, a cyclic comparison
// ((int32_t)(flag - value) >= 0).
#pragma once

#include "transport/nccl/nccl_symmetric.h"

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cclz {

class NcclTransport;

class PeerWindow {
 public:
  static constexpr uint64_t kMaxRanks = 512;
  static constexpr uint64_t kFlagBytes = 2 * kMaxRanks * sizeof(uint32_t);

  // Collective over the transport's ranks (NCCL's device communicator). Throws cclzNotSupported
  // where a peer is not load/store accessible (not every rank in one LSA team) or the driver
  // lacks the stream memory operations.
  explicit PeerWindow(NcclTransport& t);
  // What this rank alone can tell before the collective creation: empty where it can make one,
  // else why not (too many ranks, another NCCL release than the headers', a driver without the
  // stream memory operations). Whether every rank is in one LSA team is known only after.
  static std::string unavailableHere(NcclTransport& t);
  ~PeerWindow();
  PeerWindow(const PeerWindow&) = delete;
  PeerWindow& operator=(const PeerWindow&) = delete;

  // Whether the data part holds `bytes` already (reserve would return at once).
  bool covers(uint64_t bytes) const {
    return base_ && kFlagBytes + bytes <= symmetric_.windowBytes();
  }
  // Makes the data part hold at least `bytes`: collective (every rank at the same call with the
  // same bytes), never while a stream is captured; waits for the device first, so that no copy
  // into the old window is in flight. The new window's flags are all 0 (the calls' numbers start
  // again at 1). True where it grew.
  bool reserve(uint64_t bytes);
  // Sets this rank's own consumed flags to `value` (on the host, waited for): right after a
  // reserve that grew, before this rank writes into any peer, no peer writes them yet.
  void markConsumed(uint32_t value);

  // The next call's number (1, 2, ...), the same on every rank.
  uint32_t nextEpoch() {
    const uint32_t next = epoch_.load(std::memory_order_relaxed) + 1;
    epoch_.store(next, std::memory_order_relaxed);
    return next;
  }

  // Sets every flag of this rank's window 2^30 ahead of the last call's number, so that every wait
  // on them ends (the comparison is cyclic: "the greatest value" would be behind most numbers):
  // the communicator is being aborted (a failed deferred check, cclzCommAbort), and the calls'
  // outputs are undefined. Any thread; queued on a stream of its own, which nothing blocks.
  void release() noexcept;

  uint8_t* localData() const { return base_ + kFlagBytes; }
  uint8_t* peerData(int peer) const { return peers_[peer] + kFlagBytes; }

  // Stream memory operations on the flags (no kernel): set a flag in peer `to`'s window (or one
  // of this rank's own: setOwn*), or wait until one of this rank's own reaches `value`.
  void setArrived(cudaStream_t s, int to, uint32_t value) const;
  void setConsumed(cudaStream_t s, int to, uint32_t value) const;
  void waitArrived(cudaStream_t s, int from, uint32_t value) const;
  void setOwnArrived(cudaStream_t s, int from, uint32_t value) const;
  void setOwnConsumed(cudaStream_t s, int by, uint32_t value) const;
  void waitConsumed(cudaStream_t s, int by, uint32_t value) const;

 private:
  void write(cudaStream_t s, uint8_t* at, uint32_t value) const;
  void wait(cudaStream_t s, uint8_t* at, uint32_t value) const;
  uint8_t* arrivedIn(uint8_t* base, int rank) const {
    return base + rank * sizeof(uint32_t);
  }
  uint8_t* consumedIn(uint8_t* base, int rank) const {
    return base + (kMaxRanks + rank) * sizeof(uint32_t);
  }

  NcclSymmetric symmetric_;
  int me_ = 0;
  uint8_t* base_ = nullptr;      // this rank's window
  std::vector<uint8_t*> peers_;  // every rank's window as mapped here (this rank's own at me_)
  std::atomic<uint32_t> epoch_{0};  // the last call's number; release() reads it from any thread
  cudaStream_t release_ = nullptr;
  uint32_t* released_ = nullptr;  // pinned host words that release() copies into the flags
  void* writeValue_ = nullptr;   // cuStreamWriteValue32
  void* waitValue_ = nullptr;    // cuStreamWaitValue32
};

// The peers' mapped addresses of window offset 0 (a kernel of one thread per rank calls
// ncclGetPeerPointer), into `out` (host, n entries). Waits for it.
void peerPointers(ncclWindow_t window, int n, std::vector<uint8_t*>* out);

}  // namespace cclz

#else  // without NCCL's device API there is none: the type only completes its users' members

namespace cclz {
class PeerWindow {};
}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL_DEVICE_API
