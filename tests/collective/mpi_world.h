// MPI_COMM_WORLD as the multi-process collective tests use it (mpi_test.cpp, nccl_test.cpp):
// this process's rank, the rank count, an agreement across ranks, and a host communicator over it.
#pragma once

#include <mpi.h>

#include <cstdio>

#include "cclz/cclz.h"

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

// A host communicator over MPI_COMM_WORLD with adaptive calls as given (every rank aborts the
// job if it cannot be made). The caller keeps it for the run.
inline cclzComm_t makeWorldComm(bool adaptive) {
  MPI_Comm world = MPI_COMM_WORLD;
  cclzComm_t c = nullptr;
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  config.adaptive = adaptive ? 1 : 0;
  if (cclzCommInitFromMpiConfig(&c, &world, &config) != cclzSuccess) {
    std::fprintf(stderr, "cclzCommInitFromMpiConfig: %s\n", cclzGetLastError(nullptr));
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return c;
}

// ctest's SKIP_RETURN_CODE for the multi-process GPU tests (tests/collective/CMakeLists.txt).
inline constexpr int kSkipReturnCode = 77;

}  // namespace cclz::test
