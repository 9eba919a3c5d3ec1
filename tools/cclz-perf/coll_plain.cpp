// The plain collectives cclz is compared with, on the same buffers and in the same run: MPI on
// host memory (bf16 and fp16 summed by a user-defined MPI_Op through fp32, since MPI has no such
// types), NCCL on device memory. Send/recv: the partners exchange one way, then the other, as the
// cclz calls do (no groups).
#ifdef CCLZ_HAVE_MPI

#include <cstring>
#include <memory>

#include "coll_common.h"
#include "data.h"
#include "error.h"

#ifdef CCLZ_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace perf::coll {
namespace {

// bf16 sums for MPI, rounding each sum once (as NCCL does per step), with bit operations: a
// baseline must not be slowed down by its own conversions.
void sumBf16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    uint32_t ua = uint32_t{a[i]} << 16, ub = uint32_t{b[i]} << 16;
    float fa, fb;
    std::memcpy(&fa, &ua, 4);
    std::memcpy(&fb, &ub, 4);
    const float s = fa + fb;
    uint32_t u;
    std::memcpy(&u, &s, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u)
      b[i] = static_cast<uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
    else
      b[i] = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
  }
}

// 16-bit float sums for MPI through the generic rounding (fp16).
template <int ExpBits, int ManBits>
void sum16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto dtype = ExpBits == 8 ? cclzBfloat16 : cclzFloat16;
  auto* a = static_cast<uint8_t*>(in);
  auto* b = static_cast<uint8_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const double s = static_cast<float>(elementValue(dtype, a + 2 * i)) +
                     static_cast<float>(elementValue(dtype, b + 2 * i));
    const uint16_t h = static_cast<uint16_t>(roundToFormat(static_cast<float>(s), ExpBits, ManBits));
    std::memcpy(b + 2 * i, &h, 2);
  }
}

class PlainMpi final : public Plain {
 public:
  PlainMpi() {
    MPI_Op_create(&sumBf16, 1, &bf16Sum_);
    MPI_Op_create(&sum16<5, 10>, 1, &fp16Sum_);
  }
  ~PlainMpi() override {
    MPI_Op_free(&bf16Sum_);
    MPI_Op_free(&fp16Sum_);
  }
  const char* name() const override { return "mpi"; }

  void run(const Shape& s, cclzDataType_t dtype, const void* send, void* recv) override {
    const int es = static_cast<int>(s.elemBytes);
    const MPI_Datatype type = dtype == cclzFloat32 ? MPI_FLOAT : MPI_UINT16_T;
    const MPI_Op sum = dtype == cclzFloat32 ? MPI_SUM : dtype == cclzBfloat16 ? bf16Sum_ : fp16Sum_;
    const int count = static_cast<int>(s.count);
    switch (s.kind) {
      case Kind::AllGather:
        MPI_Allgather(send, count * es, MPI_BYTE, recv, count * es, MPI_BYTE, MPI_COMM_WORLD);
        break;
      case Kind::AllToAll:
        MPI_Alltoall(send, count * es, MPI_BYTE, recv, count * es, MPI_BYTE, MPI_COMM_WORLD);
        break;
      case Kind::ReduceScatter:
        MPI_Reduce_scatter_block(send, recv, count, type, sum, MPI_COMM_WORLD);
        break;
      case Kind::AllReduce:
        MPI_Allreduce(send, recv, count, type, sum, MPI_COMM_WORLD);
        break;
      case Kind::SendRecv:
        if (s.peer < 0) break;
        if (s.rank % 2 == 0) {
          MPI_Send(send, count * es, MPI_BYTE, s.peer, 9, MPI_COMM_WORLD);
          MPI_Recv(recv, count * es, MPI_BYTE, s.peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
          MPI_Recv(recv, count * es, MPI_BYTE, s.peer, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          MPI_Send(send, count * es, MPI_BYTE, s.peer, 9, MPI_COMM_WORLD);
        }
        break;
    }
  }

 private:
  MPI_Op bf16Sum_ = MPI_OP_NULL, fp16Sum_ = MPI_OP_NULL;
};

#ifdef CCLZ_HAVE_NCCL
void ncclCheck(ncclResult_t r, const char* call) {
  if (r != ncclSuccess) fail("{} failed: {}", call, ncclGetErrorString(r));
}
#define PERF_NCCL_CHECK(call) ncclCheck((call), #call)

class PlainNccl final : public Plain {
 public:
  explicit PlainNccl(void* stream) : stream_(static_cast<cudaStream_t>(stream)) {
    int rank = 0, ranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    ncclUniqueId id{};
    if (rank == 0) PERF_NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    PERF_NCCL_CHECK(ncclCommInitRank(&comm_, ranks, id, rank));
  }
  ~PlainNccl() override { ncclCommDestroy(comm_); }
  const char* name() const override { return "nccl"; }

  void run(const Shape& s, cclzDataType_t dtype, const void* send, void* recv) override {
    const ncclDataType_t type = dtype == cclzFloat32   ? ncclFloat32
                                : dtype == cclzFloat16 ? ncclFloat16
                                                       : ncclBfloat16;
    switch (s.kind) {
      case Kind::AllGather:
        PERF_NCCL_CHECK(ncclAllGather(send, recv, s.count, type, comm_, stream_));
        break;
      case Kind::AllToAll:
        PERF_NCCL_CHECK(ncclAlltoAll(send, recv, s.count, type, comm_, stream_));
        break;
      case Kind::ReduceScatter:
        PERF_NCCL_CHECK(ncclReduceScatter(send, recv, s.count, type, ncclSum, comm_, stream_));
        break;
      case Kind::AllReduce:
        PERF_NCCL_CHECK(ncclAllReduce(send, recv, s.count, type, ncclSum, comm_, stream_));
        break;
      case Kind::SendRecv:
        if (s.peer < 0) break;
        if (s.rank % 2 == 0) {
          PERF_NCCL_CHECK(ncclSend(send, s.count, type, s.peer, comm_, stream_));
          PERF_NCCL_CHECK(ncclRecv(recv, s.count, type, s.peer, comm_, stream_));
        } else {
          PERF_NCCL_CHECK(ncclRecv(recv, s.count, type, s.peer, comm_, stream_));
          PERF_NCCL_CHECK(ncclSend(send, s.count, type, s.peer, comm_, stream_));
        }
        break;
    }
  }

 private:
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_;
};
#endif

}  // namespace

std::unique_ptr<Plain> makePlainMpi() { return std::make_unique<PlainMpi>(); }
#ifdef CCLZ_HAVE_NCCL
std::unique_ptr<Plain> makePlainNccl(void* stream) { return std::make_unique<PlainNccl>(stream); }
#endif

}  // namespace perf::coll

#endif  // CCLZ_HAVE_MPI
