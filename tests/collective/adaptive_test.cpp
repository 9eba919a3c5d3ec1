// Adaptive calls (cclzCommConfig_t.adaptive, tune/tuner.h) on loopback ranks: the first calls of
// a kind alternate the codec and plain data, every rank settles alike, each call's output is
// right whichever path it took, and what must stay compressed does.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "coll_cases.h"
#include "coll_runner.h"
#include "common/error.h"
#include "forwarding_transport.h"
#include "loopback_ranks.h"

namespace cclz::test {
namespace {

constexpr int kTrialCalls = 2 * Tuner::kSmallKindTrialPairs;  // the cases are small kinds

CommSettings adaptiveSettings() {
  CommSettings s = testSettings();
  s.adaptive = true;
  return s;
}

struct Seen {
  cclzPath_t path = cclzPathCompressed;
  int decided = -1;
};

// Runs case c `calls` times on n adaptive loopback ranks; checks every output; returns what
// cclzCommGetLastPath said after each call, per rank.
std::vector<std::vector<Seen>> runRepeated(const CollCase& c, int n, int calls,
                                           const CommSettings& settings = adaptiveSettings()) {
  std::vector<std::vector<Seen>> seen(n, std::vector<Seen>(calls));
  std::vector<std::vector<std::string>> wrong(n, std::vector<std::string>(calls));
  std::vector<std::vector<std::vector<uint8_t>>> outs(n, std::vector<std::vector<uint8_t>>(calls));
  onRanks(
      n,
      [&](cclzComm_t comm, int r) {
        for (int i = 0; i < calls; ++i) {
          const cclzResult_t result = runCase(comm, c, n, r, &outs[r][i]);
          if (result != cclzSuccess) {
            wrong[r][i] = std::string("failed: ") + cclzGetLastError(comm);
            return;
          }
          wrong[r][i] = checkOutput(c, n, r, outs[r][i]);
          EXPECT_EQ(cclzCommGetLastPath(comm, &seen[r][i].path, &seen[r][i].decided), cclzSuccess);
        }
      },
      std::chrono::seconds(60), nullptr, settings);
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < calls; ++i) {
      EXPECT_EQ(wrong[r][i], "") << "rank " << r << " call " << i;
      if (c.op == Coll::AllReduce) {
        EXPECT_EQ(outs[r][i], outs[0][i]) << "rank " << r << " call " << i;
      }
    }
  return seen;
}

TEST(LoopbackAdaptive, TrialsAlternateThenEveryRankSettlesOnTheSamePath) {
  const CollCase c{Coll::AllGather, cclzBfloat16, codecNamed("lossless"), 20000, cclzSum};
  const int n = 3, calls = kTrialCalls + 3;
  const auto seen = runRepeated(c, n, calls);
  for (int r = 0; r < n; ++r) {
    for (int i = 0; i < kTrialCalls; ++i) {
      EXPECT_EQ(seen[r][i].decided, 0) << "rank " << r << " call " << i;
      EXPECT_EQ(seen[r][i].path, i % 2 == 0 ? cclzPathCompressed : cclzPathPlain)
          << "rank " << r << " call " << i;
    }
    for (int i = kTrialCalls; i < calls; ++i) {
      EXPECT_EQ(seen[r][i].decided, 1) << "rank " << r << " call " << i;
      EXPECT_EQ(seen[r][i].path, seen[0][kTrialCalls].path) << "rank " << r << " call " << i;
    }
  }
  // Which path wins is a measurement, not asserted here: on a loaded machine (CI runs the tests
  // in parallel on two cores) a descheduled rank thread can make either path's trials slow. The
  // verdict on given times is tested with fake stopwatches in tests/tune/tuner_test.cpp.
}

// Counts the 8-byte meetings an adaptive communicator holds before its timed trials: all-gathers
// of 8 bytes a rank, and 8-byte pair exchanges (any group whose sends are all 8 bytes).
class MeetingCounter final : public ForwardingTransport {
 public:
  MeetingCounter(std::unique_ptr<Transport> inner, std::atomic<int>* meetings)
      : ForwardingTransport(std::move(inner)), meetings_(meetings) {}
  void groupStart(cclzStream_t s) override {
    sends_ = small_ = 0;
    ForwardingTransport::groupStart(s);
  }
  void send(const void* buf, uint64_t bytes, int peer) override {
    ++sends_;
    if (bytes == 8) ++small_;
    ForwardingTransport::send(buf, bytes, peer);
  }
  void groupEnd() override {
    if (sends_ && sends_ == small_) ++*meetings_;
    ForwardingTransport::groupEnd();
  }
  void allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t s) override {
    if (bytes == 8) ++*meetings_;
    ForwardingTransport::allGather(send, recv, bytes, s);
  }

 private:
  std::atomic<int>* meetings_;
  int sends_ = 0, small_ = 0;
};

// Each timed trial starts where every rank has arrived: one 8-byte meeting before each (the
// trials after the first pair), none before the untimed ones or once the kind is settled.
// After Tuner::kRetrialCalls settled calls the kind is on trial again, on every rank at the same
// call, and settles again alike; every output stays right.
TEST(LoopbackAdaptive, AKindIsTriedAgainOnEveryRankAtTheSameCall) {
  const CollCase c{Coll::AllGather, cclzBfloat16, codecNamed("lossless"), 64, cclzSum};
  const int n = 2, retrial = kTrialCalls + Tuner::kRetrialCalls;
  const int calls = retrial + kTrialCalls + 2;
  const auto seen = runRepeated(c, n, calls);
  for (int r = 0; r < n; ++r)
    for (int i = kTrialCalls; i < calls; ++i) {
      const bool onTrial = i >= retrial && i < retrial + kTrialCalls;
      ASSERT_EQ(seen[r][i].decided, onTrial ? 0 : 1) << "rank " << r << " call " << i;
      if (onTrial)
        EXPECT_EQ(seen[r][i].path, (i - retrial) % 2 == 0 ? cclzPathCompressed : cclzPathPlain)
            << "rank " << r << " call " << i;
      else
        EXPECT_EQ(seen[r][i].path, seen[0][i].path) << "rank " << r << " call " << i;
    }
}

TEST(LoopbackAdaptive, TimedTrialsStartWhereEveryRankHasArrived) {
  const CollCase c{Coll::AllGather, cclzBfloat16, codecNamed("fp8"), 20000, cclzSum};
  const int n = 3;
  std::atomic<int> meetings{0};
  onRanks(
      n,
      [&](cclzComm_t comm, int r) {
        for (int i = 0; i < kTrialCalls + 3; ++i) {
          std::vector<uint8_t> out;
          ASSERT_EQ(runCase(comm, c, n, r, &out), cclzSuccess) << cclzGetLastError(comm);
        }
      },
      std::chrono::seconds(60),
      [&](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
        return std::make_unique<MeetingCounter>(std::move(t), &meetings);
      },
      adaptiveSettings());
  // Every rank counts its own meetings: n per meeting; the settling exchange (16 bytes) is not one.
  EXPECT_EQ(meetings.load(), n * (kTrialCalls - 2));
}

TEST(LoopbackAdaptive, LossyReductionsStayRightAndIdenticalAcrossRanksOnBothPaths) {
  for (const char* codec : {"fp8", "qgrad4"}) {
    SCOPED_TRACE(codec);
    const CollCase c{Coll::AllReduce, cclzFloat32, codecNamed(codec), 5003, cclzAvg};
    runRepeated(c, 3, kTrialCalls + 2);
  }
}

// Send/recv: each pair of a ring settles its own kind (the sender's send and its receiver's
// recv), so two ranks' paths may differ, but a send and the recv it meets never do.
TEST(LoopbackAdaptive, SendRecvPairsSettleAlike) {
  const int n = 3, calls = kTrialCalls + 2;
  const uint64_t count = 3000;
  // sent[r][i]: the path of rank r's send to its next rank on call i; received[r][i]: of rank
  // r's recv from its previous rank.
  std::vector<std::vector<Seen>> sent(n, std::vector<Seen>(calls)), received = sent;
  onRanks(
      n,
      [&](cclzComm_t comm, int r) {
        cclzCodecConfig_t config = codecNamed("fp8").config();
        std::vector<float> in(count, 0.5f + static_cast<float>(r)), out(count);
        for (int i = 0; i < calls; ++i) {
          auto send = [&] {
            ASSERT_EQ(cclzSend(in.data(), count, cclzFloat32, ringNext(r, n), comm, &config,
                               nullptr),
                      cclzSuccess)
                << cclzGetLastError(comm);
            cclzCommGetLastPath(comm, &sent[r][i].path, &sent[r][i].decided);
          };
          auto recv = [&] {
            ASSERT_EQ(cclzRecv(out.data(), count, cclzFloat32, ringPrev(r, n), comm, &config,
                               nullptr),
                      cclzSuccess)
                << cclzGetLastError(comm);
            cclzCommGetLastPath(comm, &received[r][i].path, &received[r][i].decided);
            // 0.5 + rank is exact in fp8 (and plain), whichever path ran.
            EXPECT_EQ(out[count - 1], 0.5f + static_cast<float>(ringPrev(r, n)));
          };
          if (r % 2 == 0) send(), recv();
          else recv(), send();
        }
      },
      std::chrono::seconds(60), nullptr, adaptiveSettings());
  for (int r = 0; r < n; ++r)
    for (int i = 0; i < calls; ++i) {
      const Seen& s = sent[r][i];
      const Seen& got = received[ringNext(r, n)][i];
      EXPECT_EQ(s.decided, i >= kTrialCalls ? 1 : 0) << "rank " << r << " call " << i;
      EXPECT_EQ(got.decided, s.decided) << "rank " << r << " call " << i;
      EXPECT_EQ(got.path, s.path) << "rank " << r << "'s send and its receiver's recv, call " << i;
    }
}

