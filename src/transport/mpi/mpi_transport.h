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
  // MPI's own reductions (MPI_SUM for fp32; bf16 and fp16 by user-defined operations that add
  // through fp32 and round each partial sum to the dtype, as NCCL does per step). Average divides
  // the sums afterwards. False (the pipeline runs) for counts above MPI's int and for buffers
  // that overlap other than all-reduce's exact in place.
  bool reduceScatter(const void* send, void* recv, uint64_t count, int dtype, bool average,
                     cclzStream_t stream) override;
  bool allReduce(const void* send, void* recv, uint64_t count, int dtype, bool average,
                 cclzStream_t stream) override;
  uint64_t maxMessageBytes() const override;
  void abort() override;

 private:
  void checkPeer(int peer) const;
  // The datatype and operation that sum dtype's elements; false for other dtypes.
  bool sumOf(int dtype, MPI_Datatype* type, MPI_Op* op) const;
  int messageCount(uint64_t bytes) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  bool inGroup_ = false;
  std::vector<MPI_Request> requests_;
  std::vector<uint64_t*> receivedBytes_;  // one per request; NULL for sends
  MPI_Op bf16Sum_ = MPI_OP_NULL, fp16Sum_ = MPI_OP_NULL;
};

}  // namespace cclz

#endif  // CCLZ_HAVE_MPI
