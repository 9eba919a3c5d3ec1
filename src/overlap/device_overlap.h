// The overlapped tensor-parallel GEMMs on a device communicator (docs/overlap.md, "The device
// path"): the schedules of overlap/schedule.h with the GEMMs (device_gemm.h) on the caller's
// stream and the transfers, with the codec's encodes and decodes, on a stream of this object's
// own, events between them. No host synchronization inside a call; the results are the host
// path's (host_overlap.h) with cuBLASLt's GEMM in place of the host GEMM.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstdint>
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

class DeviceOverlap {
 public:
  // highPriority: the transfer stream at the device's greatest priority, so that its kernels
  // take the multiprocessors the GEMMs leave (commSms of them, DeviceGemm) ahead of queued work.
  // mergedGather: the all-gather's GEMMs as CommSettings::overlapMergedGather says.
  DeviceOverlap(bool highPriority, int commSms, bool mergedGather = false);
  ~DeviceOverlap();
  DeviceOverlap(const DeviceOverlap&) = delete;
  DeviceOverlap& operator=(const DeviceOverlap&) = delete;

  // One call, queued on `stream` (device memory throughout). The transport is the
  // communicator's device transport; every rank makes the call at the same point of its calls.
  void allGatherMatmul(Transport& t, const OverlapCall& call, cudaStream_t stream);
  void matmulReduceScatter(Transport& t, const OverlapCall& call, cudaStream_t stream);

  // A frame a decode rejected in finished work (then cleared): cclzCorruptFrame, else success.
  cclzResult_t pollError(std::string* message);

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

  DeviceGemm gemm_;
  const bool mergedGather_;
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
