// The start and end of the NCCL test programs (nccl_test.cpp, nccl_async_test.cu,
// tests/overlap/nccl_overlap_test.cpp) and the communicators they share, one process per GPU
// under mpirun: NCCL wants one GPU per rank of a communicator, so fewer GPUs than ranks
// is a ctest skip, not a pass; every rank runs the tests (brief beyond rank 0) and the program
// passes when every rank passed.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cclz/cclz.h"
#include "mpi_world.h"

namespace cclz::test {

// Whether the device communicator is created with asyncCalls = 1 (set before the first comms()).
inline bool& asyncCalls() {
  static bool on = false;
  return on;
}

// The communicators every test of a program shares: a device one over NCCL (the unique id
// broadcast over MPI; asyncCalls() chooses its config), a host one over MPI_COMM_WORLD for the
// reference path, and a stream.
struct NcclTestComms {
  cclzComm_t device = nullptr;
  cclzComm_t host = nullptr;
  cudaStream_t stream = nullptr;
};

inline NcclTestComms& comms() {
  static NcclTestComms c = [] {
    NcclTestComms made;
    cclzUniqueId id{};
    if (worldRank() == 0 && cclzGetUniqueId(&id) != cclzSuccess) {
      std::fprintf(stderr, "cclzGetUniqueId: %s\n", cclzGetLastError(nullptr));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
    config.asyncCalls = asyncCalls() ? 1 : 0;
    config.adaptive = 0;  // every call through its codec (NcclAdaptive tests the other way)
    if (cclzCommInitRankConfig(&made.device, worldSize(), id, worldRank(), &config) !=
        cclzSuccess) {
      std::fprintf(stderr, "cclzCommInitRankConfig: %s\n", cclzGetLastError(nullptr));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm world = MPI_COMM_WORLD;
    cclzCommConfig_t hostConfig = CCLZ_COMM_CONFIG_INITIALIZER;
    hostConfig.adaptive = 0;
    if (cclzCommInitFromMpiConfig(&made.host, &world, &hostConfig) != cclzSuccess)
      MPI_Abort(MPI_COMM_WORLD, 1);
    cudaStreamCreateWithFlags(&made.stream, cudaStreamNonBlocking);
    return made;
  }();
  return c;
}

// A device communicator of the test's own over every rank, made with `config` (a unique id
// from rank 0, broadcast over MPI; collective). NULL, with a test failure, where it cannot be
// made. The environment the library reads at creation is the caller's to set around it.
inline cclzComm_t makeDeviceComm(const cclzCommConfig_t& config) {
  const int n = worldSize(), me = worldRank();
  cclzUniqueId id{};
  if (me == 0) {
    EXPECT_EQ(cclzGetUniqueId(&id), cclzSuccess);
  }
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  cclzComm_t comm = nullptr;
  EXPECT_EQ(cclzCommInitRankConfig(&comm, n, id, me, &config), cclzSuccess)
      << cclzGetLastError(nullptr);
  return comm;
}

// A device communicator of the test's own, created with CCLZ_CHECK_CALLS=`check` (NULL: the
// default, deferred): for the tests whose errors abort the communicator they use.
inline cclzComm_t makeCheckedComm(const char* check) {
  if (check) setenv("CCLZ_CHECK_CALLS", check, 1);  // read when the communicator is made
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  config.asyncCalls = asyncCalls() ? 1 : 0;
  config.adaptive = 0;
  cclzComm_t comm = makeDeviceComm(config);
  unsetenv("CCLZ_CHECK_CALLS");
  return comm;
}

// Waits up to 60 s for the communicator's asynchronous error; returns it.
inline cclzResult_t awaitAsyncError(cclzComm_t comm) {
  cclzResult_t async = cclzSuccess;
  for (int i = 0; i < 6000 && async == cclzSuccess; ++i) {
    EXPECT_EQ(cclzCommGetAsyncError(comm, &async), cclzSuccess);
    if (async == cclzSuccess) usleep(10000);
  }
  return async;
}

// `stream` waits for every call queued on the device communicator (a no-op without
// asyncCalls), then the host waits for the stream: the calls' outputs are then readable.
inline void waitForCalls(cudaStream_t stream) {
  EXPECT_EQ(cclzCommStreamWait(comms().device, reinterpret_cast<cclzStream_t>(stream)), cclzSuccess)
      << cclzGetLastError(comms().device);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
}

// MPI up and this rank's GPU chosen, or kSkipReturnCode (MPI finalized) when a rank would have
// no GPU of its own. Ranks that are each an emulated node of their own (NCCL_HOSTID set, as
// bench/python/node_per_rank.sh does) may share GPUs: NCCL joins them by its socket transport.
// Sets CCLZ_PIECE_BYTES for the communicators the tests create.
inline int startNcclTests(int* argc, char** argv, const std::string& pieceBytes) {
  MPI_Init(argc, &argv);
  int devices = 0;
  const bool ranksMayShareGpus = std::getenv("NCCL_HOSTID") != nullptr;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0 ||
      (devices < worldSize() && !ranksMayShareGpus)) {
    if (worldRank() == 0)
      std::printf("%d CUDA devices for %d ranks: the NCCL tests are skipped\n", devices,
                  worldSize());
    MPI_Finalize();
    return kSkipReturnCode;
  }
  cudaSetDevice(worldRank() % devices);
  setenv("CCLZ_PIECE_BYTES", pieceBytes.c_str(), 1);
  ::testing::InitGoogleTest(argc, argv);
  if (worldRank() != 0) GTEST_FLAG_SET(brief, true);
  return 0;
}

// Runs the tests, destroys the communicators, finalizes MPI: 0 when every rank passed.
inline int finishNcclTests() {
  const bool passed = allRanks(RUN_ALL_TESTS() == 0);
  cclzCommDestroy(comms().device);
  cclzCommDestroy(comms().host);
  MPI_Finalize();
  return passed ? 0 : 1;
}

}  // namespace cclz::test
