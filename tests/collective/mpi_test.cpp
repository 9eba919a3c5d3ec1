// The collectives over MPI, one process per rank: run by ctest under mpirun with 2, 3 and 4 ranks
// (label mpi). The same cases as the loopback test (coll_cases.h) through the C API on a host
// communicator made from MPI_COMM_WORLD; every rank checks its own output against the reference,
// all-reduce outputs are compared across ranks byte for byte, and arguments that differ between
// ranks make every rank fail. Without MPI in the build the binary is not built.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "adaptive_ranks.h"
#include "coll_cases.h"
#include "coll_runner.h"
#include "mpi_world.h"
#include "support/data.h"

namespace cclz::test {
namespace {

// One communicator for the whole run, as a training job would have.
cclzComm_t theComm() {
  // Every call through its codec (MpiAdaptive tests the other way).
  static cclzComm_t comm = makeWorldComm(false);
  return comm;
}

class MpiCollective : public ::testing::TestWithParam<CollCase> {};

TEST_P(MpiCollective, MatchesReferenceOnEveryRank) {
  const CollCase& c = GetParam();
  const int n = worldSize(), me = worldRank();
  std::vector<uint8_t> out;
  const cclzResult_t result = runCase(theComm(), c, n, me, &out);
  ASSERT_EQ(result, cclzSuccess) << "rank " << me << ": " << cclzGetLastError(theComm());
  EXPECT_EQ(checkOutput(c, n, me, out, nullptr, networkReduces(c)), "") << "rank " << me;
  if (c.op == Coll::AllReduce) {
    std::vector<uint8_t> all(out.size() * n);
    MPI_Allgather(out.data(), static_cast<int>(out.size()), MPI_BYTE, all.data(),
                  static_cast<int>(out.size()), MPI_BYTE, MPI_COMM_WORLD);
    for (int r = 0; r < n; ++r)
      EXPECT_TRUE(std::equal(out.begin(), out.end(), all.begin() + r * out.size()))
          << "all-reduce: rank " << r << " differs from rank " << me;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, MpiCollective, ::testing::ValuesIn(allCases()),
                         [](const auto& info) { return info.param.name(); });

// The last rank passes a different count, then a different codec: every rank fails, names the
// field, and the communicator still works afterwards.
TEST(MpiErrors, MismatchFailsOnEveryRankAndCommSurvives) {
  const int n = worldSize(), me = worldRank();
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  const size_t count = 1000 + (me == n - 1 ? 1 : 0);
  std::vector<uint16_t> in(1001 * n, 0x3f80), out(1001 * n);
  EXPECT_EQ(cclzAllGather(in.data(), out.data(), count, cclzBfloat16, theComm(), &config, nullptr),
            cclzInvalidUsage);
  EXPECT_NE(std::string(cclzGetLastError(theComm())).find("count differs"), std::string::npos)
      << cclzGetLastError(theComm());
  if (me == 0) config.codec = cclzCodecNone;
  EXPECT_EQ(cclzReduceScatter(in.data(), out.data(), 1000, cclzBfloat16, cclzSum, theComm(),
                              &config, nullptr),
            cclzInvalidUsage);
  EXPECT_NE(std::string(cclzGetLastError(theComm())).find("codec differs"), std::string::npos)
      << cclzGetLastError(theComm());
  config.codec = cclzCodecLossless;
  EXPECT_EQ(cclzAllReduce(in.data(), out.data(), 1000, cclzBfloat16, cclzSum, theComm(), &config,
                          nullptr),
            cclzSuccess)
      << cclzGetLastError(theComm());
  EXPECT_EQ(out[0], 0x3f80 + (n == 2 ? 0x80 : n == 3 ? 0xC0 : 0x100))  // 1.0 * n in bf16
      << "n = " << n;
}

// The codec none in place. The all-reduce (send == recv) runs MPI_Allreduce with MPI_IN_PLACE
// (passing the buffer twice is an error that aborts the job under OpenMPI) and rounds as the
// network does. The reduce-scatter (recv = the rank's chunk of send) is one MPI cannot take in
// place (its result would land at the buffer's start; aliased buffers are not allowed), so it
// runs the pipeline and gives the exact fp32 sums.
TEST(MpiInPlace, NoneReductionsInPlace) {
  const int n = worldSize(), me = worldRank();
  const cclzCodecConfig_t none = codecNamed("none").config();
  for (int dtype : {cclzBfloat16, cclzFloat32}) {
    for (cclzRedOp_t op : {cclzSum, cclzAvg}) {
      const CollCase ar{Coll::AllReduce, dtype, codecNamed("none"), 2500, op};
      SCOPED_TRACE(ar.name());
      std::vector<uint8_t> buf = makeInput(ar, n, me);
      ASSERT_EQ(cclzAllReduce(buf.data(), buf.data(), ar.count, static_cast<cclzDataType_t>(dtype),
                              op, theComm(), &none, nullptr),
                cclzSuccess)
          << cclzGetLastError(theComm());
      EXPECT_EQ(checkOutput(ar, n, me, buf, nullptr, true), "");
      std::vector<uint8_t> all(buf.size() * n);
      MPI_Allgather(buf.data(), static_cast<int>(buf.size()), MPI_BYTE, all.data(),
                    static_cast<int>(buf.size()), MPI_BYTE, MPI_COMM_WORLD);
      for (int r = 0; r < n; ++r)
        EXPECT_TRUE(std::equal(buf.begin(), buf.end(), all.begin() + r * buf.size()))
            << "rank " << r << " differs from rank " << me;

      const CollCase rs{Coll::ReduceScatter, dtype, codecNamed("none"), 1001, op};
      std::vector<uint8_t> in = makeInput(rs, n, me);
      const size_t chunk = rs.count * elementSize(dtype);
      ASSERT_EQ(cclzReduceScatter(in.data(), in.data() + me * chunk, rs.count,
                                  static_cast<cclzDataType_t>(dtype), op, theComm(), &none,
                                  nullptr),
                cclzSuccess)
          << cclzGetLastError(theComm());
      const std::vector<uint8_t> mine(in.begin() + me * chunk, in.begin() + (me + 1) * chunk);
      EXPECT_EQ(checkOutput(rs, n, me, mine), "");
    }
  }
}

TEST(MpiErrors, RejectedArgumentsFailEveryRank) {
  const int me = worldRank();
  std::vector<uint16_t> in(1000 * worldSize()), out(1000 * worldSize());
  const cclzResult_t r = cclzAllToAll(me == 0 ? nullptr : in.data(), out.data(), 1000,
                                      cclzBfloat16, theComm(), nullptr, nullptr);
  const std::string error = cclzGetLastError(theComm());
  if (me == 0) {
    EXPECT_EQ(r, cclzInvalidArgument) << error;
  } else {
    EXPECT_EQ(r, cclzInvalidUsage) << error;
    EXPECT_NE(error.find("rank 0 rejected"), std::string::npos) << error;
  }
}

// Adaptive calls (cclzCommConfig_t.adaptive) on a communicator of their own: each kind's first
// calls alternate the codec and plain data, every call's output is right, every rank reports the
// same path for each call, and the kinds are settled everywhere after their trials.
TEST(MpiAdaptive, RanksSettleAlikeAndEveryCallIsRight) {
  const int n = worldSize(), me = worldRank();
  MPI_Comm world = MPI_COMM_WORLD;
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  config.adaptive = 1;
  cclzComm_t comm = nullptr;
  ASSERT_EQ(cclzCommInitFromMpiConfig(&comm, &world, &config), cclzSuccess);
  const int trials = kSmallKindTrialCalls, calls = trials + 2;
  for (const CollCase& c : adaptiveCases()) {
    SCOPED_TRACE(c.name());
    for (int i = 0; i < calls; ++i) {
      std::vector<uint8_t> out;
      ASSERT_EQ(runCase(comm, c, n, me, &out), cclzSuccess) << cclzGetLastError(comm);
      cclzPath_t path = cclzPathCompressed;
      int decided = -1;
      ASSERT_EQ(cclzCommGetLastPath(comm, &path, &decided), cclzSuccess);
      const bool network = path == cclzPathPlain && c.op == Coll::AllReduce;  // MPI_Allreduce
      EXPECT_EQ(checkOutput(c, n, me, out, nullptr, network), "") << "call " << i;
      expectRanksAgree(c, i, trials, path, decided, out);
    }
  }
  cclzCommDestroy(comm);
}

}  // namespace
}  // namespace cclz::test

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  // Pieces of kTestPieceBytes, so that the cases span several pieces (read at comm creation).
  setenv("CCLZ_PIECE_BYTES", std::to_string(cclz::test::kTestPieceBytes).c_str(), 1);
  ::testing::InitGoogleTest(&argc, argv);
  if (cclz::test::worldRank() != 0) GTEST_FLAG_SET(brief, true);  // rank 0 prints the run
  int result = RUN_ALL_TESTS();
  // A failure on any rank fails the run on every rank (mpirun reports the first non-zero exit).
  result = cclz::test::allRanks(result == 0) ? 0 : 1;
  cclzCommDestroy(cclz::test::theComm());
  MPI_Finalize();
  return result;
}
