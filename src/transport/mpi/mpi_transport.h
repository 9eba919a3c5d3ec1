// The MPI transport: host buffers, MPI_Isend/MPI_Irecv posted in a group and completed together at
// groupEnd. The communicator is a duplicate of the caller's (MPI_Comm_dup), so cclz's messages
// never match the caller's own.
#pragma once

#ifdef CCLZ_HAVE_MPI

#include <mpi.h>

#include <vector>

#include "transport/transport.h"

namespace cclz {

class MpiTransport final : public Transport {
 public:
  // Collective over `comm` (MPI_Comm_dup). MPI must be initialized.
  explicit MpiTransport(MPI_Comm comm);
  ~MpiTransport() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  MemoryKind memory() const override { return MemoryKind::Host; }
  const char* name() const override { return "mpi"; }
  bool learnsReceivedSize() const override { return true; }

  void groupStart(cclzStream_t) override;
  void send(const void* buf, uint64_t bytes, int peer) override;
  void recv(void* buf, uint64_t capacity, int peer, uint64_t* receivedBytes) override;
  void groupEnd() override;
  void allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t stream) override;
  uint64_t maxMessageBytes() const override;
  void abort() override;

 private:
  void checkPeer(int peer) const;
  int messageCount(uint64_t bytes) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  bool inGroup_ = false;
  std::vector<MPI_Request> requests_;
  std::vector<uint64_t*> receivedBytes_;  // one per request; NULL for sends
};

}  // namespace cclz

#endif  // CCLZ_HAVE_MPI
