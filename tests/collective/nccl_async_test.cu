// CCLZ_ASYNC=1 over NCCL (labels gpu;nccl; registered with the variable set, one process per GPU
// under mpirun): a lossless call returns while the caller's stream is still blocked, its output
// then equals the host path's byte for byte, and a fixed-size call queued behind it is right too.
// The stream is blocked by a kernel that spins on a host-mapped flag the test sets only after the
// call returned; the kernel gives up after a timeout, so a call that blocks the host fails the
// test (the flag was never seen) instead of hanging it.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "nccl_main.h"
#include "support/data.h"

namespace cclz::test {
namespace {

// Spins until *flag != 0 or about `timeoutNs` have passed; *sawFlag records which.
__global__ void spinUntil(const volatile unsigned* flag, unsigned long long timeoutNs,
                          unsigned* sawFlag) {
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    if (*flag) {
      *sawFlag = 1;
      return;
    }
    unsigned long long now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeoutNs) {
      *sawFlag = 0;
      return;
    }
  }
}

template <typename T>
T* deviceCopy(const std::vector<uint8_t>& bytes) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, bytes.size()), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  return static_cast<T*>(p);
}

std::vector<uint8_t> download(const void* p, size_t bytes) {
  std::vector<uint8_t> out(bytes);
  EXPECT_EQ(cudaMemcpy(out.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

// A lossless all-reduce and a qgrad-free fixed-size all-gather (codec none) behind it, both
// queued while the stream is blocked; several pieces (the test's piece size is small).
TEST(NcclAsync, ReturnsWhileTheStreamIsBlockedAndMatchesTheHost) {
  const int n = worldSize(), me = worldRank();
  const uint64_t count = 300007;
  cclzCodecConfig_t lossless = CCLZ_CODEC_CONFIG_INITIALIZER;
  lossless.codec = cclzCodecLossless;
  const std::vector<uint8_t> in =
      makeData(DataKind::kGauss1, cclzBfloat16, count, 0, mixSeed(11, me, 0));
  void* send = deviceCopy<void>(in);
  void* recv = nullptr;
  void* gathered = nullptr;
  ASSERT_EQ(cudaMalloc(&recv, in.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&gathered, in.size() * n), cudaSuccess);
  unsigned* flag = nullptr;
  unsigned* flagOnDevice = nullptr;
  unsigned* saw = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(unsigned), cudaHostAllocMapped),
            cudaSuccess);
  *flag = 0;
  ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&flagOnDevice), flag, 0),
            cudaSuccess);
  ASSERT_EQ(cudaMalloc(&saw, sizeof(unsigned)), cudaSuccess);
  ASSERT_EQ(cudaMemset(saw, 0, sizeof(unsigned)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  const auto stream = reinterpret_cast<cclzStream_t>(comms().stream);
  auto callBoth = [&] {
    ASSERT_EQ(cclzAllReduce(send, recv, count, cclzBfloat16, cclzSum, comms().device, &lossless,
                            stream),
              cclzSuccess)
        << cclzGetLastError(comms().device);
    ASSERT_EQ(cclzAllGather(send, gathered, count, cclzBfloat16, comms().device, nullptr, stream),
              cclzSuccess)
        << cclzGetLastError(comms().device);
  };
  // The first calls of a size grow the engine's memory on the caller's thread, which waits for
  // the device (docs/collectives.md): warm up before blocking the stream.
  ASSERT_NO_FATAL_FAILURE(callBoth());
  ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
  ASSERT_EQ(cudaMemset(recv, 0, in.size()), cudaSuccess);
  ASSERT_EQ(cudaMemset(gathered, 0, in.size() * n), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  spinUntil<<<1, 1, 0, comms().stream>>>(flagOnDevice, 20ull * 1000 * 1000 * 1000, saw);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(callBoth());
  // Both calls returned: only now is the kernel released. Had a call waited for the stream, the
  // kernel would have timed out first and `saw` would be 0.
  EXPECT_EQ(cudaStreamQuery(comms().stream), cudaErrorNotReady) << "the stream was not blocked";
  __atomic_store_n(flag, 1u, __ATOMIC_SEQ_CST);
  ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
  EXPECT_EQ(download(saw, sizeof(unsigned))[0], 1u)
      << "rank " << me << ": the call returned only after the blocking kernel timed out";
  cclzResult_t async = cclzInternalError;
  EXPECT_EQ(cclzCommGetAsyncError(comms().device, &async), cclzSuccess);
  EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(comms().device);

  std::vector<uint8_t> hostReduced(in.size()), hostGathered(in.size() * n);
  ASSERT_EQ(cclzAllReduce(in.data(), hostReduced.data(), count, cclzBfloat16, cclzSum,
                          comms().host, &lossless, nullptr),
            cclzSuccess);
  ASSERT_EQ(cclzAllGather(in.data(), hostGathered.data(), count, cclzBfloat16, comms().host,
                          nullptr, nullptr),
            cclzSuccess);
  EXPECT_EQ(download(recv, in.size()), hostReduced) << "rank " << me;
  EXPECT_EQ(download(gathered, in.size() * n), hostGathered) << "rank " << me;

  cudaFree(send);
  cudaFree(recv);
  cudaFree(gathered);
  cudaFree(saw);
  cudaFreeHost(flag);
}

// With the switch on, a call made while the stream is captured is refused on that rank and its
// peers hear of it (rejected arguments), rather than capturing only the wait for the proxy.
TEST(NcclAsync, RefusesCapture) {
  const int me = worldRank();
  cudaStream_t capturing = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&capturing, cudaStreamNonBlocking), cudaSuccess);
  std::vector<uint8_t> in = makeData(DataKind::kGauss1, cclzBfloat16, 1000, 0, mixSeed(3, me, 0));
  void* send = deviceCopy<void>(in);
  void* recv = nullptr;
  ASSERT_EQ(cudaMalloc(&recv, in.size() * worldSize()), cudaSuccess);
  cclzCodecConfig_t lossless = CCLZ_CODEC_CONFIG_INITIALIZER;
  lossless.codec = cclzCodecLossless;
  const cudaStream_t stream = me == 0 ? capturing : comms().stream;
  if (me == 0)
    ASSERT_EQ(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeRelaxed), cudaSuccess);
  const cclzResult_t r = cclzAllGather(send, recv, 1000, cclzBfloat16, comms().device, &lossless,
                                       reinterpret_cast<cclzStream_t>(stream));
  if (me == 0) {
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(capturing, &graph), cudaSuccess);
    if (graph) cudaGraphDestroy(graph);
    EXPECT_EQ(r, cclzInvalidUsage);
    EXPECT_NE(std::string(cclzGetLastError(comms().device)).find("CUDA graph"),
              std::string::npos)
        << cclzGetLastError(comms().device);
  } else {
    EXPECT_EQ(r, cclzInvalidUsage) << cclzGetLastError(comms().device);
  }
  cudaFree(send);
  cudaFree(recv);
  cudaStreamDestroy(capturing);
}

}  // namespace
}  // namespace cclz::test

int main(int argc, char** argv) {
  if (const int skip = cclz::test::startNcclTests(&argc, argv, "64K")) return skip;
  if (const char* async = std::getenv("CCLZ_ASYNC"); !async || std::string(async) != "1") {
    fprintf(stderr, "nccl_async_tests needs CCLZ_ASYNC=1 (ctest sets it)\n");
    MPI_Finalize();
    return 1;
  }
  return cclz::test::finishNcclTests();
}
