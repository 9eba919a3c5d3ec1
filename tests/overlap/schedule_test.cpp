// The overlapped GEMMs' schedules, played out for every rank of 1 to 8 ranks at once: each
// step's send meets the matching receive at its peer in the same step, every chunk a step
// computes is there by then, and the work is the whole product, with no transfer after the
// last GEMM.
#include "overlap/schedule.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace cclz::overlap {
namespace {

class Schedules : public ::testing::TestWithParam<int> {};

TEST_P(Schedules, AllGatherComputesItsOwnChunkFirstAndEveryChunkOnceItHasArrived) {
  const int n = GetParam();
  for (int me = 0; me < n; ++me) {
    std::set<int> held = {me}, computed;
    for (int s = 0; s < n; ++s) {
      const Step step = gatherStep(me, n, s);
      EXPECT_TRUE(held.count(step.compute)) << "rank " << me << " step " << s;
      EXPECT_TRUE(computed.insert(step.compute).second) << "rank " << me << " step " << s;
      if (s == 0) {
        EXPECT_EQ(step.compute, me);
      }
      if (s == n - 1) {
        EXPECT_EQ(step.sendTo, -1);
        EXPECT_EQ(step.recvFrom, -1);
        continue;
      }
      // What this step sends is a chunk it holds; what its peer sends it in the same step is the
      // chunk this step's receive expects.
      EXPECT_TRUE(held.count(step.sendChunk));
      const Step peer = gatherStep(step.recvFrom, n, s);
      EXPECT_EQ(peer.sendTo, me);
      EXPECT_EQ(peer.sendChunk, step.recvChunk);
      held.insert(step.recvChunk);
    }
    EXPECT_EQ(static_cast<int>(computed.size()), n);
  }
}

TEST_P(Schedules, ReduceScatterSendsEachPartialToItsOwnerAndComputesItsOwnLast) {
  const int n = GetParam();
  for (int me = 0; me < n; ++me) {
    std::set<int> computed, partialsFrom = {me};
    for (int s = 0; s < n; ++s) {
      const Step step = reduceScatterStep(me, n, s);
      EXPECT_TRUE(computed.insert(step.compute).second) << "rank " << me << " step " << s;
      if (s == n - 1) {
        EXPECT_EQ(step.compute, me);
        EXPECT_EQ(step.sendTo, -1);
        EXPECT_EQ(step.recvFrom, -1);
        continue;
      }
      EXPECT_NE(step.compute, me);
      EXPECT_EQ(step.sendTo, step.compute);  // a partial goes straight to its owner
      EXPECT_EQ(step.recvChunk, me);
      const Step peer = reduceScatterStep(step.recvFrom, n, s);
      EXPECT_EQ(peer.sendTo, me);
      EXPECT_EQ(peer.sendChunk, me);
      EXPECT_TRUE(partialsFrom.insert(step.recvFrom).second);
    }
    EXPECT_EQ(static_cast<int>(computed.size()), n);
    EXPECT_EQ(static_cast<int>(partialsFrom.size()), n);  // one partial from every rank
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, Schedules, ::testing::Range(1, 9));

}  // namespace
}  // namespace cclz::overlap
