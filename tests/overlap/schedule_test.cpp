// The overlapped GEMMs' schedules, played out for every rank of 1 to 8 ranks at once: each
// step's send meets the matching receive at its peer in the same step, every chunk a step
// computes is there by then, and the work is the whole product, with no transfer after the
// last GEMM. The two-level GEMM + reduce-scatter, played out on layouts of nodes of several
// ranks: each rank's rows end up summed from every rank's partial exactly once, and only one
// frame per rank and other node crosses a node boundary.
#include "overlap/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
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

struct LayoutCase {
  std::string label;
  int n;
  std::function<int(int)> nodeOf;
};

class TwoLevelSchedules : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(TwoLevelSchedules, EveryPartialReachesItsOwnerOnceAndOneFrameCrossesPerNode) {
  const LayoutCase c = GetParam();
  std::vector<uint64_t> keys;
  for (int r = 0; r < c.n; ++r) keys.push_back(static_cast<uint64_t>(c.nodeOf(r)));
  const NodeLayout l = nodeLayoutFromKeys(keys);
  ASSERT_TRUE(l.twoLevel());
  std::vector<std::vector<NodeStep>> steps;
  for (int r = 0; r < c.n; ++r) steps.push_back(twoLevelReduceScatterSteps(l, r));
  // What each rank holds: the partials (rank, chunk) in the sum it is building, the partials
  // of its own rows that came in frames from the other nodes, and its result.
  using Partials = std::multiset<std::pair<int, int>>;
  std::vector<Partials> building(c.n), mine(c.n);
  std::vector<std::set<int>> computed(c.n);
  int crossings = 0;
  for (int s = 0; s < c.n; ++s) {
    std::map<int, Partials> frames;  // by destination: the node sum crossing to it at this step
    for (int r = 0; r < c.n; ++r) {
      const NodeStep& step = steps[r][s];
      EXPECT_TRUE(computed[r].insert(step.compute).second) << "rank " << r << " step " << s;
      const int closing = steps[r][(s / l.perNode + 1) * l.perNode - 1].compute;
      if (step.insideTo >= 0) {
        const int to = step.insideTo;
        EXPECT_EQ(l.nodeOf[to], l.nodeOf[r]);
        EXPECT_EQ(steps[to][s].insideFrom, r) << "rank " << r << " step " << s;
        // The partial is of the chunk the receiver closes in this phase.
        EXPECT_EQ(step.compute, steps[to][(s / l.perNode + 1) * l.perNode - 1].compute);
        building[to].insert({r, step.compute});
        continue;
      }
      EXPECT_EQ(step.compute, closing);
      EXPECT_EQ(l.localOf[step.compute], l.localOf[r]) << "a node sum of this rank's column";
      building[r].insert({r, step.compute});
      if (step.acrossTo < 0) {
        EXPECT_EQ(step.compute, r);
        EXPECT_EQ(s, c.n - 1) << "this rank's own rows last";
        continue;
      }
      EXPECT_NE(l.nodeOf[step.acrossTo], l.nodeOf[r]);
      EXPECT_EQ(steps[step.acrossTo][s].acrossFrom, r);
      ++crossings;
      frames[step.acrossTo] = building[r];
      building[r].clear();
    }
    for (auto& [to, sum] : frames) mine[to].insert(sum.begin(), sum.end());
  }
  for (int r = 0; r < c.n; ++r) {
    mine[r].insert(building[r].begin(), building[r].end());
    Partials want;
    for (int q = 0; q < c.n; ++q) want.insert({q, r});
    EXPECT_EQ(mine[r], want) << "rank " << r << "'s rows: every rank's partial, once";
  }
  EXPECT_EQ(crossings, c.n * (l.nodes - 1));
}

TEST_P(TwoLevelSchedules, GatherSendsOnlyHeldChunksAndComputesEachInTheOrderItArrives) {
  const LayoutCase c = GetParam();
  std::vector<uint64_t> keys;
  for (int r = 0; r < c.n; ++r) keys.push_back(static_cast<uint64_t>(c.nodeOf(r)));
  const NodeLayout l = nodeLayoutFromKeys(keys);
  std::vector<GatherPlan> plans;
  for (int r = 0; r < c.n; ++r) plans.push_back(twoLevelGatherPlan(l, r));
  const size_t groups = plans[0].groups.size();
  // arrival[r][chunk]: the group after which rank r holds the chunk (-1: its own, from the start).
  std::vector<std::vector<int>> arrival(c.n, std::vector<int>(c.n, -2));
  for (int r = 0; r < c.n; ++r) arrival[r][r] = -1;
  int crossings = 0;
  for (size_t g = 0; g < groups; ++g) {
    for (int r = 0; r < c.n; ++r) {
      ASSERT_EQ(plans[r].groups.size(), groups);
      for (const Transfer& out : plans[r].groups[g].sends) {
        EXPECT_NE(arrival[r][out.chunk], -2) << "rank " << r << " sends a chunk it lacks";
        EXPECT_LT(arrival[r][out.chunk], static_cast<int>(g));
        const auto& in = plans[out.peer].groups[g].recvs;
        auto meets = [&](const Transfer& t) { return t.peer == r && t.chunk == out.chunk; };
        EXPECT_EQ(std::count_if(in.begin(), in.end(), meets), 1)
            << "rank " << r << "'s send in group " << g << " meets one receive";
        if (l.nodeOf[out.peer] != l.nodeOf[r]) ++crossings;
      }
      for (const Transfer& in : plans[r].groups[g].recvs) {
        const auto& out = plans[in.peer].groups[g].sends;
        auto meets = [&](const Transfer& t) { return t.peer == r && t.chunk == in.chunk; };
        EXPECT_EQ(std::count_if(out.begin(), out.end(), meets), 1);
      }
    }
    for (int r = 0; r < c.n; ++r)
      for (const Transfer& in : plans[r].groups[g].recvs) {
        EXPECT_EQ(arrival[r][in.chunk], -2) << "rank " << r << " receives chunk " << in.chunk
                                            << " twice";
        arrival[r][in.chunk] = static_cast<int>(g);
      }
  }
  for (int r = 0; r < c.n; ++r) {
    const std::vector<int>& order = plans[r].compute;
    ASSERT_EQ(static_cast<int>(order.size()), c.n);
    EXPECT_EQ(order[0], r) << "its own chunk first";
    EXPECT_EQ(std::set<int>(order.begin(), order.end()).size(), order.size());
    for (size_t i = 1; i < order.size(); ++i) {
      EXPECT_NE(arrival[r][order[i]], -2) << "rank " << r << " never gets chunk " << order[i];
      EXPECT_LE(arrival[r][order[i - 1]], arrival[r][order[i]]) << "rank " << r << " step " << i;
    }
  }
  EXPECT_EQ(crossings, c.n * (l.nodes - 1)) << "each frame crosses once per other node";
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, TwoLevelSchedules,
    ::testing::Values(LayoutCase{"nodes2x2", 4, [](int r) { return r / 2; }},
                      LayoutCase{"nodes2x2_interleaved", 4, [](int r) { return r % 2; }},
                      LayoutCase{"nodes2x3", 6, [](int r) { return r / 3; }},
                      LayoutCase{"nodes3x2_interleaved", 6, [](int r) { return r % 3; }},
                      LayoutCase{"nodes2x4", 8, [](int r) { return r / 4; }}),
    [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace cclz::overlap
