// The overlapped tensor-parallel GEMMs on a device communicator (docs/overlap.md, "The device
// path"): the schedules of overlap/schedule.h with the GEMMs (device_gemm.h) on the caller's
// stream and the transfers, with the codec's encodes and decodes, on a stream of this object's
// own, events between them. No host synchronization inside a call; the results are the host
// path's (host_overlap.h) with cuBLASLt's GEMM in place of the host GEMM.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "codec/device.h"
#include "collective/timeline.h"
#include "overlap/copy_path.h"
#include "overlap/device_gemm.h"
#include "overlap/host_overlap.h"

namespace cclz {

class Transport;
class PeerWindow;

namespace overlap {

class DeviceOverlap {
 public:
  // highPriority: the transfer stream at the device's greatest priority, so that its kernels
  // take the multiprocessors the GEMMs leave ahead of queued work. smsBesideNccl,
  // smsBesideCopyEngines: the multiprocessors the GEMMs leave beside each path's transfers
  // (CommSettings::overlapReservedSms, DeviceGemm). mergedGather: the all-gather's GEMMs as
  // CommSettings::overlapMergedGather says. copy: the transfers as NCCL's point-to-point kernels,
  // as copies into the peers' memory on the copy engines with flags in memory
  // (device_overlap_ce.cpp), or either (CommSettings::overlapCopy); with the copy engines asked
  // for, the path is decided at the first call (decideCopy). pushInTurn: the copy-engine
  // all-gather's copies one peer after another (CommSettings::overlapPushInTurn).
  DeviceOverlap(bool highPriority, int smsBesideNccl, int smsBesideCopyEngines,
                bool mergedGather = false, OverlapCopy copy = OverlapCopy::Nccl,
                bool pushInTurn = false);
  ~DeviceOverlap();
  DeviceOverlap(const DeviceOverlap&) = delete;
  DeviceOverlap& operator=(const DeviceOverlap&) = delete;

  // Where the copy engines are asked for, the first call decides (overlap_call.cpp) from what
  // each rank can tell alone (copyEnginesHere: empty where this rank can use them, else why
  // not; a first call captured into a CUDA graph cannot make the window) and whether every rank
  // can (an exchange): the copy engines, with the peer window made
  // (a collective; a communicator that is not one LSA team is found there, alike on every rank);
  // else NCCL's calls (OverlapCopy::Auto) or cclzNotSupported on every rank (CopyEngines). A
  // rank alone takes NCCL's path: it has nothing to move.
  bool copyUndecided() const { return !gemm_; }
  std::string copyEnginesHere(Transport& t, cudaStream_t stream) const;
  void decideCopy(Transport& t, bool everyRankCan, const std::string& whyNotHere);

  // One call, queued on `stream` (device memory throughout). The transport is the
  // communicator's device transport; every rank makes the call at the same point of its calls.
  void allGatherMatmul(Transport& t, const OverlapCall& call, cudaStream_t stream);
  void matmulReduceScatter(Transport& t, const OverlapCall& call, cudaStream_t stream);

  // The serial path of an adaptive call (overlap_call.cpp; docs/overlap.md, "Adaptive calls"):
  // beginSerial orders a direct call after the last direct one (whose scratch it reuses) and
  // returns `bytes` of this object's device memory for the call's product or gathered matrix;
  // wholeGemm runs one GEMM of the whole product on every multiprocessor (cuBLASLt's first
  // choice for the shape); endSerial closes the call.
  uint8_t* beginSerial(cudaStream_t stream, uint64_t bytes);
  void wholeGemm(const GemmArgs& g, cudaStream_t stream);
  void endSerial(cudaStream_t stream);

  // A frame a decode rejected in finished work (then cleared): cclzCorruptFrame, else success.
  cclzResult_t pollError(std::string* message);

  // Ends the copy-engine path's waits for its peers' flags (PeerWindow::release): call it before
  // the transport is aborted. Any thread; the calls' outputs are then undefined.
  void abort() noexcept;

  // The GEMM the calls run (once the path is decided), for tests that compare with it.
  DeviceGemm& gemm() { return *gemm_; }

 private:
  // Device memory of this object's own, grown outside captures only.
  struct Area {
    uint8_t* p = nullptr;
    uint64_t bytes = 0;
  };
  uint8_t* area(Area& a, uint64_t bytes, bool capturing);
  void begin(cudaStream_t stream, int chunks, bool capturing);
  void end(cudaStream_t stream, bool capturing);
  DeviceWorkspace workspace(const OverlapCall& call, uint64_t elements, bool capturing);

  void partialGemms(const OverlapCall& call, uint8_t* partials, int n, int me,
                    cudaStream_t stream);
  void partialGemmsInOrder(const OverlapCall& call, uint8_t* partials,
                           const std::vector<int>& order, cudaStream_t stream);
  void addPartial(const OverlapCall& call, float* acc, const uint8_t* values, uint64_t wire, int i,
                  int n, const DeviceWorkspace& ws);

  // GEMM + reduce-scatter across nodes (device_overlap_two_level.cpp; schedule.h:
  // twoLevelReduceScatterSteps), with NCCL's transfers.
  void matmulReduceScatterTwoLevel(Transport& t, const OverlapCall& call, cudaStream_t stream);

  // The copy-engine paths (device_overlap_ce.cpp).
  void allGatherMatmulCe(Transport& t, const OverlapCall& call, cudaStream_t stream);
  void matmulReduceScatterCe(Transport& t, const OverlapCall& call, cudaStream_t stream);
  // The copy engines for this call: decided for them, and not in a capture where NCCL's path can
  // stand in (Auto).
  bool copyEnginesFor(cudaStream_t stream) const;
  // The push streams wait for the call's start; joinPushes makes the transfer stream wait for
  // everything queued on them.
  void startPushes(int n);
  void joinPushes();

  std::unique_ptr<DeviceGemm> gemm_;  // made once the path is decided (its SMs depend on it)
  std::unique_ptr<DeviceGemm> wholeGemm_;  // the serial path's, made at its first call
  const int smsBesideNccl_, smsBesideCopyEngines_;
  const bool mergedGather_;
  const bool pushInTurn_;
  const OverlapCopy copy_;
  bool useCopyEngines_ = false;         // decided for them (decideCopy)
  std::unique_ptr<PeerWindow> window_;  // made where the copy engines were decided for
  std::vector<cudaStream_t> push_;     // one per rank (this rank's unused): copies and flags
  std::vector<cudaEvent_t> pushDone_;  // per push stream, the call's last work
  std::vector<cudaEvent_t> encoded_;   // per step, a frame ready to push (copy engine, codec)
  cudaStream_t comm_ = nullptr;      // transfers, encodes and decodes
  cudaEvent_t start_ = nullptr;      // the call's start on the caller's stream
  cudaEvent_t done_ = nullptr;       // the transfer stream's last work of the call
  cudaEvent_t last_ = nullptr;       // the caller's stream after the last direct call
  bool hasLast_ = false;
  std::vector<cudaEvent_t> ready_;   // per chunk (or step): rows in place, or a partial computed
  Area gathered_, frames_, partials_, acc_, scratch_, serial_;
  DeviceStatus* status_ = nullptr;
  Timeline timeline_;  // CCLZ_TIMELINE=1: each GEMM's and each step's span, printed after the call
};

}  // namespace overlap
}  // namespace cclz

#else  // a build without CUDA makes none: the type only completes the communicator's member

namespace cclz::overlap {
class DeviceOverlap {};
}  // namespace cclz::overlap

#endif  // CCLZ_HAVE_CUDA
