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
#include "overlap/device_gemm.h"
#include "overlap/host_overlap.h"

namespace cclz {

class Transport;

namespace overlap {

class PeerWindow;

class DeviceOverlap {
 public:
  // highPriority: the transfer stream at the device's greatest priority, so that its kernels
  // take the multiprocessors the GEMMs leave (commSms of them, DeviceGemm) ahead of queued work.
  // mergedGather: the all-gather's GEMMs as CommSettings::overlapMergedGather says.
  // copyEngine: the transfers as copies into the peers' memory on the copy engines with flags
  // in memory (CommSettings::overlapCopyEngine; device_overlap_ce.cpp), instead of NCCL's
  // point-to-point kernels.
  DeviceOverlap(bool highPriority, int commSms, bool mergedGather = false,
                bool copyEngine = false);
  ~DeviceOverlap();
  DeviceOverlap(const DeviceOverlap&) = delete;
  DeviceOverlap& operator=(const DeviceOverlap&) = delete;

  // One call, queued on `stream` (device memory throughout). The transport is the
  // communicator's device transport; every rank makes the call at the same point of its calls.
  void allGatherMatmul(Transport& t, const OverlapCall& call, cudaStream_t stream);
  void matmulReduceScatter(Transport& t, const OverlapCall& call, cudaStream_t stream);

  // A frame a decode rejected in finished work (then cleared): cclzCorruptFrame, else success.
  cclzResult_t pollError(std::string* message);

  // Ends the copy-engine path's waits for its peers' flags (PeerWindow::release): call it before
  // the transport is aborted. Any thread; the calls' outputs are then undefined.
  void abort() noexcept;

  // The GEMM the calls run, for tests that compare with it.
  DeviceGemm& gemm() { return gemm_; }

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
  void addPartial(const OverlapCall& call, float* acc, const uint8_t* values, uint64_t wire, int i,
                  int n, const DeviceWorkspace& ws);

  // The copy-engine paths (device_overlap_ce.cpp).
  void allGatherMatmulCe(Transport& t, const OverlapCall& call, cudaStream_t stream);
  void matmulReduceScatterCe(Transport& t, const OverlapCall& call, cudaStream_t stream);
  // The peer window (made at the first call: collective) and one push stream per rank.
  PeerWindow& peerWindow(Transport& t);
  // The push streams wait for the call's start; joinPushes makes the transfer stream wait for
  // everything queued on them.
  void startPushes(int n);
  void joinPushes();

  DeviceGemm gemm_;
  const bool mergedGather_;
  const bool copyEngine_;
  std::unique_ptr<PeerWindow> window_;
  std::vector<cudaStream_t> push_;     // one per rank (this rank's unused): copies and flags
  std::vector<cudaEvent_t> pushDone_;  // per push stream, the call's last work
  std::vector<cudaEvent_t> encoded_;   // per step, a frame ready to push (copy engine, codec)
  cudaStream_t comm_ = nullptr;      // transfers, encodes and decodes
  cudaEvent_t start_ = nullptr;      // the call's start on the caller's stream
  cudaEvent_t done_ = nullptr;       // the transfer stream's last work of the call
  cudaEvent_t last_ = nullptr;       // the caller's stream after the last direct call
  bool hasLast_ = false;
  std::vector<cudaEvent_t> ready_;   // per chunk (or step): rows in place, or a partial computed
  Area gathered_, frames_, partials_, acc_, scratch_;
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
