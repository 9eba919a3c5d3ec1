// The tuner's schedule of trial calls and its verdict (tune/tuner.h), with stopwatches that
// report set times: what every rank must compute alike for the ranks to stay in step.
#include "tune/tuner.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <vector>

namespace cclz {
namespace {

class FixedStopwatch final : public Stopwatch {
 public:
  explicit FixedStopwatch(double seconds) : seconds_(seconds) {}
  void start(cclzStream_t) override {}
  void stop(cclzStream_t) override {}
  double seconds() override { return seconds_; }

 private:
  double seconds_;
};

TuneKey keyOf(uint64_t bytes, uint8_t op = 1) {
  TuneKey k;
  k.op = op;
  k.codec = 3;
  k.sizeClass = Tuner::sizeClass(bytes);
  return k;
}

// Runs a key's trials, timing compressed calls at `compressed` seconds and plain ones at `plain`.
void runTrials(Tuner& tuner, const TuneKey& key, double compressed, double plain) {
  for (int i = 0; i < 2 * Tuner::kTrialPairs; ++i) {
    const Tuner::Call call = tuner.next(key);
    ASSERT_FALSE(call.settling);
    if (call.timed)
      tuner.record(key, call.path,
                   std::make_unique<FixedStopwatch>(call.path == Path::Plain ? plain : compressed));
  }
}

TEST(Tuner, TrialsAlternateFromCompressedAndTheFirstPairIsNotTimed) {
  Tuner tuner;
  const TuneKey key = keyOf(1 << 20);
  for (int i = 0; i < 2 * Tuner::kTrialPairs; ++i) {
    const Tuner::Call call = tuner.next(key);
    EXPECT_EQ(call.path, i % 2 == 0 ? Path::Compressed : Path::Plain) << "call " << i;
    EXPECT_EQ(call.timed, i >= 2) << "call " << i;
    EXPECT_FALSE(call.decided);
    EXPECT_FALSE(call.settling);
  }
  // The next call must settle first, and asking again without settling does not move on.
  EXPECT_TRUE(tuner.next(key).settling);
  EXPECT_TRUE(tuner.next(key).settling);
}

TEST(Tuner, AKeyTakesThePairsOfTrialsAskedAtItsFirstCall) {
  Tuner tuner;
  const TuneKey key = keyOf(1 << 20);
  constexpr int kPairs = 5;
  int timed[2] = {0, 0};
  for (int i = 0; i < 2 * kPairs; ++i) {
    const Tuner::Call call = tuner.next(key, kPairs);
    EXPECT_FALSE(call.settling) << "call " << i;
    EXPECT_EQ(call.path, i % 2 == 0 ? Path::Compressed : Path::Plain) << "call " << i;
    if (call.timed) {
      ++timed[static_cast<int>(call.path)];
      tuner.record(key, call.path,
                   std::make_unique<FixedStopwatch>(call.path == Path::Plain ? 2 : 1));
    }
  }
  EXPECT_EQ(timed[0], kPairs - 1);
  EXPECT_EQ(timed[1], kPairs - 1);
  EXPECT_TRUE(tuner.next(key, kPairs).settling);
  tuner.settle(key, {tuner.measured(key)});
  EXPECT_EQ(tuner.next(key, kPairs).path, Path::Compressed);
  EXPECT_ANY_THROW(tuner.next(keyOf(1 << 22), 1)) << "one pair is only the untimed warm-up";
}

TEST(Tuner, KindsBelowTwoMiBTakeMorePairsOfTrials) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  EXPECT_EQ(Tuner::trialPairsFor(keyOf(1)), Tuner::kSmallKindTrialPairs);
  EXPECT_EQ(Tuner::trialPairsFor(keyOf(2 * kMiB - 1)), Tuner::kSmallKindTrialPairs);
  EXPECT_EQ(Tuner::trialPairsFor(keyOf(2 * kMiB)), Tuner::kTrialPairs);
  EXPECT_EQ(Tuner::trialPairsFor(keyOf(uint64_t{1} << 30)), Tuner::kTrialPairs);
  EXPECT_GT(Tuner::kSmallKindTrialPairs, Tuner::kTrialPairs);
}

// Why small kinds take more trials: the verdict keeps each path's fastest trial, so a slower
// codec wins where every timed plain trial of a rank was slowed. Two plain trials slowed in a
// row (the socket's noise on calls of tens of microseconds) settle a kind of kTrialPairs on the
// codec; a small kind's later plain trials keep it on plain data.
TEST(Tuner, TwoSlowedPlainTrialsNoLongerSettleASmallKindOnTheCodec) {
  auto settleWithTwoSlowed = [](int pairs) {
    Tuner tuner;
    const TuneKey key = keyOf(4096);
    int plainTrials = 0;
    for (int i = 0; i < 2 * pairs; ++i) {
      const Tuner::Call call = tuner.next(key, pairs);
      if (!call.timed) continue;
      // The codec takes 100 us; plain data 65 us, or 160 us in its first two timed trials.
      const bool slowed = call.path == Path::Plain && ++plainTrials <= 2;
      const double seconds = call.path == Path::Compressed ? 100e-6 : slowed ? 160e-6 : 65e-6;
      tuner.record(key, call.path, std::make_unique<FixedStopwatch>(seconds));
    }
    EXPECT_TRUE(tuner.next(key, pairs).settling);
    tuner.settle(key, {tuner.measured(key)});
    return tuner.next(key, pairs).path;
  };
  EXPECT_EQ(settleWithTwoSlowed(Tuner::kTrialPairs), Path::Compressed);
  EXPECT_EQ(settleWithTwoSlowed(Tuner::trialPairsFor(keyOf(4096))), Path::Plain);
}

TEST(Tuner, MeasuredKeepsEachPathsFastestTrial) {
  Tuner tuner;
  const TuneKey key = keyOf(1 << 20);
  tuner.next(key), tuner.next(key);                 // the warm-up pair
  const double times[] = {5e-3, 2e-3, 4e-3, 3e-3};  // compressed, plain, compressed, plain
  for (double t : times) {
    const Tuner::Call call = tuner.next(key);
    tuner.record(key, call.path, std::make_unique<FixedStopwatch>(t));
  }
  const TrialTimes m = tuner.measured(key);
  EXPECT_DOUBLE_EQ(m.compressed, 4e-3);
  EXPECT_DOUBLE_EQ(m.plain, 2e-3);
}

TEST(Tuner, SettledKeyKeepsItsPathForEveryLaterCall) {
  Tuner tuner;
  const TuneKey fast = keyOf(64 << 20), slow = keyOf(64 << 10);
  runTrials(tuner, fast, 1e-3, 2e-3);
  runTrials(tuner, slow, 2e-5, 1e-5);
  tuner.settle(fast, {tuner.measured(fast)});
  tuner.settle(slow, {tuner.measured(slow)});
  for (int i = 0; i < 5; ++i) {
    const Tuner::Call f = tuner.next(fast), s = tuner.next(slow);
    EXPECT_TRUE(f.decided && s.decided);
    EXPECT_FALSE(f.timed || s.timed || f.settling || s.settling);
    EXPECT_EQ(f.path, Path::Compressed);
    EXPECT_EQ(s.path, Path::Plain);
  }
  EXPECT_EQ(tuner.settledOr(fast), Path::Compressed);
  EXPECT_EQ(tuner.settledOr(slow), Path::Plain);
}

// After kRetrialCalls settled calls a key goes on trial again (warm-up pair, timed pairs,
// settling), and the new verdict replaces the old one: a key settled plain on noisy first trials
// returns to compressed where that is faster now.
TEST(Tuner, ASettledKeyIsTriedAgainAfterItsRetrialCalls) {
  Tuner tuner;
  const TuneKey key = keyOf(16 << 20);
  runTrials(tuner, key, 3e-3, 2e-3);  // compressed slower at first
  tuner.settle(key, {tuner.measured(key)});
  for (int i = 0; i < Tuner::kRetrialCalls; ++i) {
    const Tuner::Call c = tuner.next(key);
    ASSERT_TRUE(c.decided) << "call " << i;
    ASSERT_EQ(c.path, Path::Plain);
  }
  const Tuner::Call first = tuner.next(key);
  EXPECT_FALSE(first.decided);
  EXPECT_EQ(first.path, Path::Compressed);  // the trials start over, compressed first
  EXPECT_FALSE(first.timed);                // with their warm-up pair
  EXPECT_EQ(tuner.next(key).path, Path::Plain);
  for (int i = 2; i < 2 * Tuner::kTrialPairs; ++i) {
    const Tuner::Call c = tuner.next(key);
    ASSERT_TRUE(c.timed);
    tuner.record(key, c.path,
                 std::make_unique<FixedStopwatch>(c.path == Path::Compressed ? 1e-3 : 2e-3));
  }
  EXPECT_TRUE(tuner.next(key).settling);
  tuner.settle(key, {tuner.measured(key)});
  const Tuner::Call after = tuner.next(key);
  EXPECT_TRUE(after.decided);
  EXPECT_EQ(after.path, Path::Compressed);  // only this retrial's times count
}

// nextSettled answers only a settled key's calls before its retrial, and counts them as next()
// does: a caller that takes it first and next() otherwise keeps the same schedule.
TEST(Tuner, NextSettledAnswersOnlyASettledKeyBeforeItsRetrial) {
  Tuner tuner;
  const TuneKey key = keyOf(16 << 20);
  Tuner::Call call;
  EXPECT_FALSE(tuner.nextSettled(key, &call));  // unknown
  for (int i = 0; i < 2 * Tuner::kTrialPairs; ++i) {
    ASSERT_FALSE(tuner.nextSettled(key, &call)) << "trial " << i;  // on trial
    const Tuner::Call c = tuner.next(key);
    if (c.timed)
      tuner.record(key, c.path,
                   std::make_unique<FixedStopwatch>(c.path == Path::Plain ? 1e-3 : 2e-3));
  }
  EXPECT_FALSE(tuner.nextSettled(key, &call));  // trials over, not yet settled
  EXPECT_TRUE(tuner.next(key).settling);
  tuner.settle(key, {tuner.measured(key)});
  for (int i = 0; i < Tuner::kRetrialCalls; ++i) {
    ASSERT_TRUE(tuner.nextSettled(key, &call)) << "call " << i;
    ASSERT_TRUE(call.decided);
    ASSERT_FALSE(call.timed || call.settling);
    ASSERT_EQ(call.path, Path::Plain);
  }
  EXPECT_FALSE(tuner.nextSettled(key, &call));  // due for its retrial: next() starts it
  const Tuner::Call retrial = tuner.next(key);
  EXPECT_FALSE(retrial.decided);
  EXPECT_EQ(retrial.path, Path::Compressed);
}

TEST(Tuner, KeysOfOtherSizesOpsAndPeersHaveTheirOwnTrials) {
  Tuner tuner;
  runTrials(tuner, keyOf(1 << 20), 1e-3, 2e-3);
  EXPECT_TRUE(tuner.next(keyOf(1 << 20)).settling);
  // Same octave: same key. Next octave, other op, other peer: fresh trials.
  EXPECT_TRUE(tuner.next(keyOf((1 << 20) + 4096)).settling);
  EXPECT_FALSE(tuner.next(keyOf(2 << 20)).settling);
  EXPECT_FALSE(tuner.next(keyOf(1 << 20, 2)).settling);
  TuneKey toPeer = keyOf(1 << 20);
  toPeer.peer = 1;
  EXPECT_FALSE(tuner.next(toPeer).settling);
}

TEST(Tuner, SizeClassesAreOctaves) {
  EXPECT_EQ(Tuner::sizeClass(0), 0u);
  EXPECT_EQ(Tuner::sizeClass(1), 1u);
  EXPECT_EQ(Tuner::sizeClass(4095), 12u);
  EXPECT_EQ(Tuner::sizeClass(4096), 13u);
  EXPECT_EQ(Tuner::sizeClass(8191), 13u);
}

TEST(Tuner, VerdictTakesTheSlowestRankAndWantsTheMargin) {
  using T = TrialTimes;
  // Compressed faster on every rank by 10%: compressed.
  EXPECT_EQ(Tuner::verdict({T{0.9, 1.0}, T{0.9, 1.0}}), Path::Compressed);
  // Faster by less than the margin: plain (exact, and no encode to pay).
  EXPECT_EQ(Tuner::verdict({T{0.98, 1.0}, T{0.98, 1.0}}), Path::Plain);
  // One rank's compressed call is slow: the collective waits for it, so plain.
  EXPECT_EQ(Tuner::verdict({T{0.5, 1.0}, T{1.2, 1.0}}), Path::Plain);
  // Plain slow on one rank only: compressed beats plain's slowest.
  EXPECT_EQ(Tuner::verdict({T{0.9, 1.0}, T{0.9, 2.0}}), Path::Compressed);
  // A path with no measurement loses; with neither measured, plain.
  const double none = std::numeric_limits<double>::infinity();
  EXPECT_EQ(Tuner::verdict({T{none, 1.0}}), Path::Plain);
  EXPECT_EQ(Tuner::verdict({T{1.0, none}}), Path::Compressed);
  EXPECT_EQ(Tuner::verdict({T{none, none}}), Path::Plain);
  EXPECT_EQ(Tuner::verdict({T{std::numeric_limits<double>::quiet_NaN(), 1.0}}), Path::Plain);
}

TEST(Tuner, KeysBeyondTheTableRunCompressedUntried) {
  Tuner tuner;
  for (size_t i = 0; i < Tuner::kMaxKeys; ++i) {
    TuneKey k = keyOf(1 << 20);
    k.configHash = i;
    EXPECT_FALSE(tuner.next(k).decided);
  }
  TuneKey extra = keyOf(1 << 20);
  extra.configHash = Tuner::kMaxKeys;
  const Tuner::Call call = tuner.next(extra);
  EXPECT_TRUE(call.decided);
  EXPECT_FALSE(call.timed);
  EXPECT_EQ(call.path, Path::Compressed);
}

TEST(Tuner, RecordingOrSettlingAnUnknownKeyIsAnInternalError) {
  Tuner tuner;
  EXPECT_ANY_THROW(tuner.record(keyOf(1), Path::Plain, std::make_unique<FixedStopwatch>(1)));
  EXPECT_ANY_THROW(tuner.settle(keyOf(1), {}));
  EXPECT_EQ(tuner.settledOr(keyOf(1)), Path::Compressed);
}

TEST(Stopwatch, HostClockMeasuresTheSpanBetweenStartAndStop) {
  auto watch = makeStopwatch(MemoryKind::Host);
  watch->start(nullptr);
  volatile double sink = 0;
  for (int i = 0; i < 100000; ++i) sink = sink + i;
  watch->stop(nullptr);
  const double s = watch->seconds();
  EXPECT_GT(s, 0.0);
  EXPECT_LT(s, 10.0);
}

}  // namespace
}  // namespace cclz
