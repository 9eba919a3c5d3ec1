// The collectives on 1-4 ranks in one process: each rank a thread, the loopback transport between
// them, the host codecs, the C API on top. Every op x dtype x codec x count (coll_cases.h) is
// checked against the reference on every rank; all-reduce outputs must be bit-identical across
// ranks. Also: a rank with different arguments or rejected arguments makes every rank fail (and
// nobody hangs), a corrupted frame on the wire is reported by its receiver, error feedback keeps
// what it did not send, variable-size frames over a transport that must be told sizes (as
// NCCL must) announce them ahead (LoopbackExactSizes), and pieces keep the caller's fp8 rows
// whole (LoopbackPieces).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cclz/cclz.h"
#include "coll_cases.h"
#include "coll_runner.h"
#include "forwarding_transport.h"
#include "loopback_ranks.h"
#include "collective/communicator.h"
#include "collective/pipeline.h"
#include "common/error.h"
#include "support/data.h"
#include "transport/loopback.h"
#ifdef CCLZ_HAVE_NCCL
#include "transport/nccl/nccl_transport.h"
#endif

namespace cclz::test {
namespace {

class LoopbackCollective : public ::testing::TestWithParam<CollCase> {};

TEST_P(LoopbackCollective, MatchesReferenceOnEveryRank) {
  const CollCase& c = GetParam();
  for (int n = 1; n <= 4; ++n) {
    if (c.op == Coll::SendRecv && n < 2) continue;
    SCOPED_TRACE(std::to_string(n) + " ranks");
    std::vector<std::vector<uint8_t>> outs(n);
    std::vector<cclzResult_t> results(n);
    std::vector<std::string> errors(n);
    onRanks(n, [&](cclzComm_t comm, int r) {
      results[r] = runCase(comm, c, n, r, &outs[r]);
      if (results[r] != cclzSuccess) errors[r] = cclzGetLastError(comm);
    });
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(results[r], cclzSuccess) << "rank " << r << ": " << errors[r];
      EXPECT_EQ(checkOutput(c, n, r, outs[r]), "") << "rank " << r;
    }
    if (c.op == Coll::AllReduce) {
      for (int r = 1; r < n; ++r)
        EXPECT_EQ(outs[r], outs[0]) << "all-reduce: rank " << r << " differs from rank 0";
    }
  }
}

// The loopback as NCCL sees sizes: a receive must name the exact byte count that arrives
// (learnsReceivedSize false), so the collectives announce variable frame sizes one piece ahead
// and fetch them (announceSizes, runPieces) as they do on the device. A receive that gets another
// size than it named fails the call.
class ExactSizeTransport final : public ForwardingTransport {
 public:
  explicit ExactSizeTransport(std::unique_ptr<Transport> inner)
      : ForwardingTransport(std::move(inner)) {}
  const char* name() const override { return "exact-size loopback"; }
  bool learnsReceivedSize() const override { return false; }
  void groupStart(cclzStream_t s) override {
    named_.clear();
    got_.clear();
    ForwardingTransport::groupStart(s);
  }
  void recv(void* buf, uint64_t capacity, int peer, uint64_t*) override {
    named_.push_back(capacity);
    got_.push_back(0);
    ForwardingTransport::recv(buf, capacity, peer, &got_.back());
  }
  void groupEnd() override {
    ForwardingTransport::groupEnd();
    for (size_t i = 0; i < named_.size(); ++i)
      CCLZ_REQUIRE(got_[i] == named_[i], cclzInternalError,
                   "a receive named " + std::to_string(named_[i]) + " bytes and got " +
                       std::to_string(got_[i]));
  }

 private:
  std::vector<uint64_t> named_;
  std::deque<uint64_t> got_;  // stable addresses while the group is open
};

INSTANTIATE_TEST_SUITE_P(Cases, LoopbackCollective, ::testing::ValuesIn(allCases()),
                         [](const auto& info) { return info.param.name(); });

// Variable-size frames with sizes announced ahead, on 2-4 ranks: every lossless case.
class LoopbackExactSizes : public ::testing::TestWithParam<CollCase> {};

TEST_P(LoopbackExactSizes, MatchesReferenceOnEveryRank) {
  const CollCase& c = GetParam();
  const TransportWrap exact = [](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
    return std::make_unique<ExactSizeTransport>(std::move(t));
  };
  for (int n = 2; n <= 4; ++n) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    std::vector<std::vector<uint8_t>> outs(n);
    std::vector<cclzResult_t> results(n);
    std::vector<std::string> errors(n);
    onRanks(
        n,
        [&](cclzComm_t comm, int r) {
          results[r] = runCase(comm, c, n, r, &outs[r]);
          if (results[r] != cclzSuccess) errors[r] = cclzGetLastError(comm);
        },
        std::chrono::seconds(20), exact);
    for (int r = 0; r < n; ++r) {
      ASSERT_EQ(results[r], cclzSuccess) << "rank " << r << ": " << errors[r];
      EXPECT_EQ(checkOutput(c, n, r, outs[r]), "") << "rank " << r;
    }
  }
}

std::vector<CollCase> losslessCases() {
  std::vector<CollCase> cases;
  for (const CollCase& c : allCases())
    if (c.codec.codec == cclzCodecLossless) cases.push_back(c);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Lossless, LoopbackExactSizes, ::testing::ValuesIn(losslessCases()),
                         [](const auto& info) { return info.param.name(); });

// One rank passes a different count, codec or dtype: every rank fails with cclzInvalidUsage, and
// the message names the field.
struct Mismatch {
  const char* label;
  const char* field;
  std::function<void(int rank, uint64_t* count, cclzCodecConfig_t* config, cclzDataType_t*)> tweak;
};

class LoopbackMismatch : public ::testing::TestWithParam<Mismatch> {};

TEST_P(LoopbackMismatch, FailsOnEveryRank) {
  const Mismatch& m = GetParam();
  const int n = 3;
  std::vector<cclzResult_t> results(n);
  std::vector<std::string> errors(n);
  onRanks(n, [&](cclzComm_t comm, int r) {
    uint64_t count = 1000;
    cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
    cclzDataType_t dtype = cclzBfloat16;
    m.tweak(r, &count, &config, &dtype);
    std::vector<uint8_t> in(count * 4 * n, 0x3c), out(count * 4 * n);
    results[r] = cclzAllReduce(in.data(), out.data(), count, dtype, cclzSum, comm, &config,
                               nullptr);
    errors[r] = cclzGetLastError(comm);
  });
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[r], cclzInvalidUsage) << "rank " << r << ": " << errors[r];
    EXPECT_NE(errors[r].find(m.field), std::string::npos) << "rank " << r << ": " << errors[r];
  }
  EXPECT_EQ(errors[0], errors[1]);  // one verdict, the same everywhere
}

INSTANTIATE_TEST_SUITE_P(
    Fields, LoopbackMismatch,
    ::testing::Values(
        Mismatch{"count", "count",
                 [](int r, uint64_t* count, cclzCodecConfig_t*, cclzDataType_t*) {
                   if (r == 2) *count += 1;
                 }},
        Mismatch{"codec", "codec",
                 [](int r, uint64_t*, cclzCodecConfig_t* c, cclzDataType_t*) {
                   if (r == 1) c->codec = cclzCodecNone;
                 }},
        Mismatch{"dtype", "dtype",
                 [](int r, uint64_t*, cclzCodecConfig_t*, cclzDataType_t* d) {
                   if (r == 0) *d = cclzFloat32;
                 }},
        Mismatch{"config", "codec configuration",
                 [](int r, uint64_t*, cclzCodecConfig_t* c, cclzDataType_t*) {
                   if (r == 1) c->chunkElems = 1024;
                 }}),
    [](const auto& info) { return std::string(info.param.label); });

// A rank that rejects its own arguments (here a NULL buffer) fails with its own error; its peers
// fail with cclzInvalidUsage naming it, instead of waiting for it.
TEST(LoopbackErrors, RejectedArgumentsFailEveryRank) {
  const int n = 3;
  std::vector<cclzResult_t> results(n);
  std::vector<std::string> errors(n);
  onRanks(n, [&](cclzComm_t comm, int r) {
    std::vector<uint8_t> in(4000), out(4000 * n);
    const cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
    results[r] = cclzAllGather(r == 1 ? nullptr : in.data(), out.data(), 1000, cclzBfloat16, comm,
                               &config, nullptr);
    errors[r] = cclzGetLastError(comm);
  });
  EXPECT_EQ(results[1], cclzInvalidArgument) << errors[1];
  EXPECT_NE(errors[1].find("sendbuff is NULL"), std::string::npos) << errors[1];
  for (int r : {0, 2}) {
    EXPECT_EQ(results[r], cclzInvalidUsage) << errors[r];
    EXPECT_NE(errors[r].find("rank 1 rejected"), std::string::npos) << errors[r];
  }
}

TEST(LoopbackErrors, SendAgainstSendFails) {
  std::vector<cclzResult_t> results(2);
  std::vector<std::string> errors(2);
  onRanks(2, [&](cclzComm_t comm, int r) {
    std::vector<uint8_t> buf(2000, 0x11);
    results[r] = cclzSend(buf.data(), 1000, cclzBfloat16, 1 - r, comm, nullptr, nullptr);
    errors[r] = cclzGetLastError(comm);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(results[r], cclzInvalidUsage) << errors[r];
    EXPECT_NE(errors[r].find("a send must meet a recv"), std::string::npos) << errors[r];
  }
}

TEST(LoopbackErrors, ArgumentsRejectedLocally) {
  onRanks(2, [&](cclzComm_t comm, int r) {
    std::vector<uint8_t> buf(64);
    EXPECT_EQ(cclzSend(buf.data(), 4, cclzBfloat16, r, comm, nullptr, nullptr),
              cclzInvalidArgument);  // to itself: no exchange, no peer to wait for
    EXPECT_EQ(cclzSend(buf.data(), 4, cclzBfloat16, 7, comm, nullptr, nullptr),
              cclzInvalidArgument);
    int size = 0, rank = -1;
    EXPECT_EQ(cclzCommCount(comm, &size), cclzSuccess);
    EXPECT_EQ(cclzCommUserRank(comm, &rank), cclzSuccess);
    EXPECT_EQ(size, 2);
    EXPECT_EQ(rank, r);
    size_t piece = 0;  // these communicators were made with pieces of kTestPieceBytes
    EXPECT_EQ(cclzCommGetPieceBytes(comm, size_t{1} << 30, &piece), cclzSuccess);
    EXPECT_EQ(piece, kTestPieceBytes);
    EXPECT_EQ(cclzCommGetPieceBytes(comm, 1, nullptr), cclzInvalidArgument);
  });
  EXPECT_EQ(cclzAllGather(nullptr, nullptr, 0, cclzBfloat16, nullptr, nullptr, nullptr),
            cclzInvalidArgument);
}

// Unsupported on both ranks alike: a reduction of int32, qgrad of fp16: every rank fails with
// its own (identical) error.
TEST(LoopbackErrors, UnsupportedDtypes) {
  onRanks(2, [&](cclzComm_t comm, int) {
    std::vector<uint8_t> in(800), out(800);
    EXPECT_EQ(cclzAllReduce(in.data(), out.data(), 100, cclzInt32, cclzSum, comm, nullptr,
                            nullptr),
              cclzNotSupported)
        << cclzGetLastError(comm);
    cclzCodecConfig_t q = CCLZ_CODEC_CONFIG_INITIALIZER;
    q.codec = cclzCodecQgrad;
    EXPECT_EQ(cclzAllGather(in.data(), out.data(), 100, cclzFloat16, comm, &q, nullptr),
              cclzNotSupported)
        << cclzGetLastError(comm);
  });
}

// Flips one header byte of every frame rank 0 sends rank 1 (descriptors and sizes are left
// alone): rank 1 reports cclzCorruptFrame and leaves that output untouched; everything else
// arrives, and the other ranks succeed without waiting on anyone.
class CorruptingTransport final : public ForwardingTransport {
 public:
  explicit CorruptingTransport(std::unique_ptr<Transport> inner)
      : ForwardingTransport(std::move(inner)) {}
  const char* name() const override { return "corrupting"; }
  void groupStart(cclzStream_t s) override {
    copies_.clear();
    ForwardingTransport::groupStart(s);
  }
  void send(const void* buf, uint64_t bytes, int peer) override {
    if (rank() == 0 && peer == 1 && bytes > 64) {
      const auto* p = static_cast<const uint8_t*>(buf);
      copies_.emplace_back(p, p + bytes);
      copies_.back()[9] ^= 0x40;  // the element count: the checksum no longer matches
      buf = copies_.back().data();
    }
    ForwardingTransport::send(buf, bytes, peer);
  }
  // Point to point, so that only rank 1's copy of rank 0's part is corrupted.
  void allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t s) override {
    groupStart(s);
    for (int r = 0; r < size(); ++r) {
      this->send(send, bytes, r);
      this->recv(static_cast<uint8_t*>(recv) + r * bytes, bytes, r, nullptr);
    }
    groupEnd();
  }

 private:
  std::vector<std::vector<uint8_t>> copies_;
};

TEST(LoopbackErrors, CorruptFrameIsReportedByItsReceiver) {
  const int n = 3;
  const CollCase c{Coll::AllGather, cclzBfloat16, codecChoices()[1], 2500, cclzSum};
  auto hub = std::make_shared<LoopbackHub>(n, std::chrono::seconds(20));
  std::vector<std::vector<uint8_t>> outs(n);
  std::vector<cclzResult_t> results(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cclzComm_t comm = loopbackComm(hub, r, [](std::unique_ptr<Transport> t) {
        return std::make_unique<CorruptingTransport>(std::move(t));
      });
      results[r] = runCase(comm, c, n, r, &outs[r]);
      errors[r] = cclzGetLastError(comm);
      cclzCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0], cclzSuccess) << errors[0];
  EXPECT_EQ(results[2], cclzSuccess) << errors[2];
  EXPECT_EQ(checkOutput(c, n, 0, outs[0]), "");
  EXPECT_EQ(checkOutput(c, n, 2, outs[2]), "");
  EXPECT_EQ(results[1], cclzCorruptFrame) << errors[1];
  EXPECT_NE(errors[1].find("checksum"), std::string::npos) << errors[1];
  // Rank 1: rank 0's part is as it was before the call (0xA5, runCase's fill); the rest arrived.
  const size_t part = c.count * 2;
  EXPECT_EQ(std::vector<uint8_t>(outs[1].begin(), outs[1].begin() + part),
            std::vector<uint8_t>(part, 0xA5));
  const std::vector<uint8_t> want1 = makeInput(c, n, 1), want2 = makeInput(c, n, 2);
  EXPECT_TRUE(std::equal(want1.begin(), want1.end(), outs[1].begin() + part));
  EXPECT_TRUE(std::equal(want2.begin(), want2.end(), outs[1].begin() + 2 * part));
}

// Error feedback through the collectives: what every rank meant to send (gradient + old
// residual - new residual) adds up to what arrived, step after step. For all-reduce this holds
// only because the owner of each shard also keeps the error of re-encoding it (cclz.h).
struct FeedbackCase {
  Coll op;
  int dtype;
  cclzRedOp_t redOp;
  int bits;
  cclzDataType_t residualDtype = cclzFloat32;
};

// The state's residual as floats, whatever its dtype.
std::vector<float> residualFloats(cclzFeedback_t fb, uint64_t count) {
  void* data = nullptr;
  cclzDataType_t dtype = cclzFloat32;
  EXPECT_EQ(cclzFeedbackGetResidual(fb, &data, &dtype), cclzSuccess);
  const size_t bytes = count * elementSize(dtype);
  const auto* p = static_cast<const uint8_t*>(data);
  const std::vector<uint8_t> copy(p, p + bytes);
  std::vector<float> out(count);
  for (uint64_t i = 0; i < count; ++i) out[i] = elementAsFloat(dtype, copy, i);
  return out;
}

class LoopbackFeedback : public ::testing::TestWithParam<FeedbackCase> {};

TEST_P(LoopbackFeedback, ResidualKeepsWhatWasNotSent) {
  const FeedbackCase f = GetParam();
  const int n = 3, steps = 3;
  const uint64_t count = 2500;  // per rank (reduce-scatter) or in all (all-reduce)
  const CollCase c{f.op, f.dtype, {"qgrad", cclzCodecQgrad, f.bits, true}, count, f.redOp};
  const uint64_t sent = sendElems(c, n), got = recvElems(c, n);
  const size_t es = elementSize(f.dtype);
  // [rank][step]: gradient, residual before, residual after, output.
  std::vector<std::vector<std::vector<float>>> before(n), after(n);
  std::vector<std::vector<std::vector<uint8_t>>> grads(n), outs(n);
  std::vector<uint64_t> finalStep(n);
  onRanks(n, [&](cclzComm_t comm, int r) {
    cclzFeedback_t fb = nullptr;
    ASSERT_EQ(cclzFeedbackCreateWithDtype(&fb, sent, cclzMemoryHost, f.residualDtype),
              cclzSuccess);
    const cclzCodecConfig_t config = c.codec.config();
    for (int s = 0; s < steps; ++s) {
      std::vector<uint8_t> g = makeData(DataKind::kGauss1, f.dtype, sent, 0,
                                        mixSeed(77, r, s, f.dtype));
      std::vector<uint8_t> out(got * es);
      before[r].push_back(residualFloats(fb, sent));
      const cclzResult_t res =
          f.op == Coll::ReduceScatter
              ? cclzReduceScatterFeedback(g.data(), out.data(), count,
                                          static_cast<cclzDataType_t>(f.dtype), f.redOp, comm,
                                          &config, fb, nullptr)
              : cclzAllReduceFeedback(g.data(), out.data(), count,
                                      static_cast<cclzDataType_t>(f.dtype), f.redOp, comm,
                                      &config, fb, nullptr);
      EXPECT_EQ(res, cclzSuccess) << cclzGetLastError(comm);
      after[r].push_back(residualFloats(fb, sent));
      grads[r].push_back(std::move(g));
      outs[r].push_back(std::move(out));
    }
    cclzFeedbackGetState(fb, nullptr, nullptr, &finalStep[r]);
    cclzFeedbackDestroy(fb);
  });
  const double divisor = f.redOp == cclzAvg ? n : 1;
  const double eps = f.dtype == cclzBfloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -22);
  // A bf16 residual keeps what was not sent to its own rounding: half a unit in the last place
  // of the encode's residual, and for an all-reduce's shard owner again of the folded one (values
  // within the step's magnitudes; a codec error is of the order of a quantization step, far above).
  const double residualEps = f.residualDtype == cclzBfloat16 ? std::ldexp(1.0, -8) : 0.0;
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(finalStep[r], static_cast<uint64_t>(steps));
    for (int s = 0; s < steps; ++s) {
      double residualPower = 0;
      for (uint64_t i = 0; i < got; ++i) {
        const uint64_t j = f.op == Coll::ReduceScatter ? r * count + i : i;
        double meant = 0, scale = 0;
        for (int q = 0; q < n; ++q) {
          const double g = elementAsFloat(f.dtype, grads[q][s], j);
          meant += g + before[q][s][j] - after[q][s][j];
          scale += std::fabs(g) + std::fabs(before[q][s][j]) + std::fabs(after[q][s][j]);
          residualPower += after[q][s][j] * after[q][s][j];
        }
        const double arrived = divisor * elementAsFloat(f.dtype, outs[r][s], i);
        // What is not compensated: the fp32 sums, and rounding the reduced value to the dtype
        // (relative to the sum's magnitude, at most `scale`).
        ASSERT_NEAR(arrived, meant, (eps + 1e-5 + residualEps) * scale)
            << "rank " << r << " step " << s << " element " << i;
      }
      EXPECT_GT(residualPower, 0) << "the residual never holds anything: feedback did nothing";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Ops, LoopbackFeedback,
    ::testing::Values(FeedbackCase{Coll::ReduceScatter, cclzFloat32, cclzSum, 4},
                      FeedbackCase{Coll::ReduceScatter, cclzBfloat16, cclzAvg, 2},
                      FeedbackCase{Coll::AllReduce, cclzFloat32, cclzSum, 4},
                      FeedbackCase{Coll::AllReduce, cclzFloat32, cclzAvg, 2},
                      FeedbackCase{Coll::AllReduce, cclzBfloat16, cclzSum, 8},
                      FeedbackCase{Coll::ReduceScatter, cclzFloat32, cclzAvg, 4, cclzBfloat16},
                      FeedbackCase{Coll::AllReduce, cclzFloat32, cclzAvg, 4, cclzBfloat16},
                      FeedbackCase{Coll::AllReduce, cclzBfloat16, cclzSum, 2, cclzBfloat16}),
    [](const auto& info) {
      return std::string(collLabel(info.param.op)) + "_" + dtypeLabel(info.param.dtype) +
             (info.param.redOp == cclzAvg ? "_avg" : "_sum") + "_int" +
             std::to_string(info.param.bits) +
             (info.param.residualDtype == cclzBfloat16 ? "_bf16_residual" : "");
    });

// A NaN in one rank's gradient reaches the reduced shard and its re-encoding; the shard owner's
// residual keeps what it had there (docs/formats.md, "NaN and Inf"), so the next step is clean on
// every rank instead of meeting the NaN again through the residual.
TEST(LoopbackErrors, FeedbackNaNDoesNotPoisonTheNextStep) {
  const uint64_t count = 600;  // in all; rank 0 owns the shard holding element 0
  onRanks(2, [&](cclzComm_t comm, int r) {
    cclzFeedback_t fb = nullptr;
    ASSERT_EQ(cclzFeedbackCreate(&fb, count, cclzMemoryHost), cclzSuccess);
    cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
    config.codec = cclzCodecQgrad;
    for (int step = 0; step < 2; ++step) {
      std::vector<float> g(count), out(count);
      for (uint64_t i = 0; i < count; ++i) g[i] = 0.01f * static_cast<float>((i * 7 + r) % 13);
      if (step == 0 && r == 1) g[0] = std::nanf("");
      const cclzResult_t res = cclzAllReduceFeedback(g.data(), out.data(), count, cclzFloat32,
                                                     cclzSum, comm, &config, fb, nullptr);
      // Step 0: rank 1's encode met the NaN, and so did rank 0's re-encoding of its shard.
      EXPECT_EQ(res, step == 0 ? cclzInvalidArgument : cclzSuccess)
          << "rank " << r << " step " << step << ": " << cclzGetLastError(comm);
      // The NaN travels with the data at its step, and only then.
      EXPECT_EQ(std::isnan(out[0]), step == 0) << "rank " << r << " step " << step;
      const std::vector<float> residual = residualFloats(fb, count);
      EXPECT_TRUE(std::all_of(residual.begin(), residual.end(),
                              [](float v) { return std::isfinite(v); }))
          << "rank " << r << " step " << step;
    }
    cclzFeedbackDestroy(fb);
  });
}

TEST(LoopbackErrors, FeedbackNeedsQgradAndItsSize) {
  onRanks(2, [&](cclzComm_t comm, int) {
    cclzFeedback_t fb = nullptr;
    ASSERT_EQ(cclzFeedbackCreate(&fb, 100, cclzMemoryHost), cclzSuccess);
    std::vector<float> in(200), out(200);
    cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;  // lossless: no feedback
    EXPECT_EQ(cclzAllReduceFeedback(in.data(), out.data(), 100, cclzFloat32, cclzSum, comm,
                                    &config, fb, nullptr),
              cclzNotSupported)
        << cclzGetLastError(comm);
    config.codec = cclzCodecQgrad;
    EXPECT_EQ(cclzReduceScatterFeedback(in.data(), out.data(), 100, cclzFloat32, cclzSum, comm,
                                        &config, fb, nullptr),
              cclzInvalidArgument)  // the state holds 100, the call sends 200
        << cclzGetLastError(comm);
    cclzFeedbackDestroy(fb);
  });
}

// A setting of two values: off by default, on where `other` is set, off again where `standard`
// is, and any other value refused (the variable left unset).
void expectSwitch(const char* name, const char* standard, const char* other,
                  bool (*read)(const CommSettings&)) {
  SCOPED_TRACE(name);
  EXPECT_FALSE(read(CommSettings::fromEnvironment()));
  setenv(name, other, 1);
  EXPECT_TRUE(read(CommSettings::fromEnvironment()));
  setenv(name, standard, 1);
  EXPECT_FALSE(read(CommSettings::fromEnvironment()));
  expectEnvironmentRefuses(name, "neither");
}

// The settings every rank reads when a communicator is created.
TEST(CommSettingsTest, FromEnvironment) {
  setenv("CCLZ_PIECE_BYTES", "64K", 1);
  setenv("CCLZ_CHECK_CALLS", "first", 1);
  CommSettings s = CommSettings::fromEnvironment();
  EXPECT_EQ(s.pieceBytes, 64u << 10);
  EXPECT_EQ(s.checkCalls, CheckCalls::First);
  setenv("CCLZ_CHECK_CALLS", "1", 1);
  EXPECT_EQ(CommSettings::fromEnvironment().checkCalls, CheckCalls::Every);
  setenv("CCLZ_CHECK_CALLS", "deferred", 1);
  EXPECT_EQ(CommSettings::fromEnvironment().checkCalls, CheckCalls::Deferred);
  for (const char* bad : {"abc", "0", "2G", "12Q"}) expectEnvironmentRefuses("CCLZ_PIECE_BYTES", bad);
  setenv("CCLZ_CHECK_CALLS", "sometimes", 1);
  EXPECT_THROW(CommSettings::fromEnvironment(), Error);
  unsetenv("CCLZ_CHECK_CALLS");
  s = CommSettings::fromEnvironment();
  EXPECT_EQ(s.pieceBytes, 0u);  // chosen per call (defaultPieceBytes)
  EXPECT_EQ(s.checkCalls, CheckCalls::Deferred);
  EXPECT_TRUE(s.highPriorityMove);
  setenv("CCLZ_MOVE_PRIORITY", "normal", 1);
  EXPECT_FALSE(CommSettings::fromEnvironment().highPriorityMove);
  setenv("CCLZ_MOVE_PRIORITY", "high", 1);
  EXPECT_TRUE(CommSettings::fromEnvironment().highPriorityMove);
  expectEnvironmentRefuses("CCLZ_MOVE_PRIORITY", "low");
  EXPECT_FALSE(CommSettings::fromEnvironment().transportFrames);  // off by default
  setenv("CCLZ_NCCL_WINDOWS", "1", 1);
  EXPECT_TRUE(CommSettings::fromEnvironment().transportFrames);
  expectEnvironmentRefuses("CCLZ_NCCL_WINDOWS", "yes");
  EXPECT_FALSE(CommSettings::fromEnvironment().fused);  // off by default
  setenv("CCLZ_FUSED", "1", 1);
  EXPECT_TRUE(CommSettings::fromEnvironment().fused);
  EXPECT_FALSE(CommSettings::fromEnvironment().fusedCopyEngines);
  setenv("CCLZ_FUSED", "ce", 1);
  EXPECT_TRUE(CommSettings::fromEnvironment().fused);
  EXPECT_TRUE(CommSettings::fromEnvironment().fusedCopyEngines);
  EXPECT_FALSE(CommSettings::fromEnvironment().fusedDirect);
  setenv("CCLZ_FUSED", "direct", 1);
  EXPECT_TRUE(CommSettings::fromEnvironment().fused);
  EXPECT_FALSE(CommSettings::fromEnvironment().fusedCopyEngines);
  EXPECT_TRUE(CommSettings::fromEnvironment().fusedDirect);
  setenv("CCLZ_FUSED", "0", 1);
  EXPECT_FALSE(CommSettings::fromEnvironment().fused);
  EXPECT_FALSE(CommSettings::fromEnvironment().fusedCopyEngines);
  expectEnvironmentRefuses("CCLZ_FUSED", "on");
  EXPECT_TRUE(CommSettings::fromEnvironment().fusedGraphs);  // on by default
  setenv("CCLZ_FUSED_GRAPHS", "0", 1);
  EXPECT_FALSE(CommSettings::fromEnvironment().fusedGraphs);
  expectEnvironmentRefuses("CCLZ_FUSED_GRAPHS", "off");
  EXPECT_EQ(CommSettings::fromEnvironment().overlapReservedSms(false), 16);  // beside NCCL's
  EXPECT_EQ(CommSettings::fromEnvironment().overlapReservedSms(true), 0);  // copy engines: none
  setenv("CCLZ_OVERLAP_COMM_SMS", "0", 1);
  EXPECT_EQ(CommSettings::fromEnvironment().overlapReservedSms(false), 0);
  setenv("CCLZ_OVERLAP_COMM_SMS", "24", 1);
  EXPECT_EQ(CommSettings::fromEnvironment().overlapReservedSms(false), 24);  // set: as set
  EXPECT_EQ(CommSettings::fromEnvironment().overlapReservedSms(true), 24);
  for (const char* bad : {"-1", "many", "16x", "5000"}) expectEnvironmentRefuses("CCLZ_OVERLAP_COMM_SMS", bad);
  expectSwitch("CCLZ_OVERLAP_GATHER", "ring", "merged",
               [](const CommSettings& s) { return s.overlapMergedGather; });
  EXPECT_EQ(CommSettings::fromEnvironment().overlapCopy, OverlapCopy::Nccl);  // by default
  setenv("CCLZ_OVERLAP_COPY", "ce", 1);
  EXPECT_EQ(CommSettings::fromEnvironment().overlapCopy, OverlapCopy::CopyEngines);
  setenv("CCLZ_OVERLAP_COPY", "auto", 1);
  EXPECT_EQ(CommSettings::fromEnvironment().overlapCopy, OverlapCopy::Auto);
  setenv("CCLZ_OVERLAP_COPY", "nccl", 1);
  EXPECT_EQ(CommSettings::fromEnvironment().overlapCopy, OverlapCopy::Nccl);
  expectEnvironmentRefuses("CCLZ_OVERLAP_COPY", "dma");
  expectSwitch("CCLZ_OVERLAP_PUSH", "together", "inturn",
               [](const CommSettings& s) { return s.overlapPushInTurn; });
}

#ifdef CCLZ_HAVE_NCCL
// The CTA policy of the NCCL communicators cclz creates (no GPU needed to build the config).
TEST(CommSettingsTest, NcclCtaPolicyFromEnvironment) {
  unsetenv("CCLZ_NCCL_CTA_POLICY");
  EXPECT_EQ(ncclConfigFromEnvironment().CTAPolicy, NCCL_CONFIG_UNDEF_INT);  // NCCL's default
  setenv("CCLZ_NCCL_CTA_POLICY", "zero", 1);
  EXPECT_EQ(ncclConfigFromEnvironment().CTAPolicy, NCCL_CTA_POLICY_ZERO);
  setenv("CCLZ_NCCL_CTA_POLICY", "efficiency", 1);
  EXPECT_EQ(ncclConfigFromEnvironment().CTAPolicy, NCCL_CTA_POLICY_EFFICIENCY);
  setenv("CCLZ_NCCL_CTA_POLICY", "default", 1);
  EXPECT_EQ(ncclConfigFromEnvironment().CTAPolicy, NCCL_CTA_POLICY_DEFAULT);
  setenv("CCLZ_NCCL_CTA_POLICY", "none", 1);
  try {
    ncclConfigFromEnvironment();
    ADD_FAILURE() << "CCLZ_NCCL_CTA_POLICY=none was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclzInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("CCLZ_NCCL_CTA_POLICY"), std::string::npos) << e.what();
  }
  unsetenv("CCLZ_NCCL_CTA_POLICY");
}
#endif

// The fused kernel path's piece: the whole block up to 32 MiB, or the setting where there is one.
TEST(CommSettingsTest, FusedPieceBytes) {
  constexpr uint64_t MiB = uint64_t{1} << 20;
  EXPECT_EQ(fusedPieceBytes(0, 6 * MiB), 6 * MiB);
  EXPECT_EQ(fusedPieceBytes(0, 32 * MiB), 32 * MiB);
  EXPECT_EQ(fusedPieceBytes(0, 128 * MiB), kFusedPieceCap);
  EXPECT_EQ(fusedPieceBytes(0, 0), 1u);
  EXPECT_EQ(fusedPieceBytes(MiB, 128 * MiB), MiB);
}

// The piece when CCLZ_PIECE_BYTES is unset: a quarter of the block in whole MiB, within
// [4 MiB, max(4 MiB, 64 MiB / ranks)].
TEST(CommSettingsTest, DefaultPieceBytes) {
  constexpr uint64_t MiB = uint64_t{1} << 20;
  EXPECT_EQ(defaultPieceBytes(0, 2), 4 * MiB);
  EXPECT_EQ(defaultPieceBytes(1, 2), 4 * MiB);
  EXPECT_EQ(defaultPieceBytes(16 * MiB, 2), 4 * MiB);
  EXPECT_EQ(defaultPieceBytes(40 * MiB, 2), 10 * MiB);
  EXPECT_EQ(defaultPieceBytes(40 * MiB + 1, 2), 11 * MiB);  // rounded up: never a fifth piece
  EXPECT_EQ(defaultPieceBytes(128 * MiB, 2), 32 * MiB);     // 256 MiB all-gather on 2 ranks
  EXPECT_EQ(defaultPieceBytes(1024 * MiB, 2), 32 * MiB);    // the cap: 64 MiB / 2
  EXPECT_EQ(defaultPieceBytes(1024 * MiB, 4), 16 * MiB);
  EXPECT_EQ(defaultPieceBytes(1024 * MiB, 64), 4 * MiB);    // never below 4 MiB
  EXPECT_EQ(defaultPieceBytes(1024 * MiB, 1), 64 * MiB);
  EXPECT_EQ(pieceBytesFor(64 << 10, 1024 * MiB, 2), uint64_t{64} << 10);  // the setting wins
  EXPECT_EQ(pieceBytesFor(0, 128 * MiB, 2), 32 * MiB);
  // Whole MiB within the bounds, and exactly 4 pieces wherever the bounds do not bind.
  for (uint64_t chunk = 0; chunk < 600 * MiB; chunk += 7 * MiB + 12345) {
    for (int ranks : {1, 2, 3, 8}) {
      const uint64_t piece = defaultPieceBytes(chunk, ranks);
      const uint64_t cap = std::max<uint64_t>(4 * MiB, 64 * MiB / ranks / MiB * MiB);
      EXPECT_EQ(piece % MiB, 0u);
      EXPECT_GE(piece, 4 * MiB);
      EXPECT_LE(piece, cap);
      if (chunk > 16 * MiB && piece < cap) {
        EXPECT_EQ(pieceCount(chunk, piece), 4u) << chunk << " bytes, " << ranks << " ranks";
      }
    }
  }
}

TEST(CommSettingsTest, PiecesAreWholeUnits) {
  EXPECT_EQ(wholeUnits(2048, 1, 1u << 20), 2048u);     // no unit
  EXPECT_EQ(wholeUnits(2048, 768, 1u << 20), 1536u);   // two rows of 768
  EXPECT_EQ(wholeUnits(2048, 1024, 1u << 20), 2048u);  // already whole
  EXPECT_EQ(wholeUnits(500, 768, 1u << 20), 768u);     // at least one row
  EXPECT_EQ(wholeUnits(2048, 768, 1000), 1000u);       // the largest block in one piece
  EXPECT_EQ(wholeUnits(2048, 768, 0), 1u);             // nothing to send: still one element
  EXPECT_EQ(wholeUnits(0, 1, 0), 1u);
}

// With the caller's fp8 rows, a piece holds whole rows (Codec::pieceAlignment), so that every row
// keeps its own scales however the call is cut: the output is the same with small pieces (2048
// bf16 values, 2.67 rows of 768, cut to 2 rows) as with one piece for the whole block.
TEST(LoopbackPieces, Fp8RowsNeverStraddleTwoPieces) {
  constexpr uint64_t kRow = 768, kRows = 13;
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = cclzCodecFp8;
  config.fp8RowElems = static_cast<int>(kRow);
  // Rows of very different magnitudes, so that a row's coarse scale decides its codes.
  auto value = [&](int rank, uint64_t i) {
    const double wave = std::sin(0.37 * static_cast<double>(i) + rank);
    return floatToBf16(static_cast<float>(std::ldexp(wave, static_cast<int>((i / kRow) % 7) * 3)));
  };
  for (Coll op : {Coll::AllGather, Coll::ReduceScatter}) {
    const int n = 3;
    const uint64_t block = kRows * kRow;  // an all-gather's sendcount, a reduce-scatter's recvcount
    const uint64_t inCount = op == Coll::AllGather ? block : block * n;
    const uint64_t outCount = op == Coll::AllGather ? block * n : block;
    auto run = [&](uint64_t pieceBytes) {
      CommSettings settings = testSettings();
      settings.pieceBytes = pieceBytes;
      std::vector<std::vector<uint16_t>> out(n, std::vector<uint16_t>(outCount));
      onRanks(
          n,
          [&](cclzComm_t comm, int r) {
            std::vector<uint16_t> in(inCount);
            for (uint64_t i = 0; i < inCount; ++i) in[i] = value(r, i);
            size_t piece = 0;
            cclzCommGetPieceBytes(comm, block * 2, &piece);
            EXPECT_EQ(piece, pieceBytes);
            const cclzResult_t result =
                op == Coll::AllGather
                    ? cclzAllGather(in.data(), out[r].data(), block, cclzBfloat16, comm, &config,
                                    nullptr)
                    : cclzReduceScatter(in.data(), out[r].data(), block, cclzBfloat16, cclzSum,
                                        comm, &config, nullptr);
            EXPECT_EQ(result, cclzSuccess) << cclzGetLastError(comm);
          },
          std::chrono::seconds(60), nullptr, settings);
      return out;
    };
    const auto cut = run(kTestPieceBytes), whole = run(block * 2);
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(cut[r], whole[r]) << (op == Coll::AllGather ? "all-gather" : "reduce-scatter")
                                  << ", rank " << r;
  }
}

// asyncCalls is for device communicators: a host one refuses it, and cclzCommStreamWait on a
// host communicator is a no-op (its calls return complete).
TEST(CommSettingsTest, HostCommunicatorRefusesAsyncCallsAndStreamWaitIsANoOp) {
  auto hub = std::make_shared<LoopbackHub>(1);
  CommSettings async = testSettings();
  async.async = true;
  try {
    Communicator comm(std::make_unique<LoopbackTransport>(hub, 0), async);
    ADD_FAILURE() << "a host communicator accepted asyncCalls";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclzInvalidUsage);
  }
  cclzComm_t comm = loopbackComm(hub, 0);
  EXPECT_EQ(cclzCommStreamWait(comm, nullptr), cclzSuccess) << cclzGetLastError(comm);
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess);
}

// CCLZ_TRACE=1: every rank's check and data part show up on stderr, in order.
TEST(TraceTest, StepsOfACollectiveGoToStderr) {
  setenv("CCLZ_TRACE", "1", 1);
  testing::internal::CaptureStderr();
  onRanks(2, [](cclzComm_t comm, int rank) {
    std::vector<float> in(100, float(rank)), out(200);
    EXPECT_EQ(cclzAllGather(in.data(), out.data(), in.size(), cclzFloat32, comm, nullptr,
                            nullptr),
              cclzSuccess);
  });
  const std::string err = testing::internal::GetCapturedStderr();
  unsetenv("CCLZ_TRACE");
  const size_t check = err.find("all-gather count 100: check");
  const size_t agreed = err.find("check answered (agreed)");
  const size_t data = err.find("data part queued");
  EXPECT_NE(check, std::string::npos) << err;
  EXPECT_NE(agreed, std::string::npos) << err;
  EXPECT_NE(data, std::string::npos) << err;
  EXPECT_LT(check, agreed);
  EXPECT_LT(agreed, data);
}

// CCLZ_CHECK_CALLS: with first, the first call of each op is checked and later ones are not;
// with 1, every call now; deferred (the default) is every call now on a host communicator, whose
// calls block until their data has moved (a deferred check is for device communicators).
// Which calls check with their peers (two ranks as threads): every call, each op's first, or
// each op's first now and the later ones deferred (no control mesh here: they check now). A rank
// alone checks nothing, in every mode: it has no peer.
TEST(CommSettingsTest, WhichCallsCheck) {
  CommSettings s = testSettings();
  s.checkCalls = CheckCalls::First;
  onRanks(
      2,
      [](cclzComm_t c, int) {
        Communicator& comm = *c->impl;
        EXPECT_EQ(comm.checkWhen(CollOp::AllGather), CheckWhen::Now);
        EXPECT_EQ(comm.checkWhen(CollOp::AllGather), CheckWhen::Skip);
        EXPECT_EQ(comm.checkWhen(CollOp::AllReduce), CheckWhen::Now);
        EXPECT_EQ(comm.checkWhen(CollOp::AllReduce), CheckWhen::Skip);
      },
      std::chrono::seconds(20), nullptr, s);
  for (CheckCalls mode : {CheckCalls::Every, CheckCalls::Deferred}) {
    s.checkCalls = mode;
    onRanks(
        2,
        [](cclzComm_t c, int) {
          EXPECT_EQ(c->impl->checkWhen(CollOp::Send), CheckWhen::Now);
          EXPECT_EQ(c->impl->checkWhen(CollOp::Send), CheckWhen::Now);
        },
        std::chrono::seconds(20), nullptr, s);
  }
  auto alone = std::make_shared<LoopbackHub>(1);
  for (CheckCalls mode : {CheckCalls::Every, CheckCalls::First, CheckCalls::Deferred}) {
    s.checkCalls = mode;
    Communicator single(std::make_unique<LoopbackTransport>(alone, 0), s);
    EXPECT_EQ(single.checkWhen(CollOp::AllReduce), CheckWhen::Skip);
    EXPECT_EQ(single.checkWhen(CollOp::AllReduce), CheckWhen::Skip);
  }
}

}  // namespace
}  // namespace cclz::test
