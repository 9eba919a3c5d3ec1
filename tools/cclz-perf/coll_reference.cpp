// The reference of the collective ops: every rank's input exchanged over MPI (host memory), the
// expected output computed here independently of the library (coll_check.cpp).
#ifdef CCLZ_HAVE_MPI

#include <utility>

#include "coll_common.h"
#include "data.h"
#include "error.h"

namespace perf::coll {
namespace {

int mpiCount(uint64_t bytes) {
  if (bytes > 0x7FFFFFFFull) fail("-c: {} bytes per rank is beyond one MPI message; use -c 0", bytes);
  return static_cast<int>(bytes);
}

}  // namespace

Reference makeReference(const Shape& s, cclzDataType_t dtype, cclzRedOp_t op,
                        const std::vector<uint8_t>& input) {
  const size_t es = s.elemBytes;
  const int n = s.ranks;
  std::vector<uint8_t> received(s.recvElems * es);
  std::vector<uint8_t> parts;  // a reduction's contributions, by rank
  switch (s.kind) {
    case Kind::AllGather:
      MPI_Allgather(input.data(), mpiCount(input.size()), MPI_BYTE, received.data(),
                    mpiCount(input.size()), MPI_BYTE, MPI_COMM_WORLD);
      break;
    case Kind::AllToAll:
      MPI_Alltoall(input.data(), mpiCount(s.count * es), MPI_BYTE, received.data(),
                   mpiCount(s.count * es), MPI_BYTE, MPI_COMM_WORLD);
      break;
    case Kind::SendRecv:
      if (s.peer >= 0)
        MPI_Sendrecv(input.data(), mpiCount(input.size()), MPI_BYTE, s.peer, 7, received.data(),
                     mpiCount(received.size()), MPI_BYTE, s.peer, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
      else
        received = input;  // no partner: the output is never written; compare with nothing
      break;
    case Kind::ReduceScatter:  // parts[r] = rank r's block for this rank
      parts.resize(s.count * n * es);
      MPI_Alltoall(input.data(), mpiCount(s.count * es), MPI_BYTE, parts.data(),
                   mpiCount(s.count * es), MPI_BYTE, MPI_COMM_WORLD);
      break;
    case Kind::AllReduce:  // parts[r] = rank r's input
      parts.resize(s.count * n * es);
      MPI_Allgather(input.data(), mpiCount(input.size()), MPI_BYTE, parts.data(),
                    mpiCount(input.size()), MPI_BYTE, MPI_COMM_WORLD);
      break;
  }
  const bool reduces = s.kind == Kind::ReduceScatter || s.kind == Kind::AllReduce;
  return reduces ? reduceReference(parts, n, s.recvElems, dtype, op)
                 : moveReference(std::move(received), dtype);
}

}  // namespace perf::coll

#endif  // CCLZ_HAVE_MPI