TEST(LoopbackAdaptive, KindsSettleApart) {
  // Two sizes an octave apart, interleaved: each has its own trials.
  const CollCase small{Coll::AllToAll, cclzBfloat16, codecNamed("fp8"), 600, cclzSum};
  const CollCase large{Coll::AllToAll, cclzBfloat16, codecNamed("fp8"), 1300, cclzSum};
  std::vector<std::vector<int>> decided(2);
  onRanks(
      2,
      [&](cclzComm_t comm, int r) {
        for (int i = 0; i < kTrialCalls; ++i)
          for (const CollCase* c : {&small, &large}) {
            std::vector<uint8_t> out;
            ASSERT_EQ(runCase(comm, *c, 2, r, &out), cclzSuccess) << cclzGetLastError(comm);
            EXPECT_EQ(checkOutput(*c, 2, r, out), "");
            int d = -1;
            cclzCommGetLastPath(comm, nullptr, &d);
            decided[r].push_back(d);
          }
      },
      std::chrono::seconds(60), nullptr, adaptiveSettings());
  for (int r = 0; r < 2; ++r)
    for (int d : decided[r]) EXPECT_EQ(d, 0) << "a kind settled before its own trials were done";
}

TEST(LoopbackAdaptive, OffRunsEveryCallThroughTheCodec) {
  const CollCase c{Coll::AllGather, cclzBfloat16, codecNamed("lossless"), 20000, cclzSum};
  const auto seen = runRepeated(c, 2, kTrialCalls + 2, testSettings());
  for (const auto& rank : seen)
    for (const Seen& s : rank) {
      EXPECT_EQ(s.path, cclzPathCompressed);
      EXPECT_EQ(s.decided, 1);
    }
}

TEST(LoopbackAdaptive, TheNoneCodecIsNotTried) {
  const CollCase none{Coll::AllGather, cclzFloat32, codecNamed("none"), 2000, cclzSum};
  for (const auto& rank : runRepeated(none, 2, kTrialCalls + 1))
    for (const Seen& s : rank) EXPECT_EQ(s.decided, 1);
}

// One rank's view of one call with error feedback.
struct FeedbackCall {
  cclzPath_t path = cclzPathCompressed;
  std::vector<float> before, after, out;  // the residual before and after; the output
};

// Calls with error feedback (qgrad int4, fp32) on adaptive loopback ranks: their trials take
// both paths. A plain call adds the residual into the data and zeroes it, so its output is the
// exact sum of every rank's data plus residual. A compressed call keeps what it drops in the
// residual: output plus the residuals after equals data plus the residuals before, to fp32
// rounding. Either way nothing is lost.
void expectFeedbackKeptOnBothPaths(Coll op) {
  constexpr int n = 2;
  const uint64_t recvCount = 4096;
  const uint64_t sendCount = op == Coll::ReduceScatter ? recvCount * n : recvCount;
  const uint64_t outCount = op == Coll::ReduceScatter ? recvCount : sendCount;
  const int calls = kTrialCalls + 3;
  std::vector<std::vector<float>> in(n, std::vector<float>(sendCount));
  for (int r = 0; r < n; ++r)
    for (uint64_t i = 0; i < sendCount; ++i)
      in[r][i] = static_cast<float>(static_cast<int>((i * 37 + r * 11) % 101) - 50) / 64.0f;
  std::vector<std::vector<FeedbackCall>> seen(n, std::vector<FeedbackCall>(calls));
  onRanks(
      n,
      [&](cclzComm_t comm, int r) {
        cclzFeedback_t fb = nullptr;
        ASSERT_EQ(cclzFeedbackCreate(&fb, sendCount, cclzMemoryHost), cclzSuccess);
        float* residual = nullptr;  // read through, not asked for again: asking marks it written
        ASSERT_EQ(cclzFeedbackGetState(fb, &residual, nullptr, nullptr), cclzSuccess);
        cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
        config.codec = cclzCodecQgrad;
        config.bits = 4;
        for (int i = 0; i < calls; ++i) {
          FeedbackCall& c = seen[r][i];
          c.before.assign(residual, residual + sendCount);
          c.out.assign(outCount, -1.0f);
          const cclzResult_t result =
              op == Coll::ReduceScatter
                  ? cclzReduceScatterFeedback(in[r].data(), c.out.data(), recvCount, cclzFloat32,
                                              cclzSum, comm, &config, fb, nullptr)
                  : cclzAllReduceFeedback(in[r].data(), c.out.data(), sendCount, cclzFloat32,
                                          cclzSum, comm, &config, fb, nullptr);
          ASSERT_EQ(result, cclzSuccess) << cclzGetLastError(comm);
          c.after.assign(residual, residual + sendCount);
          int decided = 0;
          ASSERT_EQ(cclzCommGetLastPath(comm, &c.path, &decided), cclzSuccess);
        }
        uint64_t step = 0;
        ASSERT_EQ(cclzFeedbackGetState(fb, nullptr, nullptr, &step), cclzSuccess);
        EXPECT_EQ(step, static_cast<uint64_t>(calls));  // every call advances the step
        cclzFeedbackDestroy(fb);
      },
      std::chrono::seconds(60), nullptr, adaptiveSettings());
  int plain = 0, compressed = 0;
  for (int i = 0; i < calls; ++i) {
    const cclzPath_t path = seen[0][i].path;
    (path == cclzPathPlain ? plain : compressed)++;
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(seen[r][i].path, path) << "call " << i;
      if (path == cclzPathPlain) {
        EXPECT_EQ(seen[r][i].after, std::vector<float>(sendCount, 0.0f)) << "call " << i;
      }
    }
    for (int r = 0; r < n; ++r)
      for (uint64_t k = 0; k < outCount; ++k) {
        const uint64_t at = (op == Coll::ReduceScatter ? r * recvCount : 0) + k;
        float sent = 0, kept = 0;  // data plus residual before, over the ranks; residual after
        for (int q = 0; q < n; ++q) {
          sent += in[q][at] + seen[q][i].before[at];
          kept += seen[q][i].after[at];
        }
        const float got = seen[r][i].out[k];
        if (path == cclzPathPlain) {
          ASSERT_EQ(got, (in[0][at] + seen[0][i].before[at]) + (in[1][at] + seen[1][i].before[at]))
              << "call " << i << " rank " << r << " element " << k;
        } else {
          ASSERT_NEAR(got + kept, sent, 1e-5f)
              << "call " << i << " rank " << r << " element " << k;
        }
      }
  }
  EXPECT_GT(plain, 0);
  EXPECT_GT(compressed, 0);
}

TEST(LoopbackAdaptive, FeedbackAllReducesKeepTheResidualOnBothPaths) {
  expectFeedbackKeptOnBothPaths(Coll::AllReduce);
}
TEST(LoopbackAdaptive, FeedbackReduceScattersKeepTheResidualOnBothPaths) {
  expectFeedbackKeptOnBothPaths(Coll::ReduceScatter);
}

TEST(CommSettingsTest, AdaptiveFromTheEnvironmentAndTheConfig) {
  unsetenv("CCLZ_ADAPTIVE");
  EXPECT_TRUE(CommSettings::fromEnvironment().adaptive);  // on by default
  setenv("CCLZ_ADAPTIVE", "0", 1);
  CommSettings s = CommSettings::fromEnvironment();
  EXPECT_FALSE(s.adaptive);
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  EXPECT_EQ(config.adaptive, CCLZ_ADAPTIVE_DEFAULT);
  s.apply(&config);  // the default keeps what the environment said
  EXPECT_FALSE(s.adaptive);
  config.adaptive = 1;
  s.apply(&config);
  EXPECT_TRUE(s.adaptive);
  config.adaptive = 0;
  s.apply(&config);
  EXPECT_FALSE(s.adaptive);
  config.adaptive = 2;
  try {
    s.apply(&config);
    ADD_FAILURE() << "adaptive = 2 was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclzInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("adaptive"), std::string::npos) << e.what();
  }
  expectEnvironmentRefuses("CCLZ_ADAPTIVE", "yes");
}

TEST(LoopbackAdaptive, GetLastPathRejectsANullComm) {
  cclzPath_t path;
  EXPECT_EQ(cclzCommGetLastPath(nullptr, &path, nullptr), cclzInvalidArgument);
}

}  // namespace
}  // namespace cclz::test
