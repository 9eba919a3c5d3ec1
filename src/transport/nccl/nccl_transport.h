// The NCCL transport: device buffers, ncclSend/ncclRecv inside ncclGroupStart/End on the
// collective's stream. Created from a unique id (it owns the ncclComm_t) or around a communicator
// the caller already has and keeps owning. Either way it connects a control mesh of the same
// ranks (TCP, host_mesh.h) for the call check (controlMesh()): the NCCL communicator carries
// the data and nothing else.
#pragma once

#ifdef CCLZ_HAVE_NCCL

#include <nccl.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/host_mesh.h"
#include "transport/transport.h"

namespace cclz {

// Throws cclz::Error(cclzSystemError) with the call and NCCL's message.
void ncclCheck(ncclResult_t result, const char* call, const char* file, int line);
#define CCLZ_NCCL_CHECK(call) ::cclz::ncclCheck((call), #call, __FILE__, __LINE__)

// The config cclz creates its own NCCL communicators with (cclzCommInitRank*): NCCL's defaults,
// and the CTA policy CCLZ_NCCL_CTA_POLICY names (default, efficiency or zero: NCCL_CTA_POLICY_*;
// zero lets NCCL move data with the copy engines where it can). Throws cclzInvalidArgument on
// another value.
ncclConfig_t ncclConfigFromEnvironment();

// bytes of NCCL memory (ncclMemAlloc) registered as a symmetric window of comm (collective:
// every rank calls it alike), zeroed first; the memory is freed again if the registration fails. Throws
// cclzInvalidUsage on an aborted (NULL) communicator.
void* allocateSymmetricWindow(ncclComm_t comm, uint64_t bytes, ncclWindow_t* window);

// Frames in NCCL memory registered as symmetric windows of a communicator (FrameMemory):
// ncclMemAlloc + ncclCommWindowRegister, and back. Registering and deregistering are collective.
class NcclWindows final : public FrameMemory {
 public:
  explicit NcclWindows(const std::atomic<ncclComm_t>& comm) : comm_(comm) {}
  ~NcclWindows() override { releaseAll(); }
  void* allocate(uint64_t bytes) override;
  void release(void* p) noexcept override;
  // What is still allocated (the transport calls it before it destroys the communicator).
  void releaseAll() noexcept;

 private:
  const std::atomic<ncclComm_t>& comm_;  // the transport's; NULL once aborted
  std::mutex mutex_;
  std::map<void*, ncclWindow_t> windows_;
};

class NcclTransport final : public Transport {
 public:
  // Wraps comm; destroys it at the end when `owned`. Collective over comm's ranks: every rank
  // all-gathers its control mesh address over comm (one ncclAllGather, waited for on the
  // creating thread) and connects the mesh.
  NcclTransport(ncclComm_t comm, bool owned);
  ~NcclTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MemoryKind memory() const override { return MemoryKind::Device; }
  const char* name() const override { return "nccl"; }
  // ncclRecv must be given exactly the byte count the peer sends.
  bool learnsReceivedSize() const override { return false; }

  void groupStart(cclzStream_t stream) override;
  void send(const void* buf, uint64_t bytes, int peer) override;
  void recv(void* buf, uint64_t capacity, int peer, uint64_t* receivedBytes) override;
  void groupEnd() override;
  void allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t stream) override;
  bool reduceScatter(const void* send, void* recv, uint64_t count, int dtype, bool average,
                     cclzStream_t stream) override;
  bool allReduce(const void* send, void* recv, uint64_t count, int dtype, bool average,
                 cclzStream_t stream) override;

  FrameMemory* frameMemory() override { return &windows_; }

  HostMesh* controlMesh() override { return mesh_.get(); }

  std::string asyncError() override;
  // ncclCommAbort, also of a wrapped communicator (the only way to stop its operations): the
  // caller must not use or destroy that ncclComm_t afterwards. The control mesh stays open.
  void abort() override;

  ncclComm_t comm() const { return comm_; }
  // The handle itself, NULL once aborted: for objects that hand resources back to NCCL at their
  // end (NcclSymmetric), which must not touch an aborted communicator.
  const std::atomic<ncclComm_t>& commHandle() const { return comm_; }

 private:
  void query();
  // Every rank's control mesh address, by rank: one ncclAllGather on a stream of its own.
  std::vector<MeshAddress> allGatherAddresses(const MeshAddress& mine);
  void checkPeer(int peer) const;
  void checkReady() const;
  // CCLZ_TRACE: one line per launch (amount in `unit`: bytes or elements).
  void traceLaunch(const char* what, uint64_t amount, const char* unit) const;

  // Atomic: cclzCommAbort may clear it while the proxy thread (cclzCommConfig_t.asyncCalls = 1) is using it.
  std::atomic<ncclComm_t> comm_{nullptr};
  bool owned_ = false;
  int rank_ = 0;
  int size_ = 0;
  cudaStream_t stream_ = nullptr;
  bool inGroup_ = false;
  uint64_t groupBytes_ = 0;  // the open group's sends and receives, for the trace
  NcclWindows windows_{comm_};
  std::unique_ptr<HostMesh> mesh_;
};

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL
