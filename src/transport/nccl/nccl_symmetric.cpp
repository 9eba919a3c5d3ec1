#include "transport/nccl/nccl_symmetric.h"

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

#include <cstring>

#include "common/error.h"
#include "common/trace.h"
#include "transport/nccl/nccl_transport.h"

namespace cclz {

std::string ncclDeviceApiMismatch() {
  int loaded = 0;
  if (ncclGetVersion(&loaded) != ncclSuccess) return "ncclGetVersion failed";
  if (loaded == NCCL_VERSION_CODE) return {};
  return "NCCL's device API (CCLZ_FUSED=1, CCLZ_OVERLAP_COPY=ce) needs the NCCL that cclz was "
         "built against: built with " + std::to_string(NCCL_VERSION_CODE) +
         ", the process loaded " + std::to_string(loaded) +
         " (in a torch process, torch's: build cclz with -DCCLZ_NCCL_FROM_TORCH=ON)";
}

NcclSymmetric::NcclSymmetric(const std::atomic<ncclComm_t>& commHandle, int lsaBarriers)
    : comm_(commHandle), lsaBarriers_(lsaBarriers) {
  ncclComm_t comm = comm_.load();
  CCLZ_REQUIRE(comm, cclzInvalidUsage, "the communicator was aborted");
  // The device API's structures change between NCCL releases (2.28.3's requirements are not
  // 2.28.9's), and NCCL takes them without a size or version: a library other than the headers'
  // misreads them (measured: "GIN not supported" from 2.28.9 given 2.28.3's). In a torch
  // process the NCCL loaded is torch's.
  const std::string mismatch = ncclDeviceApiMismatch();
  CCLZ_REQUIRE(mismatch.empty(), cclzNotSupported, mismatch);
  // NOTE: NCCL 2.28 has no initializer for the requirements (NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
  // comes in 2.29): zero every field, then ask for the LSA barriers alone (no GIN, no multimem,
  // no LL all-to-all buffers).
  ncclDevCommRequirements req;
  std::memset(&req, 0, sizeof req);
  req.lsaBarrierCount = lsaBarriers;
  CCLZ_NCCL_CHECK(ncclDevCommCreate(comm, &req, &dev_));
  CCLZ_TRACE("nccl: device communicator, rank %d of %d, LSA team %d of %d, %d LSA barriers",
             dev_.rank, dev_.nRanks, dev_.lsaRank, dev_.lsaSize, lsaBarriers);
}

NcclSymmetric::~NcclSymmetric() {
  releaseWindow();
  if (ncclComm_t comm = comm_.load()) ncclDevCommDestroy(comm, &dev_);
}

void NcclSymmetric::releaseWindow() noexcept {
  ncclComm_t comm = comm_.load();
  if (window_ && comm) ncclCommWindowDeregister(comm, window_);
  if (base_) ncclMemFree(base_);
  window_ = nullptr, base_ = nullptr, bytes_ = 0;
}

void NcclSymmetric::growWindow(uint64_t bytes) {
  const uint64_t align = NCCL_WIN_REQUIRED_ALIGNMENT;
  bytes = (bytes + align - 1) / align * align;
  if (bytes <= bytes_) return;
  ncclComm_t comm = comm_.load();
  CCLZ_REQUIRE(comm, cclzInvalidUsage, "the communicator was aborted");
  releaseWindow();
  ncclWindow_t w = nullptr;
  void* p = allocateSymmetricWindow(comm, bytes, &w);
  base_ = p, window_ = w, bytes_ = bytes;
  CCLZ_TRACE("nccl: symmetric window of %llu bytes for the fused paths",
             static_cast<unsigned long long>(bytes));
}

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL_DEVICE_API
