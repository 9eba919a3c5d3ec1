// The collectives over NCCL, one process per GPU under mpirun (scripts/device.sh, stage coll):
// every case of coll_cases.h on device buffers through a device communicator, checked against the
// reference, and its output compared byte for byte with the same case run through the host path
// (the CPU reference codecs over MPI) in the same process: the device pipeline must produce the
// very bytes the host one does. Also: error feedback on the device against the host, a mismatch
// failing every rank, no asynchronous error left behind. With --async-calls, all of it on a
// device communicator with asyncCalls = 1. Ranks use GPU rank % deviceCount; the
// NCCL unique id is broadcast over MPI.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "cclz/cclz.h"
#include "adaptive_ranks.h"
#include "coll_cases.h"
#include "coll_runner.h"
#include "nccl_main.h"
#include "support/data.h"

namespace cclz::test {
namespace {

// A device buffer holding bytes, or receiving them.
struct DeviceBytes {
  explicit DeviceBytes(size_t bytes, const uint8_t* init = nullptr, uint8_t fill = 0xA5)
      : size(bytes) {
    EXPECT_EQ(cudaMalloc(&ptr, bytes ? bytes : 1), cudaSuccess);
    if (init && bytes)
      EXPECT_EQ(cudaMemcpy(ptr, init, bytes, cudaMemcpyHostToDevice), cudaSuccess);
    else
      EXPECT_EQ(cudaMemset(ptr, fill, bytes ? bytes : 1), cudaSuccess);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~DeviceBytes() { cudaFree(ptr); }
  // With asyncCalls the calls may not be queued yet: the legacy stream waits for them first.
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> out(size);
    waitForCalls(nullptr);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (size) {
      EXPECT_EQ(cudaMemcpy(out.data(), ptr, size, cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return out;
  }
  void* ptr = nullptr;
  size_t size;
};

class NcclCollective : public ::testing::TestWithParam<CollCase> {};

TEST_P(NcclCollective, MatchesReferenceAndHostPath) {
  const CollCase& c = GetParam();
  const int n = worldSize(), me = worldRank();
  const size_t es = elementSize(c.dtype);
  const std::vector<uint8_t> in = makeInput(c, n, me);
  DeviceBytes send(in.size(), in.data()), recv(recvElems(c, n) * es);
  const cclzResult_t r = callCase(comms().device, c, n, me, send.ptr, recv.ptr,
                                  reinterpret_cast<cclzStream_t>(comms().stream));
  ASSERT_EQ(r, cclzSuccess) << "rank " << me << ": " << cclzGetLastError(comms().device);
  waitForCalls(comms().stream);
  cclzResult_t async = cclzInternalError;
  EXPECT_EQ(cclzCommGetAsyncError(comms().device, &async), cclzSuccess);
  EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(comms().device);
  const std::vector<uint8_t> out = recv.download();
  EXPECT_EQ(checkOutput(c, n, me, out, nullptr, networkReduces(c)), "") << "rank " << me;

  std::vector<uint8_t> hostOut;
  ASSERT_EQ(runCase(comms().host, c, n, me, &hostOut), cclzSuccess)
      << cclzGetLastError(comms().host);
  if (networkReduces(c)) return;  // NCCL's own reduction: checked above within its rounding
  EXPECT_EQ(firstMismatch(out.data(), hostOut.data(), out.size()), SIZE_MAX)
      << "rank " << me << ": the device path differs from the host path";
}

INSTANTIATE_TEST_SUITE_P(Cases, NcclCollective, ::testing::ValuesIn(allCases()),
                         [](const auto& info) { return info.param.name(); });

// Larger messages, several pieces of the default size, every codec: device equals host.
class NcclLarge : public ::testing::TestWithParam<CollCase> {};

TEST_P(NcclLarge, DeviceEqualsHost) {
  const CollCase& c = GetParam();
  const int n = worldSize(), me = worldRank();
  const std::vector<uint8_t> in = makeInput(c, n, me);
  DeviceBytes send(in.size(), in.data()), recv(recvElems(c, n) * elementSize(c.dtype));
  ASSERT_EQ(callCase(comms().device, c, n, me, send.ptr, recv.ptr,
                     reinterpret_cast<cclzStream_t>(comms().stream)),
            cclzSuccess)
      << cclzGetLastError(comms().device);
  const std::vector<uint8_t> out = recv.download();
  std::vector<uint8_t> hostOut;
  ASSERT_EQ(runCase(comms().host, c, n, me, &hostOut), cclzSuccess);
  if (!networkReduces(c)) {
    EXPECT_EQ(firstMismatch(out.data(), hostOut.data(), out.size()), SIZE_MAX) << "rank " << me;
  }
  EXPECT_EQ(checkOutput(c, n, me, out, nullptr, networkReduces(c)), "") << "rank " << me;
}

std::vector<CollCase> largeCases() {
  std::vector<CollCase> cases;
  for (Coll op : {Coll::AllGather, Coll::ReduceScatter, Coll::AllReduce, Coll::AllToAll})
    for (const CodecChoice& codec : codecChoices())
      cases.push_back({op, cclzBfloat16, codec, (uint64_t{3} << 20) + 4099, cclzSum});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Cases, NcclLarge, ::testing::ValuesIn(largeCases()),
                         [](const auto& info) { return info.param.name(); });

// Error feedback on the device: the same frames, outputs and residuals as on the host, with fp32
// and bf16 residuals (the shards at odd offsets take the engine's aligned copy of the residual).
TEST(NcclFeedback, DeviceEqualsHost) {
  const int me = worldRank();
  const uint64_t count = 100003;
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = cclzCodecQgrad;
  for (cclzDataType_t rdtype : {cclzFloat32, cclzBfloat16}) {
    SCOPED_TRACE(std::string("residual ") + dtypeLabel(rdtype));
    const size_t rbytes = count * elementSize(rdtype);
    cclzFeedback_t onDevice = nullptr, onHost = nullptr;
    ASSERT_EQ(cclzFeedbackCreateWithDtype(&onDevice, count, cclzMemoryDevice, rdtype),
              cclzSuccess);
    ASSERT_EQ(cclzFeedbackCreateWithDtype(&onHost, count, cclzMemoryHost, rdtype), cclzSuccess);
    void *dres = nullptr, *hres = nullptr;  // read through, not asked for again
    cclzFeedbackGetResidual(onDevice, &dres, nullptr);
    cclzFeedbackGetResidual(onHost, &hres, nullptr);
    for (int step = 0; step < 3; ++step) {
      const std::vector<uint8_t> g =
          makeData(DataKind::kGauss1, cclzFloat32, count, 0, mixSeed(5, me, step));
      DeviceBytes send(g.size(), g.data()), recv(g.size());
      std::vector<uint8_t> hostOut(g.size());
      ASSERT_EQ(cclzAllReduceFeedback(send.ptr, recv.ptr, count, cclzFloat32, cclzAvg,
                                      comms().device, &config, onDevice,
                                      reinterpret_cast<cclzStream_t>(comms().stream)),
                cclzSuccess)
          << cclzGetLastError(comms().device);
      ASSERT_EQ(cclzAllReduceFeedback(g.data(), hostOut.data(), count, cclzFloat32, cclzAvg,
                                      comms().host, &config, onHost, nullptr),
                cclzSuccess)
          << cclzGetLastError(comms().host);
      EXPECT_EQ(recv.download(), hostOut) << "step " << step;
      std::vector<uint8_t> deviceResidual(rbytes);
      ASSERT_EQ(cudaMemcpy(deviceResidual.data(), dres, rbytes, cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(firstMismatch(deviceResidual.data(), hres, rbytes), SIZE_MAX) << "step " << step;
    }
    cclzFeedbackDestroy(onDevice);
    cclzFeedbackDestroy(onHost);
  }
}

cclzResult_t allGather(cclzComm_t comm, const void* send, void* recv, uint64_t count,
                       const cclzCodecConfig_t* codec) {
  return cclzAllGather(send, recv, count, cclzBfloat16, comm, codec,
                       reinterpret_cast<cclzStream_t>(comms().stream));
}

// Checked now (every call with CCLZ_CHECK_CALLS=1, and the first call of each op under the
// default): a rank passing another codec, or host memory, makes the call fail on every rank.
TEST(NcclErrors, MismatchFailsOnEveryRank) {
  if (worldSize() < 2) GTEST_SKIP() << "a mismatch needs two ranks (a rank alone checks no call)";
  const int n = worldSize(), me = worldRank();
  for (const char* check : {"1", static_cast<const char*>(nullptr)}) {
    SCOPED_TRACE(check ? check : "default");
    cclzComm_t comm = makeCheckedComm(check);
    DeviceBytes send(2000 * n), recv(2000 * n);
    cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
    if (check) {  // a call that agrees first: under 1 the second call is checked now as well
      ASSERT_EQ(allGather(comm, send.ptr, recv.ptr, 1000, &config), cclzSuccess)
          << cclzGetLastError(comm);
    }
    if (me == n - 1) config.codec = cclzCodecNone;
    EXPECT_EQ(allGather(comm, send.ptr, recv.ptr, 1000, &config), cclzInvalidUsage);
    EXPECT_NE(std::string(cclzGetLastError(comm)).find("codec differs"), std::string::npos)
        << cclzGetLastError(comm);
    // Host memory on a device communicator is rejected on that rank, and the others hear of it.
    std::vector<uint8_t> hostBuffer(2000);
    const cclzResult_t r =
        cclzReduceScatter(me == 0 ? static_cast<void*>(hostBuffer.data()) : send.ptr, recv.ptr,
                          1000 / n, cclzBfloat16, cclzSum, comm, nullptr,
                          reinterpret_cast<cclzStream_t>(comms().stream));
    EXPECT_EQ(r, me == 0 ? cclzInvalidArgument : cclzInvalidUsage) << cclzGetLastError(comm);
    EXPECT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
    EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess);
  }
}

// Deferred checks (the default past the first call of an op): the call that disagrees returns
// at once, its check fails on every rank a little later as the communicator's asynchronous
// error, the transport is aborted so that the transfers the mismatch left waiting end (the
// stream drains: no hang), and every later call fails.
struct DeferredMismatch {
  std::string op = "allgather";  // or "reducescatter", "allreduce"
  // "count" (one rank passes one element fewer), "rejected" (one rank passes host memory and
  // fails at once) or "codec" (one rank sends plain data where the others use `codec`).
  std::string kind = "count";
  cclzCodecType_t codec = cclzCodecNone;  // the calls that agree
  const char* expected = "count differs";
  int laterCalls = 0;  // agreed calls right after: exchanges and transfers queued at the failure
};

void expectDeferredMismatch(const DeferredMismatch& m) {
  if (asyncCalls()) GTEST_SKIP() << "an asyncCalls communicator checks every call now";
  if (worldSize() < 2) GTEST_SKIP() << "a mismatch needs two ranks (a rank alone checks no call)";
  const int n = worldSize(), me = worldRank();
  cclzComm_t comm = makeCheckedComm(nullptr);
  DeviceBytes send(2 * 1024 * 1024), recv(2 * 1024 * 1024 * n);
  cclzCodecConfig_t none = CCLZ_CODEC_CONFIG_INITIALIZER;
  none.codec = cclzCodecNone;
  cclzCodecConfig_t agreed = CCLZ_CODEC_CONFIG_INITIALIZER;
  agreed.codec = m.codec;
  // 2 MiB of bf16 in the send buffer for every op.
  const uint64_t count = m.op == "reducescatter" ? (1 << 20) / n : 1 << 20;
  const auto stream = reinterpret_cast<cclzStream_t>(comms().stream);
  auto call = [&](const void* in, uint64_t c, const cclzCodecConfig_t* codec) {
    if (m.op == "reducescatter")
      return cclzReduceScatter(in, recv.ptr, c, cclzBfloat16, cclzSum, comm, codec, stream);
    if (m.op == "allreduce")
      return cclzAllReduce(in, recv.ptr, c, cclzBfloat16, cclzSum, comm, codec, stream);
    return cclzAllGather(in, recv.ptr, c, cclzBfloat16, comm, codec, stream);
  };
  ASSERT_EQ(call(send.ptr, count, &agreed), cclzSuccess) << cclzGetLastError(comm);
  const bool odd = me == n - 1;
  std::vector<uint8_t> hostBuffer(2 * 1024 * 1024);
  cclzResult_t r = cclzSuccess;
  if (m.kind == "count")
    r = call(send.ptr, odd ? count - 1 : count, &agreed);
  else if (m.kind == "codec")
    r = call(send.ptr, count, odd ? &none : &agreed);
  else
    r = call(odd ? static_cast<void*>(hostBuffer.data()) : send.ptr, count, &agreed);
  // The rank that rejected its arguments fails at once. Another call may meet the failure
  // before it returns and then fails with it: a lossless call's wait for frame sizes gives up,
  // and a call that queues more NCCL work than NCCL's queue holds blocks until the abort (the
  // tests' small pieces make the qgrad all-reduce queue 768 operations, 2x H200;
  // docs/collectives.md, "Checking the call").
  if (m.kind == "rejected" && odd) {
    EXPECT_EQ(r, cclzInvalidArgument) << cclzGetLastError(comm);
  } else {
    EXPECT_TRUE(r == cclzSuccess || r == cclzInvalidUsage) << r << ": " << cclzGetLastError(comm);
  }
  for (int i = 0; i < m.laterCalls; ++i) {
    const cclzResult_t later = call(send.ptr, count, &agreed);
    EXPECT_TRUE(later == cclzSuccess || later == cclzInvalidUsage)
        << later << ": " << cclzGetLastError(comm);
  }
  EXPECT_EQ(awaitAsyncError(comm), cclzInvalidUsage);
  std::string message = cclzGetLastError(comm);
  EXPECT_NE(message.find(m.expected), std::string::npos) << message;
  cudaStreamSynchronize(comms().stream);  // returns: the aborted transfers have ended
  cudaGetLastError();
  EXPECT_EQ(call(send.ptr, count, &agreed), cclzInvalidUsage);
  message = cclzGetLastError(comm);
  EXPECT_NE(message.find("deferred check"), std::string::npos) << message;
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess) << cclzGetLastError(nullptr);
}

TEST(NcclDeferredCheck, CountOnPlainData) { expectDeferredMismatch({}); }
TEST(NcclDeferredCheck, CountOnPlainDataThenMoreCalls) {
  expectDeferredMismatch({.laterCalls = 8});
}
// These three leave a transfer that no peer ever matches (a lossless call's sizes against plain
// data, a rank that sent nothing): only the abort of the NCCL communicator ends it
// (docs/collectives.md, "Checking the call").
TEST(NcclDeferredCheck, CountOnLosslessFrames) {
  expectDeferredMismatch({.codec = cclzCodecLossless});
}
TEST(NcclDeferredCheck, RejectedArguments) {
  expectDeferredMismatch({.kind = "rejected", .expected = "rejected its arguments"});
}
TEST(NcclDeferredCheck, PlainDataAgainstLosslessFrames) {
  expectDeferredMismatch(
      {.kind = "codec", .codec = cclzCodecLossless, .expected = "codec differs"});
}
// The other ops: fp8 frames through the reduce-scatter's all-to-all, and the all-reduce's two
// phases (qgrad).
TEST(NcclDeferredCheck, CountOnFp8ReduceScatter) {
  expectDeferredMismatch({.op = "reducescatter", .codec = cclzCodecFp8, .laterCalls = 2});
}
TEST(NcclDeferredCheck, PlainDataAgainstQgradAllReduce) {
  expectDeferredMismatch(
      {.op = "allreduce", .kind = "codec", .codec = cclzCodecQgrad, .expected = "codec differs"});
}

// An adaptive device communicator of the test's own (NULL, with a failure, if it cannot be made).
cclzComm_t makeAdaptiveComm() {
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  config.adaptive = 1;
  return makeDeviceComm(config);
}

// Adaptive calls on a device communicator of their own (cclzCommConfig_t.adaptive): each kind's
// first calls alternate the codec and plain data, every output is right on either path, every
// rank reports the same path for each call, and the kinds are settled after their trials.
TEST(NcclAdaptive, RanksSettleAlikeAndEveryCallIsRight) {
  if (asyncCalls()) GTEST_SKIP() << "an asyncCalls communicator runs every call compressed";
  const int n = worldSize(), me = worldRank();
  cclzComm_t comm = makeAdaptiveComm();
  ASSERT_NE(comm, nullptr);
  const auto stream = reinterpret_cast<cclzStream_t>(comms().stream);
  const int trials = kSmallKindTrialCalls, calls = trials + 2;
  for (const CollCase& c : adaptiveCases()) {
    SCOPED_TRACE(c.name());
    if (c.op == Coll::SendRecv && n == 1) continue;  // a rank alone has no peer to send to
    const std::vector<uint8_t> in = makeInput(c, n, me);
    for (int i = 0; i < calls; ++i) {
      DeviceBytes send(in.size(), in.data()), recv(recvElems(c, n) * elementSize(c.dtype));
      ASSERT_EQ(callCase(comm, c, n, me, send.ptr, recv.ptr, stream), cclzSuccess)
          << cclzGetLastError(comm);
      cclzPath_t path = cclzPathCompressed;
      int decided = -1;
      ASSERT_EQ(cclzCommGetLastPath(comm, &path, &decided), cclzSuccess);
      EXPECT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
      const std::vector<uint8_t> out = recv.download();
      // Plain all-reduces are NCCL's own sums, rounded in its order.
      const bool network = path == cclzPathPlain && c.op == Coll::AllReduce;
      EXPECT_EQ(checkOutput(c, n, me, out, nullptr, network), "") << "call " << i;
      expectRanksAgree(c, i, trials, path, decided, out);
    }
  }
  cclzResult_t async = cclzInternalError;
  EXPECT_EQ(cclzCommGetAsyncError(comm, &async), cclzSuccess);
  EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(comm);
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess);
}

// A call of one of its own graph's, captured (cudaStreamBeginCapture) and replayed.
struct CapturedCall {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~CapturedCall() { release(); }
  void release() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr, graph = nullptr;
  }
};

// A call captured into a CUDA graph is no trial: before its kind is settled it runs compressed
// and the trials go on as if it had not been made; once settled it takes the settled path (its
// tuner asks the driver nothing then). Each graph's replay gives a right output.
TEST(NcclAdaptive, CapturedCallsLeaveTheTrialsAndTakeTheSettledPath) {
  if (asyncCalls()) GTEST_SKIP() << "an asyncCalls communicator refuses capture";
  const int n = worldSize(), me = worldRank();
  cclzComm_t comm = makeAdaptiveComm();
  ASSERT_NE(comm, nullptr);
  cudaStream_t cs = comms().stream;
  const auto stream = reinterpret_cast<cclzStream_t>(cs);
  const CollCase c = adaptiveCases()[1];  // an fp8 all-reduce
  ASSERT_EQ(c.op, Coll::AllReduce);
  const std::vector<uint8_t> in = makeInput(c, n, me);
  DeviceBytes send(in.size(), in.data()), recv(recvElems(c, n) * elementSize(c.dtype));
  auto capture = [&](CapturedCall& g, cclzPath_t* path, int* decided) {
    // Relaxed: the call may grow its scratch (cudaMalloc) while the stream captures.
    ASSERT_EQ(cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed), cudaSuccess);
    const cclzResult_t r = callCase(comm, c, n, me, send.ptr, recv.ptr, stream);
    ASSERT_EQ(cudaStreamEndCapture(cs, &g.graph), cudaSuccess);
    ASSERT_EQ(r, cclzSuccess) << cclzGetLastError(comm);
    ASSERT_EQ(cudaGraphInstantiate(&g.exec, g.graph, 0), cudaSuccess);
    ASSERT_EQ(cclzCommGetLastPath(comm, path, decided), cclzSuccess);
  };
  auto replay = [&](const CapturedCall& g, cclzPath_t path, const char* which) {
    ASSERT_EQ(cudaMemset(recv.ptr, 0xA5, recv.size), cudaSuccess);
    ASSERT_EQ(cudaGraphLaunch(g.exec, cs), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(cs), cudaSuccess);
    EXPECT_EQ(checkOutput(c, n, me, recv.download(), nullptr, path == cclzPathPlain), "") << which;
  };
  const int trials = kSmallKindTrialCalls;
  CapturedCall early, late;
  cclzPath_t earlyPath = cclzPathPlain, latePath = cclzPathCompressed, path;
  int earlyDecided = -1, lateDecided = -1, decided = -1;
  for (int i = 0; i <= trials; ++i) {
    ASSERT_EQ(callCase(comm, c, n, me, send.ptr, recv.ptr, stream), cclzSuccess)
        << cclzGetLastError(comm);
    ASSERT_EQ(cclzCommGetLastPath(comm, &path, &decided), cclzSuccess);
    ASSERT_EQ(cudaStreamSynchronize(cs), cudaSuccess);
    const bool network = path == cclzPathPlain;  // plain all-reduces are NCCL's own sums
    EXPECT_EQ(checkOutput(c, n, me, recv.download(), nullptr, network), "") << "call " << i;
    expectRanksAgree(c, i, trials, path, decided, recv.download());
    if (i == 0) capture(early, &earlyPath, &earlyDecided);  // after the first trial's scratch
  }
  EXPECT_EQ(earlyPath, cclzPathCompressed);
  EXPECT_EQ(earlyDecided, 0);
  capture(late, &latePath, &lateDecided);
  EXPECT_EQ(lateDecided, 1);
  EXPECT_EQ(latePath, path) << "the settled path";
  replay(early, earlyPath, "the call captured during the trials");
  replay(late, latePath, "the call captured once settled");
  cclzResult_t async = cclzInternalError;
  EXPECT_EQ(cclzCommGetAsyncError(comm, &async), cclzSuccess);
  EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(comm);
  // The graphs first: NCCL's destroy of the communicator waits until every graph that captured
  // one of its calls is gone (docs/collectives.md, "CUDA graphs").
  early.release();
  late.release();
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess);
}

// Calls with error feedback (qgrad int4, fp32, device state) on an adaptive communicator: the
// trials take both paths. A plain call adds the residual into the data and zeroes it; a
// compressed one keeps what it drops there. Either way the output plus every rank's residual
// after equals every rank's data plus residual before (to fp32 rounding in NCCL's order).
TEST(NcclAdaptive, FeedbackCallsKeepTheResidualOnBothPaths) {
  if (asyncCalls()) GTEST_SKIP() << "an asyncCalls communicator runs every call compressed";
  const int n = worldSize(), me = worldRank();
  cclzComm_t comm = makeAdaptiveComm();
  ASSERT_NE(comm, nullptr);
  const auto stream = reinterpret_cast<cclzStream_t>(comms().stream);
  cclzCodecConfig_t codec = CCLZ_CODEC_CONFIG_INITIALIZER;
  codec.codec = cclzCodecQgrad;
  codec.bits = 4;
  const int calls = kSmallKindTrialCalls + 3;  // the trials, then settled calls
  for (const bool scatter : {false, true}) {
    SCOPED_TRACE(scatter ? "reduce-scatter" : "all-reduce");
    const uint64_t recvCount = 1 << 16, sendCount = scatter ? recvCount * n : recvCount;
    const uint64_t outCount = scatter ? recvCount : sendCount;
    std::vector<float> in(sendCount);
    for (uint64_t i = 0; i < sendCount; ++i)
      in[i] = static_cast<float>(static_cast<int>((i * 37 + me * 11) % 101) - 50) / 64.0f;
    cclzFeedback_t fb = nullptr;
    ASSERT_EQ(cclzFeedbackCreate(&fb, sendCount, cclzMemoryDevice), cclzSuccess);
    float* residual = nullptr;  // read through, not asked for again: asking marks it written
    ASSERT_EQ(cclzFeedbackGetState(fb, &residual, nullptr, nullptr), cclzSuccess);
    DeviceBytes send(sendCount * 4, reinterpret_cast<const uint8_t*>(in.data()));
    DeviceBytes recv(outCount * 4);
    int plain = 0, compressed = 0;
    for (int i = 0; i < calls; ++i) {
      std::vector<float> before(sendCount), after(sendCount), out(outCount);
      ASSERT_EQ(cudaMemcpy(before.data(), residual, sendCount * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      const cclzResult_t r =
          scatter ? cclzReduceScatterFeedback(send.ptr, recv.ptr, recvCount, cclzFloat32, cclzSum,
                                              comm, &codec, fb, stream)
                  : cclzAllReduceFeedback(send.ptr, recv.ptr, sendCount, cclzFloat32, cclzSum,
                                          comm, &codec, fb, stream);
      ASSERT_EQ(r, cclzSuccess) << cclzGetLastError(comm);
      cclzPath_t path = cclzPathCompressed;
      int decided = -1;
      ASSERT_EQ(cclzCommGetLastPath(comm, &path, &decided), cclzSuccess);
      ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(after.data(), residual, sendCount * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(out.data(), recv.ptr, outCount * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
      (path == cclzPathPlain ? plain : compressed)++;
      if (path == cclzPathPlain) {
        EXPECT_EQ(after, std::vector<float>(sendCount, 0.0f)) << "call " << i;
      }
      std::vector<float> sent(sendCount), kept(sendCount);
      for (uint64_t k = 0; k < sendCount; ++k) sent[k] = in[k] + before[k];
      MPI_Allreduce(MPI_IN_PLACE, sent.data(), static_cast<int>(sendCount), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      MPI_Allreduce(after.data(), kept.data(), static_cast<int>(sendCount), MPI_FLOAT, MPI_SUM,
                    MPI_COMM_WORLD);
      const uint64_t first = scatter ? me * recvCount : 0;
      for (uint64_t k = 0; k < outCount; ++k)
        ASSERT_NEAR(out[k] + kept[first + k], sent[first + k], 1e-4f)
            << "call " << i << ", element " << k << ", path " << path;
    }
    EXPECT_GT(plain, 0);
    EXPECT_GT(compressed, 0);
    cclzFeedbackDestroy(fb);
  }
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess);
}

// Checked calls while the caller's thread waits for the whole device between them (cudaFree of
// a fresh allocation, cudaMemcpy on the legacy stream), each rank at its own uneven pace: 200
// plain all-reduces (never tried by the tuner, each checked deferred) with an adaptive qgrad
// all-reduce with error feedback every tenth call. The communicator's only NCCL work is its data,
// queued by this thread in call order, so a device-wide wait only ever waits for work whose
// peers' part is queued too (docs/collectives.md, "Checking the call"). Every plain sum checked.
TEST(NcclAdaptive, DeviceWideWaitsBetweenCheckedCallsDoNotHang) {
  if (asyncCalls()) GTEST_SKIP() << "the suite's own communicators are the asyncCalls ones";
  const int n = worldSize(), me = worldRank();
  cclzComm_t comm = makeAdaptiveComm();
  ASSERT_NE(comm, nullptr);
  const auto stream = reinterpret_cast<cclzStream_t>(comms().stream);
  constexpr uint64_t kCount = 4096;
  std::vector<float> in(kCount), host(kCount);
  for (uint64_t i = 0; i < kCount; ++i) in[i] = static_cast<float>((i + 3 * me) % 17);
  DeviceBytes send(kCount * 4, reinterpret_cast<const uint8_t*>(in.data())), recv(kCount * 4);
  DeviceBytes fbRecv(kCount * 4);
  cclzFeedback_t fb = nullptr;
  ASSERT_EQ(cclzFeedbackCreate(&fb, kCount, cclzMemoryDevice), cclzSuccess);
  cclzCodecConfig_t qgrad = CCLZ_CODEC_CONFIG_INITIALIZER;
  qgrad.codec = cclzCodecQgrad;
  qgrad.bits = 4;
  unsigned seed = 977u + 131u * static_cast<unsigned>(me);
  for (int i = 0; i < 200; ++i) {
    if (rand_r(&seed) % 3 == 0) usleep(rand_r(&seed) % 400);
    ASSERT_EQ(cclzAllReduce(send.ptr, recv.ptr, kCount, cclzFloat32, cclzSum, comm, nullptr,
                            stream),
              cclzSuccess)
        << cclzGetLastError(comm);
    if (i % 10 == 0) {
      ASSERT_EQ(cclzAllReduceFeedback(send.ptr, fbRecv.ptr, kCount, cclzFloat32, cclzSum, comm,
                                      &qgrad, fb, stream),
                cclzSuccess)
          << cclzGetLastError(comm);
    }
    void* scratch = nullptr;
    ASSERT_EQ(cudaMalloc(&scratch, 1 << 20), cudaSuccess);
    ASSERT_EQ(cudaFree(scratch), cudaSuccess);  // waits for the whole device
    if (i % 3 == 0) {
      ASSERT_EQ(cudaMemcpy(host.data(), recv.ptr, kCount * 4, cudaMemcpyDeviceToHost),
                cudaSuccess);
    }
  }
  ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host.data(), recv.ptr, kCount * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (uint64_t i = 0; i < kCount; ++i) {
    float sum = 0;
    for (int r = 0; r < n; ++r) sum += static_cast<float>((i + 3 * r) % 17);
    ASSERT_EQ(host[i], sum) << "element " << i;
  }
  cclzResult_t async = cclzInternalError;
  EXPECT_EQ(cclzCommGetAsyncError(comm, &async), cclzSuccess);
  EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(comm);
  cclzFeedbackDestroy(fb);
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess);
}

// CCLZ_TIMELINE=1 (collective/timeline.h) on a communicator of its own: an fp8 all-gather of
// several pieces prints one line per stage and slot, each span inside the call, encode, move and
// decode all present, and the call's end line last.
TEST(NcclTimeline, PrintsEveryStageInsideTheCall) {
  const int n = worldSize(), me = worldRank();
  cclzUniqueId id{};
  if (me == 0) {
    ASSERT_EQ(cclzGetUniqueId(&id), cclzSuccess);
  }
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  setenv("CCLZ_TIMELINE", "1", 1);  // read when the communicator's engine is made
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  config.adaptive = 0;
  cclzComm_t comm = nullptr;
  const cclzResult_t made = cclzCommInitRankConfig(&comm, n, id, me, &config);
  unsetenv("CCLZ_TIMELINE");
  ASSERT_EQ(made, cclzSuccess) << cclzGetLastError(nullptr);
  const CollCase c{Coll::AllGather, cclzBfloat16, codecNamed("fp8"), 20000, cclzSum};
  const std::vector<uint8_t> in = makeInput(c, n, me);
  DeviceBytes send(in.size(), in.data()), recv(recvElems(c, n) * 2);
  testing::internal::CaptureStderr();
  const cclzResult_t r = callCase(comm, c, n, me, send.ptr, recv.ptr,
                                  reinterpret_cast<cclzStream_t>(comms().stream));
  cudaStreamSynchronize(comms().stream);
  const std::string printed = testing::internal::GetCapturedStderr();
  ASSERT_EQ(r, cclzSuccess) << cclzGetLastError(comm);
  EXPECT_EQ(checkOutput(c, n, me, recv.download()), "");
  int stages[3] = {0, 0, 0};  // encode, move, decode
  double end = -1, latest = 0;
  std::istringstream lines(printed);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("cclz-timeline pid ", 0) != 0) continue;
    char stage[16] = {};
    int pid = 0, slot = 0;
    unsigned long long call = 0;
    double begin = 0, finish = 0;
    if (std::sscanf(line.c_str(), "cclz-timeline pid %d call %llu end %lf us", &pid, &call,
                    &end) == 3)
      continue;
    ASSERT_EQ(std::sscanf(line.c_str(), "cclz-timeline pid %d call %llu %15s slot %d %lf .. %lf",
                          &pid, &call, stage, &slot, &begin, &finish),
              6)
        << line;
    EXPECT_EQ(call, 1u) << line;
    EXPECT_TRUE(slot >= 0 && slot < 3) << line;
    EXPECT_LE(0.0, begin) << line;
    EXPECT_LE(begin, finish) << line;
    latest = std::max(latest, finish);
    const std::string name = stage;
    if (name == "encode")
      ++stages[0];
    else if (name == "move")
      ++stages[1];
    else if (name == "decode")
      ++stages[2];
    else
      ADD_FAILURE() << "unknown stage: " << line;
  }
  EXPECT_GT(stages[0], 1) << printed;  // several pieces
  EXPECT_GT(stages[1], 1) << printed;
  EXPECT_GT(stages[2], 1) << printed;
  EXPECT_GE(end, latest) << printed;
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess);
}

}  // namespace
}  // namespace cclz::test

// --async-calls: the same suite on a device communicator with asyncCalls = 1 (every output read
// after cclzCommStreamWait).
int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--async-calls") cclz::test::asyncCalls() = true;
  if (const int skip = cclz::test::startNcclTests(
          &argc, argv, std::to_string(cclz::test::kTestPieceBytes)))
    return skip;
  return cclz::test::finishNcclTests();
}
