// A device communicator with asyncCalls = 1 over NCCL (labels gpu;nccl;async; one process per
// GPU under mpirun; docs/collectives.md, "Calls that return at once"):
// - calls return while the caller's stream is still blocked, and after cclzCommStreamWait their
//   outputs equal the host path's byte for byte;
// - cclzCommStreamWait on a stream no call used orders that stream after the calls;
// - many calls, one wait;
// - capture is refused, by the calls and by cclzCommStreamWait.
// The stream is blocked by a kernel that spins on a host-mapped flag the test sets only after
// the calls returned; the kernel gives up after a timeout, so a call that waits for the stream
// fails the test (the flag was never seen) instead of hanging it. The suite also runs with
// CUDA_DEVICE_MAX_CONNECTIONS=1 (every stream on one hardware queue, where a stream wait on a
// completion word written by later work deadlocks: docs/collectives.md, "Calls that return at
// once"); ctest leaves the blocking test out there, scripts/dev/device.sh ncclsolo runs it (the
// call check launches no GPU work, so nothing of the call waits behind the blocking kernel but
// the proxy's queued work).
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

std::vector<uint8_t> hostAllReduce(const std::vector<uint8_t>& in, uint64_t count,
                                   const cclzCodecConfig_t* codec) {
  std::vector<uint8_t> out(in.size());
  EXPECT_EQ(cclzAllReduce(in.data(), out.data(), count, cclzBfloat16, cclzSum, comms().host, codec,
                          nullptr),
            cclzSuccess)
      << cclzGetLastError(comms().host);
  return out;
}

std::vector<uint8_t> hostAllGather(const std::vector<uint8_t>& in, uint64_t count,
                                   const cclzCodecConfig_t* codec) {
  std::vector<uint8_t> out(in.size() * worldSize());
  EXPECT_EQ(cclzAllGather(in.data(), out.data(), count, cclzBfloat16, comms().host, codec, nullptr),
            cclzSuccess)
      << cclzGetLastError(comms().host);
  return out;
}

void expectNoAsyncError() {
  cclzResult_t async = cclzInternalError;
  EXPECT_EQ(cclzCommGetAsyncError(comms().device, &async), cclzSuccess);
  EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(comms().device);
}

cclzCodecConfig_t losslessConfig() {
  cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
  c.codec = cclzCodecLossless;
  return c;
}

