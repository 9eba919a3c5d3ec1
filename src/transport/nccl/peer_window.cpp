#include "transport/nccl/peer_window.h"

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

#include <cuda.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codec/device.h"
#include "common/error.h"
#include "common/trace.h"
#include "transport/nccl/nccl_transport.h"

namespace cclz {
namespace {

// cuStreamWriteValue32 and cuStreamWaitValue32 alike.
using ValueOp32 = CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned int);

// A driver function through the runtime (libcclz does not link libcuda itself).
void* driverFunction(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t e =
      cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
  CCLZ_REQUIRE(e == cudaSuccess && found == cudaDriverEntryPointSuccess && fn, cclzNotSupported,
               std::string("the CUDA driver has no ") + name +
                   " (stream memory operations, for the copy engines' transfers)");
  return fn;
}

// One stream memory operation on the 32-bit flag at `at` (the two share a signature).
void valueOp(void* fn, const char* name, cudaStream_t s, uint8_t* at, uint32_t value,
             unsigned int flags) {
  const CUresult r = reinterpret_cast<ValueOp32>(fn)(
      reinterpret_cast<CUstream>(s), reinterpret_cast<CUdeviceptr>(at), value, flags);
  CCLZ_REQUIRE(r == CUDA_SUCCESS, cclzUnhandledCudaError,
               std::string(name) + " failed (CUresult " + std::to_string(r) + ")");
}

}  // namespace

std::string PeerWindow::unavailableHere(NcclTransport& t) {
  if (static_cast<uint64_t>(t.size()) > kMaxRanks)
    return "the copy engines take at most " + std::to_string(kMaxRanks) + " ranks";
  std::string why = ncclDeviceApiMismatch();
  if (!why.empty()) return why;
  try {
    driverFunction("cuStreamWriteValue32");
    driverFunction("cuStreamWaitValue32");
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

// One LSA barrier, which this path never uses: NCCL's device communicator is made as the fused
// paths make theirs, the case measured on the device.
PeerWindow::PeerWindow(NcclTransport& t) : symmetric_(t.commHandle(), 1), me_(t.rank()) {
  CCLZ_REQUIRE(symmetric_.wholeTeam(), cclzNotSupported,
               "the copy engines' transfers need every rank's memory in reach over NVLink (one LSA "
               "team); this communicator's team has " +
                   std::to_string(symmetric_.lsaSize()) + " of " + std::to_string(t.size()) +
                   " ranks");
  CCLZ_REQUIRE(static_cast<uint64_t>(t.size()) <= kMaxRanks, cclzNotSupported,
               "the copy engines' transfers take at most " + std::to_string(kMaxRanks) + " ranks");
  writeValue_ = driverFunction("cuStreamWriteValue32");
  waitValue_ = driverFunction("cuStreamWaitValue32");
  CCLZ_CUDA_CHECK(cudaStreamCreateWithFlags(&release_, cudaStreamNonBlocking));
  CCLZ_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&released_), kFlagBytes,
                                cudaHostAllocDefault));
}

PeerWindow::~PeerWindow() {
  cudaStreamDestroy(release_);
  cudaFreeHost(released_);
}

void PeerWindow::release() noexcept {
  if (!base_) return;
  // NOTE: not a memset to 0xFF: as a cyclic comparison 0xFFFFFFFF is behind every step from 1 to
  // 2^31 - 1, and the waits would go on.
  // Pinned, so that the copy is queued without waiting (a wait could hang behind a blocked
  // queue).
  static_assert(kFlagBytes == 2 * kMaxRanks * sizeof(uint32_t), "the flags are 32-bit words");
  std::fill(released_, released_ + 2 * kMaxRanks, epoch_.load() + (1u << 30));
  cudaMemcpyAsync(base_, released_, kFlagBytes, cudaMemcpyHostToDevice, release_);
}

bool PeerWindow::reserve(uint64_t bytes) {
  if (covers(bytes)) return false;
  // Copies into the old window and waits on its flags may still be queued.
  CCLZ_CUDA_CHECK(cudaDeviceSynchronize());
  symmetric_.growWindow(kFlagBytes + bytes);
  base_ = static_cast<uint8_t*>(symmetric_.windowBase());
  peerPointers(symmetric_.window(), symmetric_.devComm().nRanks, &peers_);
  for (size_t r = 0; r < peers_.size(); ++r)
    CCLZ_REQUIRE(peers_[r], cclzNotSupported,
                 "rank " + std::to_string(r) + "'s window is not mapped here");
  epoch_.store(0);  // the new window's flags are zero on every rank
  CCLZ_TRACE("copy engines: peer window of %llu bytes",
             static_cast<unsigned long long>(symmetric_.windowBytes()));
  return true;
}

void PeerWindow::markConsumed(uint32_t value) {
  const std::vector<uint32_t> words(kMaxRanks, value);
  CCLZ_CUDA_CHECK(cudaMemcpy(consumedIn(base_, 0), words.data(), kMaxRanks * sizeof(uint32_t),
                             cudaMemcpyHostToDevice));
}

// The default flags order the write after the stream's earlier work, with a memory fence: the
// copies before it are visible to whoever sees the value.
void PeerWindow::write(cudaStream_t s, uint8_t* at, uint32_t value) const {
  valueOp(writeValue_, "cuStreamWriteValue32", s, at, value, CU_STREAM_WRITE_VALUE_DEFAULT);
}

void PeerWindow::wait(cudaStream_t s, uint8_t* at, uint32_t value) const {
  valueOp(waitValue_, "cuStreamWaitValue32", s, at, value, CU_STREAM_WAIT_VALUE_GEQ);
}

void PeerWindow::setArrived(cudaStream_t s, int to, uint32_t value) const {
  write(s, arrivedIn(peers_[to], me_), value);
}
void PeerWindow::setConsumed(cudaStream_t s, int to, uint32_t value) const {
  write(s, consumedIn(peers_[to], me_), value);
}
void PeerWindow::setOwnArrived(cudaStream_t s, int from, uint32_t value) const {
  write(s, arrivedIn(base_, from), value);
}
void PeerWindow::setOwnConsumed(cudaStream_t s, int by, uint32_t value) const {
  write(s, consumedIn(base_, by), value);
}
void PeerWindow::waitArrived(cudaStream_t s, int from, uint32_t value) const {
  wait(s, arrivedIn(base_, from), value);
}
void PeerWindow::waitConsumed(cudaStream_t s, int by, uint32_t value) const {
  wait(s, consumedIn(base_, by), value);
}

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL_DEVICE_API
