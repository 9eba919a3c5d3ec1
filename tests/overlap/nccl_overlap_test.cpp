// The overlapped GEMMs on a device communicator (docs/overlap.md, "The device path"), one process
// per GPU under mpirun (2 and 4 ranks, labels gpu;nccl):
//   - all-gather + GEMM: the gathered matrix bit for bit the host path's (plain: the all-gather;
//     fp8: every chunk's frame decoded), and the product bit for bit cuBLASLt's product of the
//     whole gathered matrix with the algorithm the path keeps; within bf16's rounding of the
//     host GEMM's;
//   - GEMM + reduce-scatter: each rank's rows bit for bit the partials of every rank (the same
//     GEMM, through their fp8 frames with a codec) summed in fp32 as they arrive, the rank's own
//     last (reduceOrder), sum and avg; across emulated nodes with fp8, the two-level sums
//     (two_level_reference.h);
//   - calls back to back on two streams, a shape whose fp8 chunks do not fill 16-byte words
//     refused on every rank, and a row count that differs on one rank past the first call (a
//     deferred check) an asynchronous error, not a hang.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "collective/mpi_world.h"
#include "collective/nccl_main.h"
#include "collective/reduce.h"
#include "collective/communicator.h"
#include "collective/node_layout.h"
#include "overlap/device_gemm.h"
#include "overlap/host_gemm.h"
#include "overlap/schedule.h"
#include "support/data.h"
#include "support/device_buffer.h"
#include "two_level_reference.h"

