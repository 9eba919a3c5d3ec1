// The interposer's route (src/interpose/route.h) and settings, as plain functions: which calls
// may go through cclz, and what the environment turns on and off.
#include "route.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <map>
#include <string>

#include "settings.h"

namespace cclz::interpose {
namespace {

Settings defaults() { return Settings{}; }

Settings withReduce() {
  Settings s;
  s.reduce = true;
  return s;
}

Call call(Op op, int dtype, size_t count, int redOp = -1) {
  Call c{op, dtype, count, redOp};
  c.send = reinterpret_cast<const void*>(0x1000);
  c.recv = reinterpret_cast<const void*>(0x800000);
  c.ranks = 4;
  return c;
}

TEST(InterposeRoute, DataMovementOfFloatsGoesThroughCclz) {
  for (Op op : {Op::AllGather, Op::Send, Op::Recv, Op::AllToAll})
    for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32})
      EXPECT_EQ(route(call(op, dtype, 1000), 0, defaults()), Reason::None)
          << opName(op) << " " << dtype;
}

TEST(InterposeRoute, BroadcastAlwaysGoesToNccl) {
  EXPECT_EQ(route(call(Op::Broadcast, cclzBfloat16, 1000), 0, withReduce()), Reason::NoCclzOp);
}

TEST(InterposeRoute, OtherDtypesGoToNccl) {
  for (int dtype :
       std::initializer_list<int>{cclzInt8, cclzUint8, cclzInt32, cclzUint32, cclzInt64, cclzUint64,
                                  cclzFloat64, 10 /* ncclFloat8e4m3 */, 11 /* ncclFloat8e5m2 */})
    EXPECT_EQ(route(call(Op::AllGather, dtype, 1000), 0, defaults()), Reason::Dtype) << dtype;
}

TEST(InterposeRoute, ReductionsOnlyWhenAskedForAndOnlySumAndAverage) {
  for (Op op : {Op::AllReduce, Op::ReduceScatter}) {
    EXPECT_EQ(route(call(op, cclzBfloat16, 1000, cclzSum), 0, defaults()), Reason::Reduction);
    EXPECT_EQ(route(call(op, cclzBfloat16, 1000, cclzSum), 0, withReduce()), Reason::None);
    EXPECT_EQ(route(call(op, cclzFloat32, 1000, cclzAvg), 0, withReduce()), Reason::None);
    for (int other : {1 /* prod */, 2 /* max */, 3 /* min */, 5 /* a premul-sum op */})
      EXPECT_EQ(route(call(op, cclzFloat32, 1000, other), 0, withReduce()), Reason::Reduction);
    EXPECT_EQ(route(call(op, cclzInt32, 1000, cclzSum), 0, withReduce()), Reason::Dtype);
  }
}

TEST(InterposeRoute, EmptyCallsGoToNccl) {
  EXPECT_EQ(route(call(Op::AllGather, cclzBfloat16, 0), 0, defaults()), Reason::Empty);
}

TEST(InterposeRoute, CallsInAGroupGoToNccl) {
  for (int depth : {1, 2, 5})
    EXPECT_EQ(route(call(Op::Send, cclzBfloat16, 1000), depth, defaults()), Reason::Group);
}

TEST(InterposeRoute, OffSendsEverythingToNccl) {
  Settings off;
  off.enabled = false;
  off.reduce = true;
  EXPECT_EQ(route(call(Op::AllGather, cclzBfloat16, 1000), 0, off), Reason::Off);
  EXPECT_EQ(route(call(Op::AllReduce, cclzBfloat16, 1000, cclzSum), 0, off), Reason::Off);
}

TEST(InterposeRoute, AllToAllWhoseBuffersOverlapGoesToNccl) {
  Call c = call(Op::AllToAll, cclzBfloat16, 1000);  // 4 ranks: 8000 bytes per buffer
  c.recv = c.send;
  EXPECT_EQ(route(c, 0, defaults()), Reason::InPlace);
  c.recv = static_cast<const char*>(c.send) + 7998;
  EXPECT_EQ(route(c, 0, defaults()), Reason::InPlace);
  c.recv = static_cast<const char*>(c.send) + 8000;  // adjacent, not overlapping
  EXPECT_EQ(route(c, 0, defaults()), Reason::None);
}

// NCCL's in-place forms of the other collectives are cclz's too.
TEST(InterposeRoute, InPlaceCollectivesGoThroughCclz) {
  Call gather = call(Op::AllGather, cclzBfloat16, 1000);
  gather.send = static_cast<const char*>(gather.recv) + 2 * 2000;  // rank 2's block
  EXPECT_EQ(route(gather, 0, defaults()), Reason::None);
  Call reduce = call(Op::AllReduce, cclzFloat32, 1000, cclzSum);
  reduce.recv = reduce.send;
  EXPECT_EQ(route(reduce, 0, withReduce()), Reason::None);
}

TEST(InterposeRoute, EveryOpAndReasonHasAName) {
  for (int op = 0; op < static_cast<int>(Op::Count); ++op)
    EXPECT_STRNE(opName(static_cast<Op>(op)), "?");
  for (int r = 0; r < static_cast<int>(Reason::Count); ++r)
    EXPECT_STRNE(reasonName(static_cast<Reason>(r)), "?");
}

std::map<std::string, std::string> environment;
const char* fakeGetenv(const char* name) {
  auto it = environment.find(name);
  return it == environment.end() ? nullptr : it->second.c_str();
}

TEST(InterposeSettings, DefaultsAreOnWithoutReductionsOrCounts) {
  environment = {};
  const Settings s = Settings::parse(fakeGetenv);
  EXPECT_TRUE(s.enabled);
  EXPECT_FALSE(s.reduce);
  EXPECT_FALSE(s.force);
  EXPECT_FALSE(s.debug);
  EXPECT_EQ(s.error, "");
  environment = {{"CCLZ_INTERPOSE", ""}};  // set but empty: the default
  EXPECT_TRUE(Settings::parse(fakeGetenv).enabled);
}

TEST(InterposeSettings, EachSwitch) {
  environment = {{"CCLZ_INTERPOSE", "0"}};
  EXPECT_FALSE(Settings::parse(fakeGetenv).enabled);
  environment = {{"CCLZ_INTERPOSE", "1"},
                 {"CCLZ_INTERPOSE_REDUCE", "1"},
                 {"CCLZ_INTERPOSE_FORCE", "1"},
                 {"CCLZ_INTERPOSE_DEBUG", "1"}};
  const Settings s = Settings::parse(fakeGetenv);
  EXPECT_TRUE(s.enabled && s.reduce && s.force && s.debug);
}

TEST(InterposeSettings, AValueItDoesNotKnowTurnsItOffAndSaysWhich) {
  for (const char* name : {"CCLZ_INTERPOSE", "CCLZ_INTERPOSE_REDUCE", "CCLZ_INTERPOSE_FORCE",
                           "CCLZ_INTERPOSE_DEBUG"}) {
    environment = {{name, "yes"}};
    const Settings s = Settings::parse(fakeGetenv);
    EXPECT_FALSE(s.enabled) << name;
    EXPECT_NE(s.error.find(std::string(name) + "=yes"), std::string::npos) << s.error;
  }
}

}  // namespace
}  // namespace cclz::interpose