// A lossless all-reduce and a fixed-size all-gather (codec none) behind it, both called while
// the stream is blocked; several pieces (the test's piece size is small).
TEST(NcclAsync, ReturnsWhileTheStreamIsBlockedAndMatchesTheHost) {
  const int n = worldSize(), me = worldRank();
  const uint64_t count = 300007;
  const cclzCodecConfig_t lossless = losslessConfig();
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
  // The first calls of a size grow the engine's memory on the proxy (cudaFree and cudaMallocHost
  // wait for the whole device, the blocked stream included): warm up before blocking the stream,
  // so that the proxy does not sit in such a wait while the test measures.
  ASSERT_NO_FATAL_FAILURE(callBoth());
  waitForCalls(comms().stream);
  ASSERT_EQ(cudaMemset(recv, 0, in.size()), cudaSuccess);
  ASSERT_EQ(cudaMemset(gathered, 0, in.size() * n), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  spinUntil<<<1, 1, 0, comms().stream>>>(flagOnDevice, 20ull * 1000 * 1000 * 1000, saw);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(callBoth());
  // Both calls returned: only now is the kernel released. Had a call waited for the stream, the
  // kernel would have timed out first and `saw` would be 0. (cclzCommStreamWait must come after
  // the release: the proxy's lossless call waits on the host for frame sizes, which the GPU
  // computes only once the stream has passed the kernel.)
  EXPECT_EQ(cudaStreamQuery(comms().stream), cudaErrorNotReady) << "the stream was not blocked";
  __atomic_store_n(flag, 1u, __ATOMIC_SEQ_CST);
  waitForCalls(comms().stream);
  EXPECT_EQ(download(saw, sizeof(unsigned))[0], 1u)
      << "rank " << me << ": the calls returned only after the blocking kernel timed out";
  expectNoAsyncError();

  EXPECT_EQ(download(recv, in.size()), hostAllReduce(in, count, &lossless)) << "rank " << me;
  EXPECT_EQ(download(gathered, in.size() * n), hostAllGather(in, count, nullptr)) << "rank " << me;

  cudaFree(send);
  cudaFree(recv);
  cudaFree(gathered);
  cudaFree(saw);
  cudaFreeHost(flag);
}

// The calls are made on one stream and waited for on another, which no call used: that stream
// alone is synchronized before the outputs are read (cudaMemcpyAsync on it).
TEST(NcclAsync, StreamWaitOrdersAnotherStream) {
  const int n = worldSize(), me = worldRank();
  const uint64_t count = 100003;
  const cclzCodecConfig_t lossless = losslessConfig();
  const std::vector<uint8_t> in =
      makeData(DataKind::kGauss1, cclzBfloat16, count, 0, mixSeed(13, me, 0));
  void* send = deviceCopy<void>(in);
  void* gathered = nullptr;
  ASSERT_EQ(cudaMalloc(&gathered, in.size() * n), cudaSuccess);
  ASSERT_EQ(cudaMemset(gathered, 0, in.size() * n), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cclzAllGather(send, gathered, count, cclzBfloat16, comms().device, &lossless,
                          reinterpret_cast<cclzStream_t>(comms().stream)),
            cclzSuccess)
      << cclzGetLastError(comms().device);
  ASSERT_EQ(cclzCommStreamWait(comms().device, reinterpret_cast<cclzStream_t>(other)), cclzSuccess)
      << cclzGetLastError(comms().device);
  std::vector<uint8_t> out(in.size() * n);
  ASSERT_EQ(cudaMemcpyAsync(out.data(), gathered, out.size(), cudaMemcpyDeviceToHost, other),
            cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(other), cudaSuccess);
  EXPECT_EQ(out, hostAllGather(in, count, &lossless)) << "rank " << me;
  expectNoAsyncError();
  cudaStreamDestroy(other);
  cudaFree(send);
  cudaFree(gathered);
}

// Many calls queued back to back into separate outputs, then one wait covers them all.
TEST(NcclAsync, OneWaitCoversManyCalls) {
  const int n = worldSize(), me = worldRank();
  const uint64_t count = 20011;
  const int calls = 16;
  const cclzCodecConfig_t lossless = losslessConfig();
  std::vector<std::vector<uint8_t>> ins;
  std::vector<void*> sends, outs;
  for (int i = 0; i < calls; ++i) {
    ins.push_back(makeData(DataKind::kGauss1, cclzBfloat16, count, 0, mixSeed(17, me, i)));
    sends.push_back(deviceCopy<void>(ins.back()));
    void* out = nullptr;
    ASSERT_EQ(cudaMalloc(&out, ins.back().size() * n), cudaSuccess);
    outs.push_back(out);
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  for (int i = 0; i < calls; ++i) {
    // Alternate the codecs: variable-size (lossless) and fixed-size (none) calls share the queue.
    ASSERT_EQ(
        cclzAllGather(sends[i], outs[i], count, cclzBfloat16, comms().device,
                      i % 2 ? nullptr : &lossless, reinterpret_cast<cclzStream_t>(comms().stream)),
        cclzSuccess)
        << "call " << i << ": " << cclzGetLastError(comms().device);
  }
  waitForCalls(comms().stream);
  expectNoAsyncError();
  for (int i = 0; i < calls; ++i) {
    EXPECT_EQ(download(outs[i], ins[i].size() * n),
              hostAllGather(ins[i], count, i % 2 ? nullptr : &lossless))
        << "rank " << me << ", call " << i;
    cudaFree(sends[i]);
    cudaFree(outs[i]);
  }
}

// A call made while the stream is captured is refused on that rank and its peers hear of it
// (rejected arguments), rather than capturing only the call's start event. cclzCommStreamWait on
// a capturing stream is refused too (a graph cannot wait for the proxy).
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
    ASSERT_EQ(cudaStreamBeginCapture(capturing, cudaStreamCaptureModeRelaxed), cudaSuccess);
    EXPECT_EQ(cclzCommStreamWait(comms().device, reinterpret_cast<cclzStream_t>(capturing)),
              cclzInvalidUsage);
    graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(capturing, &graph), cudaSuccess);
    if (graph) cudaGraphDestroy(graph);
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
  cclz::test::asyncCalls() = true;
  if (const int skip = cclz::test::startNcclTests(&argc, argv, "64K")) return skip;
  return cclz::test::finishNcclTests();
}