namespace cclz::test {
namespace {

// A guarded device buffer (support/device_buffer.h) holding `bytes`.
std::unique_ptr<GuardedDeviceBuffer> holding(const std::vector<uint8_t>& bytes) {
  auto b = std::make_unique<GuardedDeviceBuffer>(bytes.size());
  EXPECT_TRUE(b->ok());
  b->upload(bytes.data(), bytes.size());
  return b;
}

std::unique_ptr<GuardedDeviceBuffer> empty(size_t size) {
  auto b = std::make_unique<GuardedDeviceBuffer>(size);
  EXPECT_TRUE(b->ok());
  return b;
}

// The calls queued so far finished, with no frame rejected on the device.
void expectFinishedCleanly() {
  ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
  cclzResult_t async = cclzInternalError;
  EXPECT_EQ(cclzCommGetAsyncError(comms().device, &async), cclzSuccess);
  EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(comms().device);
}

cclzStream_t testStream() { return reinterpret_cast<cclzStream_t>(comms().stream); }

struct Shape {
  size_t m, n, k;
};
constexpr Shape kShape{64, 96, 128};

cclzCodecConfig_t fp8Config() {
  cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
  c.codec = cclzCodecFp8;
  return c;
}

// The test's own cuBLASLt GEMM, its algorithm chosen at a first GEMM of m rows, as the path
// chooses its own at the first chunk: the same heuristics for the same shape on the same GPU,
// planned for the same multiprocessors as the communicator's (with CCLZ_OVERLAP_COPY=auto, as
// decided where every rank can use the copy engines, as on the device machines).
struct ReferenceGemm {
  overlap::DeviceGemm gemm{CommSettings::fromEnvironment().overlapReservedSms(
      CommSettings::fromEnvironment().overlapCopy != OverlapCopy::Nccl)};
  // C (rows x n) = A (rows x k) * B^T (+ bias, if not empty), B n x k, on the device.
  std::vector<uint8_t> run(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                           size_t rows, const Shape& s, size_t chunkRows,
                           const std::vector<uint8_t>& bias = {}) {
    auto da = holding(a), db = holding(b), dc = empty(rows * s.n * 2);
    auto dbias = bias.empty() ? nullptr : holding(bias);
    overlap::GemmArgs g;
    g.a = da->data(), g.b = db->data(), g.c = dc->data(), g.m = chunkRows, g.n = s.n, g.k = s.k;
    g.transB = true, g.dtype = cclzBfloat16, g.lda = s.k, g.ldb = s.k, g.ldc = s.n;
    g.bias = dbias ? dbias->data() : nullptr;
    gemm.run(g, nullptr);  // chooses the algorithm at chunkRows rows
    g.m = rows;
    gemm.run(g, nullptr);
    return dc->download(dc->size());
  }
};

double relativeError(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size() / 2; ++i) {
    const double g = elementAsFloat(cclzBfloat16, got, i), w = elementAsFloat(cclzBfloat16, want, i);
    num += (g - w) * (g - w), den += w * w;
  }
  return std::sqrt(num / den);
}

// The nodes the communicator's ranks are on, as it learns them (nodeKey: $NCCL_HOSTID where
// set).
NodeLayout worldLayout() {
  const uint64_t mine = nodeKey("");
  std::vector<uint64_t> keys(worldSize());
  MPI_Allgather(&mine, 1, MPI_UINT64_T, keys.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  return nodeLayoutFromKeys(keys);
}

class NcclOverlap : public ::testing::TestWithParam<bool> {};  // with the fp8 codec or plain

// With a bias (a column-parallel Linear's, in the GEMMs' epilogue) and without.
TEST_P(NcclOverlap, AllGatherMatmulIsTheGatherThenTheProduct) {
  const bool fp8 = GetParam();
  const int n = worldSize(), me = worldRank();
  const Shape s = kShape;
  const cclzCodecConfig_t config = fp8Config();
  const cclzCodecConfig_t* codec = fp8 ? &config : nullptr;
  const auto a = makeData(DataKind::kGauss1, cclzBfloat16, s.m * s.k, 0, 10 + me);
  const auto b = makeData(DataKind::kGauss1, cclzBfloat16, s.n * s.k, 0, 20 + me);
  for (const bool withBias : {false, true}) {
    SCOPED_TRACE(withBias ? "with a bias" : "without a bias");
    const auto bias = withBias ? makeData(DataKind::kGauss1, cclzBfloat16, s.n, 0, 50 + me)
                               : std::vector<uint8_t>{};
    auto da = holding(a), db = holding(b);
    auto dbias = withBias ? holding(bias) : nullptr;
    auto dc = empty(n * s.m * s.n * 2), dg = empty(n * s.m * s.k * 2);
    ASSERT_EQ(cclzAllGatherMatmul(da->data(), db->data(), dbias ? dbias->data() : nullptr,
                                  dc->data(), dg->data(), s.m, s.n, s.k, 1, cclzBfloat16,
                                  comms().device, codec, testStream()),
              cclzSuccess)
        << cclzGetLastError(comms().device);
    ASSERT_NO_FATAL_FAILURE(expectFinishedCleanly());

    // The host path on the same rows: the gathered matrix it multiplies.
    std::vector<uint8_t> hostC(n * s.m * s.n * 2), hostG(n * s.m * s.k * 2);
    ASSERT_EQ(cclzAllGatherMatmul(a.data(), b.data(), withBias ? bias.data() : nullptr,
                                  hostC.data(), hostG.data(), s.m, s.n, s.k, 1, cclzBfloat16,
                                  comms().host, codec, nullptr),
              cclzSuccess)
        << cclzGetLastError(comms().host);
    EXPECT_EQ(dg->download(dg->size()), hostG) << "the gathered matrix";
    const std::vector<uint8_t> c = dc->download(dc->size());
    EXPECT_TRUE(dc->guardsIntact() && dg->guardsIntact()) << "a write outside the outputs";
    ReferenceGemm ref;
    EXPECT_EQ(c, ref.run(hostG, b, n * s.m, s, s.m, bias))
        << "the product of the whole gathered matrix";
    EXPECT_LT(relativeError(c, hostC), 1e-2) << "against the host GEMM";
  }
}

TEST_P(NcclOverlap, MatmulReduceScatterSumsEveryRanksPartialAsItArrives) {
  const bool fp8 = GetParam();
  const int n = worldSize(), me = worldRank();
  const Shape s = kShape;
  const cclzCodecConfig_t config = fp8Config();
  cclzCodec_t handle = nullptr;
  if (fp8) {
    ASSERT_EQ(cclzCodecCreate(&handle, &config), cclzSuccess) << cclzGetLastError(nullptr);
  }
  auto input = [&](int q) {
    return makeData(DataKind::kGauss1, cclzBfloat16, n * s.m * s.k, 0, 30 + q);
  };
  auto weight = [&](int q) { return makeData(DataKind::kGauss1, cclzBfloat16, s.n * s.k, 0, 40 + q); };
  // Across emulated nodes (bench/python/two_nodes.sh), with a codec, the two-level schedule.
  const NodeLayout layout = worldLayout();
  const bool acrossNodes = CommSettings::fromEnvironment().twoLevel && layout.twoLevel();
  for (cclzRedOp_t op : {cclzSum, cclzAvg}) {
    SCOPED_TRACE(op == cclzSum ? "sum" : "avg");
    const auto a = input(me), b = weight(me);
    auto da = holding(a), db = holding(b), dc = empty(s.m * s.n * 2);
    ASSERT_EQ(cclzMatmulReduceScatter(da->data(), db->data(), dc->data(), s.m, s.n, s.k, 1,
                                      cclzBfloat16, op, comms().device, fp8 ? &config : nullptr,
                                      testStream()),
              cclzSuccess)
        << cclzGetLastError(comms().device);
    ASSERT_NO_FATAL_FAILURE(expectFinishedCleanly());

    // Every rank's partial of this rank's rows, the same GEMM; each through its frame with fp8
    // (or, across nodes, each node's sum of them: two_level_reference.h).
    ReferenceGemm ref;
    auto partialOf = [&](int q) {
      const auto aq = input(q);
      const std::vector<uint8_t> rows(aq.begin() + me * s.m * s.k * 2,
                                      aq.begin() + (me + 1) * s.m * s.k * 2);
      return ref.run(rows, weight(q), s.m, s, s.m);
    };
    auto throughCodec = [&](std::vector<uint8_t> rows) {
      size_t capacity = 0, used = 0;
      EXPECT_EQ(cclzCodecMaxEncodedSize(handle, s.m * s.n, cclzBfloat16, &capacity), cclzSuccess);
      std::vector<uint8_t> frame(capacity);
      EXPECT_EQ(cclzEncodeHost(handle, rows.data(), s.m * s.n, cclzBfloat16, frame.data(),
                               capacity, &used),
                cclzSuccess);
      EXPECT_EQ(cclzDecodeHost(handle, frame.data(), used, rows.data(), s.m * s.n, cclzBfloat16),
                cclzSuccess);
      return rows;
    };
    const float divisor = op == cclzAvg ? static_cast<float>(n) : 1.0f;
    std::vector<uint8_t> want(s.m * s.n * 2);
    if (fp8 && acrossNodes) {
      want = twoLevelReduceScatterReference(layout, me, cclzBfloat16, s.m * s.n, 2, divisor,
                                            partialOf, throughCodec);
    } else {
      std::vector<float> acc(s.m * s.n, 0.0f);
      for (int i = 0; i < n; ++i) {  // in the order the partials arrive, this rank's own last
        std::vector<uint8_t> partial = partialOf(overlap::reduceOrder(me, n, i));
        if (fp8) partial = throughCodec(partial);
        for (size_t e = 0; e < s.m * s.n; ++e)
          reduce::accumulateElement(acc.data(), e, partial.data(), cclzBfloat16);
      }
      for (size_t e = 0; e < s.m * s.n; ++e)
        reduce::storeElement(acc.data(), e, divisor, cclzBfloat16, want.data());
    }
    EXPECT_EQ(dc->download(dc->size()), want);
    EXPECT_TRUE(dc->guardsIntact()) << "a write outside the output";
  }
  if (handle) cclzCodecDestroy(handle);
}

INSTANTIATE_TEST_SUITE_P(Codec, NcclOverlap, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "fp8" : "plain"; });

// Calls of two shapes back to back on two streams (the buffers grow between them), the second
// stream's calls after the first's: each result as a call of its own gives it.
// An adaptive device communicator tries each kind both ways (overlapped, then serial: the
// collective and one GEMM of cuBLASLt's own choice) and settles every rank alike at the 11th call;
// every call's result stays right: the gathered matrix bit for bit the plain all-gather's, the
// products within bf16's rounding of the host GEMM's.
TEST(NcclOverlapCalls, AdaptiveCallsTryBothSchedulesAndSettleAlike) {
  const int n = worldSize(), me = worldRank();
  const Shape s = kShape;
  cclzCommConfig_t commConfig = CCLZ_COMM_CONFIG_INITIALIZER;
  commConfig.adaptive = 1;
  cclzComm_t comm = makeDeviceComm(commConfig);
  ASSERT_NE(comm, nullptr);
  const auto a = makeData(DataKind::kGauss1, cclzBfloat16, n * s.m * s.k, 0, 90 + me);
  const auto b = makeData(DataKind::kGauss1, cclzBfloat16, s.n * s.k, 0, 100 + me);
  const std::vector<uint8_t> mine(a.begin(), a.begin() + s.m * s.k * 2);
  std::vector<uint8_t> hostG(n * s.m * s.k * 2), hostC(n * s.m * s.n * 2), hostY(s.m * s.n * 2);
  ASSERT_EQ(cclzAllGatherMatmul(mine.data(), b.data(), nullptr, hostC.data(), hostG.data(), s.m,
                                s.n, s.k, 1, cclzBfloat16, comms().host, nullptr, nullptr),
            cclzSuccess);
  ASSERT_EQ(cclzMatmulReduceScatter(a.data(), b.data(), hostY.data(), s.m, s.n, s.k, 1,
                                    cclzBfloat16, cclzSum, comms().host, nullptr, nullptr),
            cclzSuccess);
  auto da = holding(a), db = holding(b);
  auto dc = empty(n * s.m * s.n * 2), dg = empty(n * s.m * s.k * 2), dy = empty(s.m * s.n * 2);
  constexpr int kTrials = 10;  // 2 * kOverlapTrialPairs (overlap_call.cpp), the overlapped first
  for (int call = 0; call < kTrials + 3; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    for (bool gather : {true, false}) {
      const cclzResult_t r =
          gather ? cclzAllGatherMatmul(da->data(), db->data(), nullptr, dc->data(), dg->data(), s.m,
                                       s.n, s.k, 1, cclzBfloat16, comm, nullptr, testStream())
                 : cclzMatmulReduceScatter(da->data(), db->data(), dy->data(), s.m, s.n, s.k, 1,
                                           cclzBfloat16, cclzSum, comm, nullptr, testStream());
      ASSERT_EQ(r, cclzSuccess) << cclzGetLastError(comm);
      cclzPath_t path = cclzPathCompressed;
      int decided = -1;
      ASSERT_EQ(cclzCommGetLastPath(comm, &path, &decided), cclzSuccess);
      int mineWay[2] = {static_cast<int>(path), decided}, all[2 * 8] = {};
      ASSERT_LE(n, 8);
      MPI_Allgather(mineWay, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD);
      for (int q = 0; q < n; ++q)
        EXPECT_TRUE(all[2 * q] == mineWay[0] && all[2 * q + 1] == mineWay[1]) << "rank " << q;
      EXPECT_EQ(decided, call < kTrials ? 0 : 1);
      if (call < kTrials)
        EXPECT_EQ((path & cclzPathSerial) != 0, call % 2 == 1) << "trials alternate";
    }
    ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
    EXPECT_EQ(dg->download(dg->size()), hostG) << "the gathered matrix";
    EXPECT_LT(relativeError(dc->download(dc->size()), hostC), 1e-2) << "all-gather + GEMM";
    EXPECT_LT(relativeError(dy->download(dy->size()), hostY), 1e-2) << "GEMM + reduce-scatter";
  }
  EXPECT_TRUE(dc->guardsIntact() && dg->guardsIntact() && dy->guardsIntact());
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess) << cclzGetLastError(nullptr);
}

