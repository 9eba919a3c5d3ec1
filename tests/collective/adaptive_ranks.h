// What the multi-process adaptive tests (MpiAdaptive, NcclAdaptive) check after each call of a
// case on an adaptive communicator, across the ranks of MPI_COMM_WORLD.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cclz/cclz.h"
#include "coll_cases.h"
#include "mpi_world.h"
#include "tune/tuner.h"

namespace cclz::test {

// The calls of a kind's trials, for the cases these tests run: all below 2 MiB a rank, so
// small kinds (Tuner::trialPairsFor).
inline constexpr int kSmallKindTrialCalls = 2 * Tuner::kSmallKindTrialPairs;

// Call i of case c took `path` and said `decided`: its kind is settled from call `trials` on,
// every rank took the same path (send/recv pairs of a ring settle apart, so there a rank's last
// call, its send or its recv, may differ from another rank's: LoopbackAdaptive checks the
// pairs), and all-reduce outputs are identical on every rank.
inline void expectRanksAgree(const CollCase& c, int i, int trials, cclzPath_t path, int decided,
                             const std::vector<uint8_t>& out) {
  const int n = worldSize(), me = worldRank();
  EXPECT_EQ(decided, i >= trials ? 1 : 0) << "call " << i;
  const int mine = static_cast<int>(path) * 2 + decided;
  std::vector<int> all(n);
  MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, MPI_COMM_WORLD);
  if (c.op != Coll::SendRecv) {
    for (int r = 0; r < n; ++r) EXPECT_EQ(all[r], mine) << "call " << i << ": rank " << r;
  }
  if (c.op != Coll::AllReduce) return;
  std::vector<uint8_t> outs(out.size() * n);
  MPI_Allgather(out.data(), static_cast<int>(out.size()), MPI_BYTE, outs.data(),
                static_cast<int>(out.size()), MPI_BYTE, MPI_COMM_WORLD);
  for (int r = 0; r < n; ++r)
    EXPECT_TRUE(std::equal(out.begin(), out.end(), outs.begin() + r * out.size()))
        << "call " << i << ": all-reduce differs between ranks " << r << " and " << me;
}

}  // namespace cclz::test
