// The overlapped GEMMs through the C API on a host communicator over MPI, one process per rank
// (ctest: 2, 3 and 4 ranks, label mpi): cclzAllGatherMatmul against cclzAllGather then the same
// GEMM, cclzMatmulReduceScatter against every rank's partial for this rank's rows summed in rank
// order (both bit for bit, plain), with fp8 against each partial through its frame (across two
// emulated nodes, ctest's overlap_mpi_two_nodes: the two-level sums and the all-gather's routes),
// and arguments that differ between ranks failing every rank with a message, not a hang.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cclz/cclz.h"
#include "collective/communicator.h"
#include "collective/mpi_world.h"
#include "collective/node_layout.h"
#include "collective/reduce.h"
#include "common/float_bits.h"
#include "overlap/host_gemm.h"
#include "overlap/schedule.h"
#include "support/data.h"
#include "two_level_reference.h"

namespace cclz::test {
namespace {

cclzComm_t theComm() {
  static cclzComm_t comm = makeWorldComm(false);  // every call as asked, none adaptive
  return comm;
}

constexpr size_t kM = 16, kN = 24, kK = 48;

std::vector<uint8_t> gemm(const uint8_t* a, const uint8_t* b, size_t rows,
                          const uint8_t* bias = nullptr) {
  std::vector<uint8_t> c(rows * kN * 2);
  overlap::GemmArgs g;
  g.a = a, g.b = b, g.c = c.data(), g.m = rows, g.n = kN, g.k = kK, g.transB = true;
  g.dtype = cclzBfloat16, g.lda = kK, g.ldb = kK, g.ldc = kN, g.bias = bias;
  overlap::gemmHost(g);
  return c;
}

// Every rank's whole partial product (a: its n * kM rows, b: its weight), gathered: the
// returned function gives rank q's partial of this rank's rows.
std::function<std::vector<uint8_t>(int)> partialsOfMyRows(const std::vector<uint8_t>& a,
                                                          const std::vector<uint8_t>& b) {
  const int n = worldSize(), me = worldRank();
  const std::vector<uint8_t> mine = gemm(a.data(), b.data(), n * kM);
  auto all = std::make_shared<std::vector<uint8_t>>(n * mine.size());
  MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all->data(),
                static_cast<int>(mine.size()), MPI_BYTE, MPI_COMM_WORLD);
  const size_t stride = mine.size();
  return [all, stride, me](int q) {
    const uint8_t* rows = all->data() + q * stride + me * kM * kN * 2;
    return std::vector<uint8_t>(rows, rows + kM * kN * 2);
  };
}

// With a bias (added to every row in fp32 before the rounding) and without.
TEST(MpiOverlap, AllGatherMatmulIsTheAllGatherThenTheProduct) {
  const int n = worldSize(), me = worldRank();
  const auto a = makeData(DataKind::kGauss1, cclzBfloat16, kM * kK, 0, 10 + me);
  const auto b = makeData(DataKind::kGauss1, cclzBfloat16, kN * kK, 0, 20 + me);
  const auto bias = makeData(DataKind::kGauss1, cclzBfloat16, kN, 0, 50 + me);
  for (const uint8_t* withBias : {static_cast<const uint8_t*>(nullptr), bias.data()}) {
    SCOPED_TRACE(withBias ? "with a bias" : "without a bias");
    std::vector<uint8_t> c(n * kM * kN * 2, 0xA5), gathered(n * kM * kK * 2, 0xA5);
    ASSERT_EQ(cclzAllGatherMatmul(a.data(), b.data(), withBias, c.data(), gathered.data(), kM, kN,
                                  kK, 1, cclzBfloat16, theComm(), nullptr, nullptr),
              cclzSuccess)
        << cclzGetLastError(theComm());
    std::vector<uint8_t> want(gathered.size());
    ASSERT_EQ(
        cclzAllGather(a.data(), want.data(), kM * kK, cclzBfloat16, theComm(), nullptr, nullptr),
        cclzSuccess);
    EXPECT_EQ(gathered, want);
    EXPECT_EQ(c, gemm(want.data(), b.data(), n * kM, withBias));
  }
  // The bias changes the product: the test above would not pass with it ignored.
  EXPECT_NE(gemm(a.data(), b.data(), kM, bias.data()), gemm(a.data(), b.data(), kM));
}

TEST(MpiOverlap, MatmulReduceScatterIsThePartialsSummedAsTheyArrive) {
  const int n = worldSize(), me = worldRank();
  const auto a = makeData(DataKind::kGauss1, cclzBfloat16, n * kM * kK, 0, 30 + me);
  const auto b = makeData(DataKind::kGauss1, cclzBfloat16, kN * kK, 0, 40 + me);
  std::vector<uint8_t> c(kM * kN * 2, 0xA5);
  ASSERT_EQ(cclzMatmulReduceScatter(a.data(), b.data(), c.data(), kM, kN, kK, 1, cclzBfloat16,
                                    cclzAvg, theComm(), nullptr, nullptr),
            cclzSuccess)
      << cclzGetLastError(theComm());
  // Every rank's partial of this rank's rows, summed in the order the partials arrive, this
  // rank's own last (reduceOrder).
  const auto partialOf = partialsOfMyRows(a, b);
  std::vector<float> sum(kM * kN, 0.0f);
  for (int q = 0; q < n; ++q) {
    const std::vector<uint8_t> p = partialOf(overlap::reduceOrder(me, n, q));
    for (size_t i = 0; i < kM * kN; ++i)
      reduce::accumulateElement(sum.data(), i, p.data(), cclzBfloat16);
  }
  std::vector<uint8_t> want(c.size());
  for (size_t i = 0; i < kM * kN; ++i)
    reduce::storeElement(sum.data(), i, static_cast<float>(n), cclzBfloat16, want.data());
  EXPECT_EQ(c, want);
}

// The nodes the communicator's ranks are on, as it learns them (nodeKey: $NCCL_HOSTID where set,
// as bench/python/two_nodes.sh sets it).
NodeLayout worldLayout() {
  const uint64_t mine = nodeKey("");
  std::vector<uint64_t> keys(worldSize());
  MPI_Allgather(&mine, 1, MPI_UINT64_T, keys.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  return nodeLayoutFromKeys(keys);
}

// With fp8: each partial through its frame, summed as they arrive; across emulated nodes (ctest's
// overlap_mpi_two_nodes, CCLZ_TEST_TWO_NODES=1) two-level, each other node's sum through one
// frame (two_level_reference.h).
TEST(MpiOverlap, MatmulReduceScatterWithFp8IsThePartialsThroughTheirFrames) {
  const int n = worldSize(), me = worldRank();
  const NodeLayout layout = worldLayout();
  const bool acrossNodes = CommSettings::fromEnvironment().twoLevel && layout.twoLevel();
  if (std::getenv("CCLZ_TEST_TWO_NODES")) ASSERT_TRUE(acrossNodes) << "the ranks' nodes";
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = cclzCodecFp8;
  cclzCodec_t codec = nullptr;
  ASSERT_EQ(cclzCodecCreate(&codec, &config), cclzSuccess);
  const auto a = makeData(DataKind::kGauss1, cclzBfloat16, n * kM * kK, 0, 70 + me);
  const auto b = makeData(DataKind::kGauss1, cclzBfloat16, kN * kK, 0, 80 + me);
  std::vector<uint8_t> c(kM * kN * 2, 0xA5);
  ASSERT_EQ(cclzMatmulReduceScatter(a.data(), b.data(), c.data(), kM, kN, kK, 1, cclzBfloat16,
                                    cclzSum, theComm(), &config, nullptr),
            cclzSuccess)
      << cclzGetLastError(theComm());
  const auto partialOf = partialsOfMyRows(a, b);
  auto throughCodec = [&](std::vector<uint8_t> rows) {
    size_t capacity = 0, used = 0;
    EXPECT_EQ(cclzCodecMaxEncodedSize(codec, kM * kN, cclzBfloat16, &capacity), cclzSuccess);
    std::vector<uint8_t> frame(capacity);
    EXPECT_EQ(cclzEncodeHost(codec, rows.data(), kM * kN, cclzBfloat16, frame.data(), capacity,
                             &used),
              cclzSuccess);
    EXPECT_EQ(cclzDecodeHost(codec, frame.data(), used, rows.data(), kM * kN, cclzBfloat16),
              cclzSuccess);
    return rows;
  };
  std::vector<uint8_t> want(c.size());
  if (acrossNodes) {
    want = twoLevelReduceScatterReference(layout, me, cclzBfloat16, kM * kN, 2, 1.0f, partialOf,
                                          throughCodec);
  } else {
    std::vector<float> sum(kM * kN, 0.0f);
    for (int i = 0; i < n; ++i) {
      const std::vector<uint8_t> p = throughCodec(partialOf(overlap::reduceOrder(me, n, i)));
      for (size_t e = 0; e < kM * kN; ++e)
        reduce::accumulateElement(sum.data(), e, p.data(), cclzBfloat16);
    }
    for (size_t e = 0; e < kM * kN; ++e)
      reduce::storeElement(sum.data(), e, 1.0f, cclzBfloat16, want.data());
  }
  EXPECT_EQ(c, want);
  cclzCodecDestroy(codec);
}

cclzComm_t adaptiveComm() {
  static cclzComm_t comm = makeWorldComm(true);
  return comm;
}

// How the last call ran on every rank (cclzCommGetLastPath), after checking that the ranks agree.
std::pair<cclzPath_t, int> agreedLastPath(cclzComm_t comm) {
  cclzPath_t path = cclzPathCompressed;
  int decided = -1;
  EXPECT_EQ(cclzCommGetLastPath(comm, &path, &decided), cclzSuccess);
  const int mine[2] = {static_cast<int>(path), decided};
  std::vector<int> all(2 * worldSize());
  MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, MPI_COMM_WORLD);
  for (int r = 0; r < worldSize(); ++r) {
    EXPECT_EQ(all[2 * r], mine[0]) << "rank " << r << "'s path";
    EXPECT_EQ(all[2 * r + 1], mine[1]) << "rank " << r << "'s verdict";
  }
  return {path, decided};
}

// On an adaptive communicator the first calls of a kind alternate the overlapped schedule and
// the serial one (the collective, then one GEMM; one GEMM, then the reduce-scatter), every rank
// alike, and settle on one of them at the 11th call (tune/tuner.h). Every call's result is the
// call's: the all-gather's bit for bit either way, the reduce-scatter's within the order of its
// fp32 sum (the serial one sums in the collective's order).
TEST(MpiOverlap, AdaptiveCallsTryBothSchedulesAndSettleAlike) {
  const int n = worldSize(), me = worldRank();
  const auto a = makeData(DataKind::kGauss1, cclzBfloat16, n * kM * kK, 0, 90 + me);
  const auto b = makeData(DataKind::kGauss1, cclzBfloat16, kN * kK, 0, 100 + me);
  std::vector<uint8_t> gatheredWant(n * kM * kK * 2);
  ASSERT_EQ(cclzAllGather(a.data(), gatheredWant.data(), kM * kK, cclzBfloat16, theComm(),
                          nullptr, nullptr),
            cclzSuccess);
  const std::vector<uint8_t> gatherWant = gemm(gatheredWant.data(), b.data(), n * kM);
  const auto partialOf = partialsOfMyRows(a, b);
  std::vector<double> exact(kM * kN, 0.0), magnitude(kM * kN, 0.0);
  for (int q = 0; q < n; ++q) {
    const std::vector<uint8_t> p = partialOf(q);
    for (size_t i = 0; i < kM * kN; ++i) {
      const double v = bf16ToFloat(p[2 * i] | p[2 * i + 1] << 8);
      exact[i] += v, magnitude[i] += std::fabs(v);
    }
  }
  constexpr int kTrials = 10;  // 2 * kOverlapTrialPairs (overlap_call.cpp), the overlapped first
  for (int call = 0; call < kTrials + 3; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    std::vector<uint8_t> c(n * kM * kN * 2, 0xA5), gathered(n * kM * kK * 2, 0xA5);
    const bool keepGathered = call % 4 != 3;  // else NULL: the serial way gathers into scratch
    ASSERT_EQ(cclzAllGatherMatmul(a.data(), b.data(), nullptr, c.data(),
                                  keepGathered ? gathered.data() : nullptr, kM, kN, kK, 1,
                                  cclzBfloat16, adaptiveComm(), nullptr, nullptr),
              cclzSuccess)
        << cclzGetLastError(adaptiveComm());
    const auto [gatherPath, gatherDecided] = agreedLastPath(adaptiveComm());
    if (keepGathered) EXPECT_EQ(gathered, gatheredWant);
    EXPECT_EQ(c, gatherWant);

    std::vector<uint8_t> y(kM * kN * 2, 0xA5);
    ASSERT_EQ(cclzMatmulReduceScatter(a.data(), b.data(), y.data(), kM, kN, kK, 1, cclzBfloat16,
                                      cclzSum, adaptiveComm(), nullptr, nullptr),
              cclzSuccess)
        << cclzGetLastError(adaptiveComm());
    const auto [reducePath, reduceDecided] = agreedLastPath(adaptiveComm());
    for (size_t i = 0; i < kM * kN; ++i) {
      // Each partial rounded to bf16 once and the sum once: within a unit of bf16 at the sum's
      // magnitude, and the order of the fp32 sum.
      const double got = bf16ToFloat(y[2 * i] | y[2 * i + 1] << 8);
      ASSERT_NEAR(got, exact[i], 1e-2 * magnitude[i] + 1e-6) << "element " << i;
    }
    for (const auto& [path, decided] : {std::pair{gatherPath, gatherDecided},
                                        std::pair{reducePath, reduceDecided}}) {
      if (call < kTrials) {
        EXPECT_EQ(decided, 0);
        EXPECT_EQ((path & cclzPathSerial) != 0, call % 2 == 1) << "trials alternate";
      } else {
        EXPECT_EQ(decided, 1);
      }
      // The codec none: the serial call's collective runs through it, never adaptive.
      EXPECT_EQ(path & cclzPathPlain, 0);
    }
  }
}

// The last rank passes another k: every rank fails and names the field; then rank 0 passes a NULL
// matrix: it reports its own argument, its peers that rank 0 rejected; the communicator still works.
TEST(MpiOverlap, MismatchedOrRejectedCallsFailEveryRank) {
  const int n = worldSize(), me = worldRank();
  const auto a = makeData(DataKind::kGauss1, cclzBfloat16, n * kM * kK, 0, 50 + me);
  const auto b = makeData(DataKind::kGauss1, cclzBfloat16, kN * kK, 0, 60 + me);
  std::vector<uint8_t> c(n * kM * kN * 2);
  const size_t k = me == n - 1 ? kK - 8 : kK;
  EXPECT_EQ(cclzAllGatherMatmul(a.data(), b.data(), nullptr, c.data(), nullptr, kM, kN, k, 1,
                                cclzBfloat16, theComm(), nullptr, nullptr),
            cclzInvalidUsage);
  EXPECT_NE(std::string(cclzGetLastError(theComm())).find("matrix shape"), std::string::npos)
      << cclzGetLastError(theComm());
  const cclzResult_t r = cclzMatmulReduceScatter(me == 0 ? nullptr : a.data(), b.data(), c.data(),
                                                 kM, kN, kK, 1, cclzBfloat16, cclzSum, theComm(),
                                                 nullptr, nullptr);
  const std::string error = cclzGetLastError(theComm());
  if (me == 0) {
    EXPECT_EQ(r, cclzInvalidArgument) << error;
  } else {
    EXPECT_EQ(r, cclzInvalidUsage) << error;
    EXPECT_NE(error.find("rank 0 rejected"), std::string::npos) << error;
  }
  EXPECT_EQ(cclzMatmulReduceScatter(a.data(), b.data(), c.data(), kM, kN, kK, 1, cclzBfloat16,
                                    cclzSum, theComm(), nullptr, nullptr),
            cclzSuccess)
      << cclzGetLastError(theComm());
}

}  // namespace
}  // namespace cclz::test

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (cclz::test::worldRank() != 0) GTEST_FLAG_SET(brief, true);
  // A failure on any rank fails the run on every rank.
  const int result = cclz::test::allRanks(RUN_ALL_TESTS() == 0) ? 0 : 1;
  cclzCommDestroy(cclz::test::adaptiveComm());
  cclzCommDestroy(cclz::test::theComm());
  MPI_Finalize();
  return result;
}