TEST(NcclOverlapCalls, BackToBackOnTwoStreams) {
  const int n = worldSize(), me = worldRank();
  cudaStream_t other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  const Shape small{16, 32, 64}, large = kShape;
  std::vector<std::vector<uint8_t>> first, second;
  for (int round = 0; round < 2; ++round) {
    for (const Shape& s : {small, large}) {
      const auto a = makeData(DataKind::kGauss1, cclzBfloat16, s.m * s.k, 0, 50 + me);
      const auto b = makeData(DataKind::kGauss1, cclzBfloat16, s.n * s.k, 0, 60 + me);
      auto da = holding(a), db = holding(b), dc = empty(n * s.m * s.n * 2);
      cudaStream_t st = round == 0 ? comms().stream : other;
      ASSERT_EQ(cclzAllGatherMatmul(da->data(), db->data(), nullptr, dc->data(), nullptr, s.m, s.n,
                                    s.k, 1, cclzBfloat16, comms().device, nullptr,
                                    reinterpret_cast<cclzStream_t>(st)),
                cclzSuccess)
          << cclzGetLastError(comms().device);
      (round == 0 ? first : second).push_back(dc->download(dc->size()));
    }
  }
  EXPECT_EQ(first, second);
  cudaStreamDestroy(other);
}

// On a communicator of its own, whose first call of the op is checked before any data moves: a
// rejected call there is an error on every rank and aborts nothing (past the first call the check
// is deferred, and a rejected call aborts the communicator, as below).
TEST(NcclOverlapCalls, Fp8ChunksMustFillWholeWords) {
  const int n = worldSize();
  cclzComm_t comm = makeCheckedComm(nullptr);
  const Shape s{3, 8, 5};  // 15 bf16 values a chunk: 30 bytes
  const cclzCodecConfig_t config = fp8Config();
  auto da = empty(s.m * s.k * 2), db = empty(s.n * s.k * 2), dc = empty(n * s.m * s.n * 2);
  EXPECT_EQ(cclzAllGatherMatmul(da->data(), db->data(), nullptr, dc->data(), nullptr, s.m, s.n, s.k,
                                1, cclzBfloat16, comm, &config, testStream()),
            cclzInvalidArgument);
  EXPECT_TRUE(dc->guardsIntact());
  EXPECT_NE(std::string(cclzGetLastError(comm)).find("16-byte words"), std::string::npos);
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess) << cclzGetLastError(nullptr);
}

// Past the first call of an op the check is deferred (CCLZ_CHECK_CALLS=deferred, the default):
// a call whose row count differs on one rank returns, its check fails on every rank a little
// later as the communicator's asynchronous error, the transport is aborted so that the transfers
// the mismatch left waiting end (the stream drains: no hang), and every later call fails.
TEST(NcclOverlapCalls, DeferredMismatchIsAnErrorNotAHang) {
  const int n = worldSize(), me = worldRank();
  cclzComm_t comm = makeCheckedComm(nullptr);
  const Shape s = kShape;
  auto da = empty(n * s.m * s.k * 2), db = empty(s.n * s.k * 2), dc = empty(s.m * s.n * 2);
  auto call = [&](uint64_t rows) {
    return cclzMatmulReduceScatter(da->data(), db->data(), dc->data(), rows, s.n, s.k, 1,
                                   cclzBfloat16, cclzSum, comm, nullptr, testStream());
  };
  ASSERT_EQ(call(s.m), cclzSuccess) << cclzGetLastError(comm);  // checked now: agreed
  const cclzResult_t r = call(me == n - 1 ? s.m - 1 : s.m);
  EXPECT_TRUE(r == cclzSuccess || r == cclzInvalidUsage) << r << ": " << cclzGetLastError(comm);
  EXPECT_EQ(awaitAsyncError(comm), cclzInvalidUsage);
  std::string message = cclzGetLastError(comm);
  EXPECT_NE(message.find("differs"), std::string::npos) << message;
  cudaStreamSynchronize(reinterpret_cast<cudaStream_t>(testStream()));  // the aborted transfers end
  cudaGetLastError();
  EXPECT_EQ(call(s.m), cclzInvalidUsage);
  message = cclzGetLastError(comm);
  EXPECT_NE(message.find("deferred check"), std::string::npos) << message;
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess) << cclzGetLastError(nullptr);
}

}  // namespace
}  // namespace cclz::test

int main(int argc, char** argv) {
  using namespace cclz::test;
  if (const int skip = startNcclTests(&argc, argv, "1M")) return skip;
  return finishNcclTests();
}
