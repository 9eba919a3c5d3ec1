// The plans of calls validated before (src/collective/plan_memo.h): a call equal in every
// argument finds its plan, a call that differs in any argument the plan depends on does not, and
// a slot holds the last call kept in it.
#include "collective/plan_memo.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace cclz {
namespace {

Plan planOf(uint64_t pieceElems) {
  Plan p;
  p.pieceElems = pieceElems;
  p.chunks = {{0, pieceElems}, {pieceElems, pieceElems}};
  return p;
}

struct Call {
  float send[8] = {}, recv[16] = {};
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  uint64_t step = 0;
  CollArgs args() {
    CollArgs a;
    a.op = CollOp::AllReduce, a.send = send, a.recv = recv, a.count = 8;
    a.dtype = cclzFloat32, a.redOp = cclzSum, a.codec = &config;
    return a;
  }
};

TEST(PlanMemo, AnEqualCallFindsItsPlan) {
  PlanMemo memo;
  Call c;
  c.config.codec = cclzCodecFp8;
  EXPECT_EQ(memo.find(c.args()), nullptr);
  const Plan& kept = memo.keep(c.args(), planOf(42));
  const Plan* found = memo.find(c.args());
  ASSERT_EQ(found, &kept);
  EXPECT_EQ(found->pieceElems, 42u);
  EXPECT_EQ(found->chunks.size(), 2u);
  // Another stream: the same plan.
  CollArgs other = c.args();
  other.stream = reinterpret_cast<cclzStream_t>(0x1234);
  EXPECT_EQ(memo.find(other), &kept);
  // A copy of the configuration at another address: the same plan.
  const cclzCodecConfig_t copy = c.config;
  other.codec = &copy;
  EXPECT_EQ(memo.find(other), &kept);
}

TEST(PlanMemo, ACallThatDiffersInAnyArgumentIsNotFound) {
  Call c;
  c.config.codec = cclzCodecFp8;
  const cclzCodecConfig_t otherConfig = [&] {
    cclzCodecConfig_t x = c.config;
    x.fp8RowElems = 4096;
    return x;
  }();
  const std::vector<std::pair<std::string, std::function<void(CollArgs&)>>> changes = {
      {"op", [](CollArgs& a) { a.op = CollOp::ReduceScatter; }},
      {"send", [&](CollArgs& a) { a.send = c.send + 1; }},
      {"recv", [&](CollArgs& a) { a.recv = c.recv + 1; }},
      {"count", [](CollArgs& a) { a.count = 7; }},
      {"dtype", [](CollArgs& a) { a.dtype = cclzBfloat16; }},
      {"redOp", [](CollArgs& a) { a.redOp = cclzAvg; }},
      {"peer", [](CollArgs& a) { a.peer = 1; }},
      {"no codec", [](CollArgs& a) { a.codec = nullptr; }},
      {"a codec field", [&](CollArgs& a) { a.codec = &otherConfig; }},
      {"feedback", [&](CollArgs& a) { a.step = &c.step; }},
  };
  for (const auto& [what, change] : changes) {
    PlanMemo memo;
    memo.keep(c.args(), planOf(42));
    CollArgs a = c.args();
    change(a);
    EXPECT_EQ(memo.find(a), nullptr) << what;
    const Plan& kept = memo.keep(a, planOf(7));  // kept beside it, or in its slot
    EXPECT_EQ(memo.find(a), &kept) << what;
    EXPECT_EQ(memo.find(a)->pieceElems, 7u) << what;
    const Plan* first = memo.find(c.args());
    if (first) EXPECT_EQ(first->pieceElems, 42u) << what;
  }
}

TEST(PlanMemo, ManyCallsEachFindTheirOwnPlanOrNone) {
  PlanMemo memo;
  std::vector<float> buffer(4 * PlanMemo::kSlots);
  auto callAt = [&](int i) {
    CollArgs a;
    a.op = CollOp::AllGather, a.send = buffer.data() + i, a.recv = buffer.data() + i + 1;
    a.count = 100 + i, a.dtype = cclzFloat32;
    return a;
  };
  for (int i = 0; i < 3 * PlanMemo::kSlots; ++i) memo.keep(callAt(i), planOf(1000 + i));
  int found = 0;
  for (int i = 0; i < 3 * PlanMemo::kSlots; ++i) {
    const Plan* p = memo.find(callAt(i));
    if (!p) continue;
    ++found;
    EXPECT_EQ(p->pieceElems, 1000u + i) << "call " << i;  // never another call's plan
  }
  EXPECT_GT(found, 0);
  EXPECT_LE(found, PlanMemo::kSlots);
  // The last call kept is always found.
  ASSERT_NE(memo.find(callAt(3 * PlanMemo::kSlots - 1)), nullptr);
}

}  // namespace
}  // namespace cclz
