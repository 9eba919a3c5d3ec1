// The collectives on 1-4 ranks in one process: each rank a thread, the loopback transport between
// them, the host codecs, the C API on top. Every op x dtype x codec x count (coll_cases.h) is
// checked against the reference on every rank; all-reduce outputs must be bit-identical across
// ranks. Also: a rank with different arguments or rejected arguments makes every rank fail (and
// nobody hangs), a corrupted frame on the wire is reported by its receiver, error feedback keeps
// what it did not send.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cclz/cclz.h"
#include "coll_cases.h"
#include "coll_runner.h"
#include "collective/communicator.h"
#include "support/data.h"
#include "transport/loopback.h"

namespace cclz::test {
namespace {

CommSettings testSettings() {
  CommSettings s;
  s.pieceBytes = kTestPieceBytes;
  return s;
}

cclzComm_t loopbackComm(std::shared_ptr<LoopbackHub> hub, int rank,
                        std::function<std::unique_ptr<Transport>(std::unique_ptr<Transport>)>
                            wrap = nullptr) {
  std::unique_ptr<Transport> t = std::make_unique<LoopbackTransport>(hub, rank);
  if (wrap) t = wrap(std::move(t));
  auto* comm = new cclzComm;
  comm->impl = std::make_unique<Communicator>(std::move(t), testSettings());
  return comm;
}

// Runs body(comm, rank) on n threads, one communicator each.
void onRanks(int n, const std::function<void(cclzComm_t, int)>& body,
             std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto hub = std::make_shared<LoopbackHub>(n, timeout);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cclzComm_t comm = loopbackComm(hub, r);
      body(comm, r);
      cclzCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
}

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

INSTANTIATE_TEST_SUITE_P(Cases, LoopbackCollective, ::testing::ValuesIn(allCases()),
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
                   if (r == 1) c->maxCodeLength = 11;
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

}  // namespace
}  // namespace cclz::test
