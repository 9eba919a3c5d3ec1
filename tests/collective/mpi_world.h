// MPI_COMM_WORLD as the multi-process collective tests use it (mpi_test.cpp, nccl_test.cpp):
// this process's rank, the rank count, and an agreement across ranks.
#pragma once

#include <mpi.h>

namespace cclz::test {

inline int worldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

inline int worldSize() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// True on every rank when `ok` holds on every rank.
inline bool allRanks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// ctest's SKIP_RETURN_CODE for the multi-process GPU tests (tests/collective/CMakeLists.txt).
inline constexpr int kSkipReturnCode = 77;

}  // namespace cclz::test
