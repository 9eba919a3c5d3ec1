// NCCL's device API on a communicator (NCCL 2.28's nccl_device.h): a device communicator with
// LSA barriers, and one symmetric window, for kernels that load their peers' memory over NVLink
// themselves (the fused paths, collective/fused_nvlink.h). docs/collectives.md, "Fused NVLink
// paths", states what of NCCL's headers this relies on.
#pragma once

#ifdef CCLZ_HAVE_NCCL

#include <nccl.h>

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
#define CCLZ_HAVE_NCCL_DEVICE_API 1
#include <nccl_device/core.h>
#include <nccl_device/impl/comm__types.h>
#endif

#include <atomic>
#include <cstdint>
#include <string>

namespace cclz {

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

// Empty where the NCCL loaded in the process is the release of the headers cclz was built with,
// else why NCCL's device API cannot be used: its structs change layout between releases and
// NCCL takes them without a size or version.
std::string ncclDeviceApiMismatch();

class NcclSymmetric {
 public:
  // Collective over comm's ranks: ncclDevCommCreate with `lsaBarriers` LSA barriers (one per
  // CTA that synchronizes with its peers at the same time). Throws cclz::Error where NCCL
  // refuses. `comm` is the transport's (NcclTransport::commHandle): it must outlive this
  // object, and once aborted (NULL) nothing is handed back to NCCL.
  NcclSymmetric(const std::atomic<ncclComm_t>& comm, int lsaBarriers);
  // Deregisters the window and destroys the device communicator (both collective: every rank
  // destroys its communicator at the same point, as with NCCL's own destroy).
  ~NcclSymmetric();
  NcclSymmetric(const NcclSymmetric&) = delete;
  NcclSymmetric& operator=(const NcclSymmetric&) = delete;

  // Whether every rank of the communicator is in this rank's LSA team (load/store access to
  // every peer's window: NVLink or one GPU's memory). The same answer on every rank.
  bool wholeTeam() const { return dev_.lsaSize == dev_.nRanks; }
  int lsaSize() const { return dev_.lsaSize; }
  int lsaBarriers() const { return lsaBarriers_; }
  // Passed by value to a kernel.
  const ncclDevComm& devComm() const { return dev_; }

  // The window: ncclMemAlloc memory registered with NCCL_WIN_COLL_SYMMETRIC, the same size on
  // every rank. growWindow(bytes) replaces it with one of at least `bytes` (rounded up to
  // NCCL_WIN_REQUIRED_ALIGNMENT) where it is smaller: collective (registration is), so every
  // rank must call it at the same point with the same bytes, and no kernel of any rank may
  // still use the old window (the caller waits for that first).
  void growWindow(uint64_t bytes);
  ncclWindow_t window() const { return window_; }
  void* windowBase() const { return base_; }
  uint64_t windowBytes() const { return bytes_; }

 private:
  void releaseWindow() noexcept;

  const std::atomic<ncclComm_t>& comm_;
  ncclDevComm dev_{};
  int lsaBarriers_ = 0;
  void* base_ = nullptr;
  ncclWindow_t window_ = nullptr;
  uint64_t bytes_ = 0;
};

#endif  // CCLZ_HAVE_NCCL_DEVICE_API

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL
