// The two-level all-gather and reduce-scatter (collective/two_level.cpp) on ranks as threads,
// each told its node (CommSettings::nodeName): two nodes of two and of three ranks, three nodes
// of two, ranks of a node contiguous and interleaved. The all-gather must give the flat
// all-gather's bytes; the reduce-scatter must give a reference built here from the inputs: each
// node's sum of a block, rounded to the dtype and passed through the codec's host encode and
// decode, added to the owner's node sum in node order; with error feedback, what each node's sum
// dropped must come back in the next calls. A transport wrapper counts the bytes that cross a
// node boundary, so that a call which silently ran flat fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <barrier>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cclz/cclz.h"
#include "collective/node_layout.h"
#include "collective/reduce.h"
#include "forwarding_transport.h"
#include "common/error.h"
#include "loopback_ranks.h"
#include "support/data.h"

namespace cclz::test {
namespace {

TEST(TwoLevel, LayoutFromNodeKeys) {
  // Nodes numbered by their lowest rank, ranks within a node ascending.
  NodeLayout l = nodeLayoutFromKeys({7, 3, 7, 3, 9, 9});
  EXPECT_EQ(l.nodes, 3);
  EXPECT_EQ(l.perNode, 2);
  EXPECT_TRUE(l.twoLevel());
  EXPECT_EQ(l.nodeOf, (std::vector<int>{0, 1, 0, 1, 2, 2}));
  EXPECT_EQ(l.localOf, (std::vector<int>{0, 0, 1, 1, 0, 1}));
  EXPECT_EQ(l.rankAt(1, 1), 3);
  EXPECT_FALSE(nodeLayoutFromKeys({1, 1, 2}).twoLevel());  // nodes of 2 and 1
  EXPECT_EQ(nodeLayoutFromKeys({1, 1, 2}).perNode, 0);
  EXPECT_FALSE(nodeLayoutFromKeys({1, 2, 3, 4}).twoLevel());  // one rank per node
  EXPECT_FALSE(nodeLayoutFromKeys({5, 5, 5, 5}).twoLevel());  // one node
  // The key: the name given, else $NCCL_HOSTID, else the host's name.
  EXPECT_EQ(nodeKey("a"), nodeKey("a"));
  EXPECT_NE(nodeKey("a"), nodeKey("b"));
  unsetenv("NCCL_HOSTID");
  const uint64_t host = nodeKey("");
  setenv("NCCL_HOSTID", "node1", 1);
  EXPECT_NE(nodeKey(""), host);
  EXPECT_EQ(nodeKey(""), nodeKey(""));
  unsetenv("NCCL_HOSTID");
}

TEST(TwoLevel, SettingFromEnvironment) {
  unsetenv("CCLZ_TWO_LEVEL");
  EXPECT_TRUE(CommSettings::fromEnvironment().twoLevel);  // on by default
  setenv("CCLZ_TWO_LEVEL", "0", 1);
  EXPECT_FALSE(CommSettings::fromEnvironment().twoLevel);
  setenv("CCLZ_TWO_LEVEL", "1", 1);
  EXPECT_TRUE(CommSettings::fromEnvironment().twoLevel);
  expectEnvironmentRefuses("CCLZ_TWO_LEVEL", "yes");
}

struct Layout {
  const char* label;
  int n;
  std::function<int(int)> nodeOf;
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"2 nodes of 2", 4, [](int r) { return r / 2; }},
      {"2 nodes of 2, interleaved", 4, [](int r) { return r % 2; }},
      {"2 nodes of 3", 6, [](int r) { return r / 3; }},
      {"3 nodes of 2, interleaved", 6, [](int r) { return r % 3; }},
  };
  return all;
}

// Counts the bytes this rank sends to ranks of other nodes (an all-gather's part counts once
// per rank of another node).
class CrossingCounter final : public ForwardingTransport {
 public:
  CrossingCounter(std::unique_ptr<Transport> inner, std::function<int(int)> nodeOf,
                  std::atomic<uint64_t>* crossed)
      : ForwardingTransport(std::move(inner)), nodeOf_(std::move(nodeOf)), crossed_(crossed) {}
  void send(const void* buf, uint64_t bytes, int peer) override {
    if (nodeOf_(peer) != nodeOf_(rank())) *crossed_ += bytes;
    ForwardingTransport::send(buf, bytes, peer);
  }
  void allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t s) override {
    for (int r = 0; r < size(); ++r)
      if (nodeOf_(r) != nodeOf_(rank())) *crossed_ += bytes;
    ForwardingTransport::allGather(send, recv, bytes, s);
  }

 private:
  std::function<int(int)> nodeOf_;
  std::atomic<uint64_t>* crossed_;
};

// body(comm, rank) on one thread per rank of the layout; returns the bytes that crossed nodes
// in body (not those of the communicators' creation, which exchanges the node keys).
uint64_t onNodes(const Layout& l, bool twoLevel, uint64_t pieceBytes,
                 const std::function<void(cclzComm_t, int)>& body) {
  auto hub = std::make_shared<LoopbackHub>(l.n, std::chrono::seconds(60));
  std::atomic<uint64_t> crossed{0};
  std::barrier created(l.n, [&]() noexcept { crossed = 0; });
  std::vector<std::thread> threads;
  for (int r = 0; r < l.n; ++r)
    threads.emplace_back([&, r] {
      CommSettings s = testSettings();
      s.pieceBytes = pieceBytes;
      s.twoLevel = twoLevel;
      s.nodeName = "node" + std::to_string(l.nodeOf(r));
      cclzComm_t comm = loopbackComm(
          hub, r,
          [&](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
            return std::make_unique<CrossingCounter>(std::move(t), l.nodeOf, &crossed);
          },
          s);
      created.arrive_and_wait();
      body(comm, r);
      cclzCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  return crossed.load();
}

struct Codec {
  const char* label;
  cclzCodecConfig_t config;
};

std::vector<Codec> codecs() {
  cclzCodecConfig_t e4m3 = CCLZ_CODEC_CONFIG_INITIALIZER;
  e4m3.codec = cclzCodecFp8;
  e4m3.fp8RowElems = 256;
  cclzCodecConfig_t int8 = e4m3;
  int8.fp8Format = cclzFp8Int8;
  cclzCodecConfig_t qgrad = CCLZ_CODEC_CONFIG_INITIALIZER;
  qgrad.codec = cclzCodecQgrad;
  qgrad.bits = 4;
  return {{"fp8 e4m3", e4m3}, {"fp8 int8", int8}, {"qgrad int4", qgrad}};
}

// count values of rank r's input in dtype (bf16 or fp32), Gaussian with a scale per rank.
std::vector<uint8_t> input(int r, uint64_t count, cclzDataType_t dtype) {
  std::mt19937 gen(1234 + r);
  std::normal_distribution<float> normal(0.0f, 1.0f + 0.25f * r);
  std::vector<uint8_t> bytes(count * (dtype == cclzBfloat16 ? 2 : 4));
  for (uint64_t i = 0; i < count; ++i) {
    const float v = normal(gen);
    if (dtype == cclzBfloat16)
      reinterpret_cast<uint16_t*>(bytes.data())[i] = floatToBf16(v);
    else
      reinterpret_cast<float*>(bytes.data())[i] = v;
  }
  return bytes;
}

// Pieces of 2048 bf16 values (4096 bytes) and one of the blocks' remainders; rows of 256.
constexpr uint64_t kBlock = 5 * 1024 + 256;

TEST(TwoLevel, AllGatherGivesTheFlatAllGathersBytes) {
  for (const Layout& l : layouts()) {
    for (const Codec& c : codecs()) {
      for (cclzDataType_t dtype : {cclzBfloat16, cclzFloat32}) {
        SCOPED_TRACE(std::string(l.label) + ", " + c.label + (dtype == cclzBfloat16 ? ", bf16" : ", fp32"));
        const uint64_t elem = dtype == cclzBfloat16 ? 2 : 4;
        auto run = [&](bool twoLevel, std::vector<std::vector<uint8_t>>* outs) {
          outs->assign(l.n, std::vector<uint8_t>(kBlock * l.n * elem));
          return onNodes(l, twoLevel, kTestPieceBytes, [&](cclzComm_t comm, int r) {
            const std::vector<uint8_t> in = input(r, kBlock, dtype);
            EXPECT_EQ(cclzAllGather(in.data(), (*outs)[r].data(), kBlock, dtype, comm, &c.config,
                                    nullptr),
                      cclzSuccess)
                << cclzGetLastError(comm);
          });
        };
        std::vector<std::vector<uint8_t>> flat, two;
        const uint64_t flatCrossed = run(false, &flat), twoCrossed = run(true, &two);
        for (int r = 0; r < l.n; ++r) EXPECT_EQ(two[r], flat[r]) << "rank " << r;
        EXPECT_LT(twoCrossed, flatCrossed) << "the two-level call did not run";
      }
    }
  }
}

// What the two-level reduce-scatter leaves at the owner `d` of the `count` elements at `offset`
// of every rank's input (see the file's comment).
std::vector<uint8_t> reduced(const Layout& l, const Codec& c, cclzDataType_t dtype,
                             const std::vector<std::vector<uint8_t>>& inputs, int d,
                             uint64_t offset, uint64_t count, cclzRedOp_t op) {
  const uint64_t elem = dtype == cclzBfloat16 ? 2 : 4;
  // Nodes in the order of their lowest rank (NodeLayout's numbering).
  std::vector<int> order;
  for (int r = 0; r < l.n; ++r)
    if (std::find(order.begin(), order.end(), l.nodeOf(r)) == order.end())
      order.push_back(l.nodeOf(r));
  auto nodeSum = [&](int node) {
    std::vector<float> acc(count, 0.0f);
    for (int r = 0; r < l.n; ++r)
      if (l.nodeOf(r) == node)
        for (uint64_t i = 0; i < count; ++i)
          reduce::accumulateElement(acc.data(), i, inputs[r].data() + offset * elem, dtype);
    return acc;
  };
  cclzCodec_t codec = nullptr;
  EXPECT_EQ(cclzCodecCreate(&codec, &c.config), cclzSuccess);
  std::vector<float> acc = nodeSum(l.nodeOf(d));
  for (int node : order) {
    if (node == l.nodeOf(d) || !count) continue;
    const std::vector<float> sum = nodeSum(node);
    std::vector<uint8_t> partial(count * elem);
    for (uint64_t i = 0; i < count; ++i)
      reduce::storeElement(sum.data(), i, 1.0f, dtype, partial.data());
    size_t capacity = 0, bytes = 0;
    cclzCodecMaxEncodedSize(codec, count, dtype, &capacity);
    std::vector<uint8_t> frame(capacity);
    EXPECT_EQ(cclzEncodeHost(codec, partial.data(), count, dtype, frame.data(), capacity, &bytes),
              cclzSuccess);
    EXPECT_EQ(cclzDecodeAccumulateHost(codec, frame.data(), bytes, acc.data(), count, dtype),
              cclzSuccess);
  }
  cclzCodecDestroy(codec);
  std::vector<uint8_t> out(count * elem);
  const float divisor = op == cclzAvg ? static_cast<float>(l.n) : 1.0f;
  for (uint64_t i = 0; i < count; ++i) reduce::storeElement(acc.data(), i, divisor, dtype, out.data());
  return out;
}

// What rank d's block of the two-level reduce-scatter must hold.
std::vector<uint8_t> reference(const Layout& l, const Codec& c, cclzDataType_t dtype, int d,
                               cclzRedOp_t op) {
  std::vector<std::vector<uint8_t>> inputs;
  for (int r = 0; r < l.n; ++r) inputs.push_back(input(r, kBlock * l.n, dtype));
  return reduced(l, c, dtype, inputs, d, d * kBlock, kBlock, op);
}

TEST(TwoLevel, ReduceScatterSumsEachNodeThenQuantizesItsSumOnce) {
  for (const Layout& l : layouts()) {
    for (const Codec& c : codecs()) {
      for (cclzDataType_t dtype : {cclzBfloat16, cclzFloat32}) {
        for (cclzRedOp_t op : {cclzSum, cclzAvg}) {
          SCOPED_TRACE(std::string(l.label) + ", " + c.label +
                       (dtype == cclzBfloat16 ? ", bf16" : ", fp32") +
                       (op == cclzSum ? ", sum" : ", avg"));
          const uint64_t elem = dtype == cclzBfloat16 ? 2 : 4;
          auto run = [&](bool twoLevel, uint64_t pieceBytes,
                         std::vector<std::vector<uint8_t>>* outs) {
            outs->assign(l.n, std::vector<uint8_t>(kBlock * elem));
            return onNodes(l, twoLevel, pieceBytes, [&](cclzComm_t comm, int r) {
              const std::vector<uint8_t> in = input(r, kBlock * l.n, dtype);
              EXPECT_EQ(cclzReduceScatter(in.data(), (*outs)[r].data(), kBlock, dtype, op, comm,
                                          &c.config, nullptr),
                        cclzSuccess)
                  << cclzGetLastError(comm);
            });
          };
          // Pieces of 4 KiB, and the whole block in one piece: rows and quantization blocks never
          // straddle pieces, so both give the reference computed on whole blocks.
          std::vector<std::vector<uint8_t>> flat, pieces, whole;
          const uint64_t flatCrossed = run(false, kTestPieceBytes, &flat);
          const uint64_t twoCrossed = run(true, kTestPieceBytes, &pieces);
          run(true, kBlock * elem, &whole);
          for (int r = 0; r < l.n; ++r) {
            const std::vector<uint8_t> want = reference(l, c, dtype, r, op);
            EXPECT_EQ(pieces[r], want) << "rank " << r << ", pieces of 4 KiB";
            EXPECT_EQ(whole[r], want) << "rank " << r << ", one piece";
          }
          EXPECT_LT(twoCrossed, flatCrossed) << "the two-level call did not run";
        }
      }
    }
  }
}

// The all-reduce: the two-level reduce-scatter into each rank's shard (uneven shards: count / n
// elements, one more for the first count % n ranks), then the two-level all-gather of the shards,
// each encoded once by its owner. Every rank ends with the same bytes: each shard's reduced
// values through the codec's host encode and decode.
TEST(TwoLevel, AllReduceReducesThenGathersTheShardsInTwoLevels) {
  for (const Layout& l : layouts()) {
    for (const Codec& c : codecs()) {
      SCOPED_TRACE(std::string(l.label) + ", " + c.label);
      const cclzDataType_t dtype = cclzBfloat16;
      const uint64_t count = kBlock * l.n + 3;
      std::vector<std::vector<uint8_t>> inputs, outs(l.n, std::vector<uint8_t>(count * 2));
      for (int r = 0; r < l.n; ++r) inputs.push_back(input(r, count, dtype));
      const uint64_t flatCrossed = onNodes(l, false, kTestPieceBytes, [&](cclzComm_t comm, int r) {
        std::vector<uint8_t> out(count * 2);
        EXPECT_EQ(cclzAllReduce(inputs[r].data(), out.data(), count, dtype, cclzSum, comm,
                                &c.config, nullptr),
                  cclzSuccess);
      });
      const uint64_t twoCrossed = onNodes(l, true, kTestPieceBytes, [&](cclzComm_t comm, int r) {
        EXPECT_EQ(cclzAllReduce(inputs[r].data(), outs[r].data(), count, dtype, cclzSum, comm,
                                &c.config, nullptr),
                  cclzSuccess)
            << cclzGetLastError(comm);
      });
      EXPECT_LT(twoCrossed, flatCrossed) << "the two-level call did not run";
      std::vector<uint8_t> want(count * 2);
      cclzCodec_t codec = nullptr;
      ASSERT_EQ(cclzCodecCreate(&codec, &c.config), cclzSuccess);
      for (int o = 0; o < l.n; ++o) {
        const uint64_t base = count / l.n, extra = count % l.n;
        const uint64_t offset = o * base + std::min<uint64_t>(o, extra);
        const uint64_t n = base + (static_cast<uint64_t>(o) < extra ? 1 : 0);
        const std::vector<uint8_t> shard = reduced(l, c, dtype, inputs, o, offset, n, cclzSum);
        size_t capacity = 0, bytes = 0;
        cclzCodecMaxEncodedSize(codec, n, dtype, &capacity);
        std::vector<uint8_t> frame(capacity);
        ASSERT_EQ(cclzEncodeHost(codec, shard.data(), n, dtype, frame.data(), capacity, &bytes),
                  cclzSuccess);
        ASSERT_EQ(cclzDecodeHost(codec, frame.data(), bytes, want.data() + offset * 2, n, dtype),
                  cclzSuccess);
      }
      cclzCodecDestroy(codec);
      for (int r = 0; r < l.n; ++r) EXPECT_EQ(outs[r], want) << "rank " << r;
    }
  }
}

// Where the two-level calls do not apply, the calls run flat: the same bytes, the same traffic.
TEST(TwoLevel, OtherLayoutsAndCallsRunFlat) {
  const Codec c = codecs()[0];
  const std::vector<Layout> flatLayouts = {
      {"nodes of 2 and 1", 3, [](int r) { return r / 2; }},
      {"one rank per node", 3, [](int r) { return r; }},
      {"one node", 4, [](int) { return 0; }},
  };
  for (const Layout& l : flatLayouts) {
    SCOPED_TRACE(l.label);
    auto run = [&](bool twoLevel, std::vector<std::vector<uint8_t>>* outs) {
      outs->assign(l.n, std::vector<uint8_t>(kBlock * 2));
      return onNodes(l, twoLevel, kTestPieceBytes, [&](cclzComm_t comm, int r) {
        const std::vector<uint8_t> in = input(r, kBlock * l.n, cclzBfloat16);
        EXPECT_EQ(cclzReduceScatter(in.data(), (*outs)[r].data(), kBlock, cclzBfloat16, cclzSum,
                                    comm, &c.config, nullptr),
                  cclzSuccess);
      });
    };
    std::vector<std::vector<uint8_t>> flat, two;
    EXPECT_EQ(run(true, &two), run(false, &flat));
    EXPECT_EQ(two, flat);
  }
}


// Error feedback through the two-level reduce-scatter and all-reduce (qgrad int4, fp32): the
// same input at every step, so that without feedback every step makes the same quantization
// error, while with it what a node's sum dropped goes into the next step's: the mean of the
// outputs over the steps then nears the exact sum (the error of one step spread over all).
// The calls cross the boundary with fewer bytes than the flat ones, so they did run two-level.
TEST(TwoLevel, FeedbackCallsCarryWhatEachNodesSumDropped) {
  constexpr int kSteps = 24;
  const cclzCodecConfig_t qgrad = codecs()[2].config;
  for (const Layout& l : {layouts()[0], layouts()[1]}) {
    for (const bool allReduce : {false, true}) {
      SCOPED_TRACE(std::string(l.label) + (allReduce ? ", all-reduce" : ", reduce-scatter"));
      const uint64_t total = kBlock * l.n, outCount = allReduce ? total : kBlock;
      // outs[r][t]: rank r's output at step t (fp32).
      using Outputs = std::vector<std::vector<std::vector<float>>>;
      auto run = [&](bool twoLevel, bool feedback, int steps, Outputs* outs) {
        outs->assign(l.n, std::vector<std::vector<float>>(steps, std::vector<float>(outCount)));
        return onNodes(l, twoLevel, kTestPieceBytes, [&](cclzComm_t comm, int r) {
          const std::vector<uint8_t> in = input(r, total, cclzFloat32);
          cclzFeedback_t state = nullptr;
          ASSERT_EQ(cclzFeedbackCreate(&state, total, cclzMemoryHost), cclzSuccess);
          for (int t = 0; t < steps; ++t) {
            float* out = (*outs)[r][t].data();
            cclzFeedback_t f = feedback ? state : nullptr;
            const cclzResult_t result =
                allReduce ? cclzAllReduceFeedback(in.data(), out, total, cclzFloat32, cclzSum,
                                                  comm, &qgrad, f, nullptr)
                          : cclzReduceScatterFeedback(in.data(), out, kBlock, cclzFloat32,
                                                      cclzSum, comm, &qgrad, f, nullptr);
            ASSERT_EQ(result, cclzSuccess) << cclzGetLastError(comm);
          }
          cclzFeedbackDestroy(state);
        });
      };
      Outputs flat, once, fed;
      const uint64_t flatCrossed = run(false, true, 1, &flat);
      const uint64_t twoCrossed = run(true, true, kSteps, &fed);
      EXPECT_LT(twoCrossed, kSteps * flatCrossed) << "the two-level calls did not run";
      run(true, false, 1, &once);
      for (int r = 0; r < l.n; ++r) {
        // The exact sum of what rank r receives (its block, or everything for an all-reduce).
        const uint64_t offset = allReduce ? 0 : r * kBlock;
        std::vector<double> exact(outCount, 0.0);
        for (int q = 0; q < l.n; ++q) {
          const std::vector<uint8_t> in = input(q, total, cclzFloat32);
          const float* v = reinterpret_cast<const float*>(in.data()) + offset;
          for (uint64_t i = 0; i < outCount; ++i) exact[i] += v[i];
        }
        double errorOnce = 0, errorOfMean = 0;
        for (uint64_t i = 0; i < outCount; ++i) {
          double mean = 0;
          for (int t = 0; t < kSteps; ++t) mean += fed[r][t][i];
          mean /= kSteps;
          errorOnce = std::max(errorOnce, std::abs(once[r][0][i] - exact[i]));
          errorOfMean = std::max(errorOfMean, std::abs(mean - exact[i]));
        }
        EXPECT_GT(errorOnce, 0.0) << "rank " << r << ": int4 left no error to carry";
        EXPECT_LT(errorOfMean, errorOnce / 4) << "rank " << r;
        if (allReduce) {
          for (int t = 0; t < kSteps; ++t)
            EXPECT_EQ(fed[r][t], fed[0][t]) << "rank " << r << " step " << t;
        }
      }
    }
  }
}

}  // namespace
}  // namespace cclz::test
