// The overlapped GEMMs' host path on 1-4 ranks (threads over the loopback transport), plain and
// with the fp8 codec: all-gather + GEMM gives the gathered matrix and its product with each
// rank's own weight, GEMM + reduce-scatter each rank's rows of the summed partial products, both
// bit for bit against the same steps done without the schedule (gather, then one GEMM; the n
// partials, each through its frame, summed in the order they arrive, the rank's own last, with
// the collectives' element operations). Across nodes of several ranks the all-gather's
// two-level routes give the same bytes; with fp8 the reduce-scatter adds inside each node first
// (two_level_reference.h), without a codec it stays direct.
#include "overlap/host_overlap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "codec/codec.h"
#include "collective/forwarding_transport.h"
#include "collective/reduce.h"
#include "common/float_bits.h"
#include "overlap/host_gemm.h"
#include "overlap/schedule.h"
#include "support/data.h"
#include "transport/loopback.h"
#include "two_level_reference.h"

namespace cclz::overlap {
namespace {

struct Case {
  int ranks;
  int dtype;
  bool fp8;
};

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return std::to_string(info.param.ranks) + "ranks_" + test::dtypeLabel(info.param.dtype) +
         (info.param.fp8 ? "_fp8" : "_plain");
}

constexpr uint64_t kM = 24, kN = 40, kK = 64;  // rows per chunk, output columns, inner dimension

std::vector<uint8_t> seeded(int dtype, uint64_t count, uint64_t seed) {
  return test::makeData(test::DataKind::kGauss1, dtype, count, 0, seed);
}

OverlapCall callFor(const Case& c) {
  OverlapCall call;
  call.m = kM, call.n = kN, call.k = kK, call.transB = true, call.dtype = c.dtype;
  if (c.fp8) {
    call.codec = &codecFor(cclzCodecFp8);
    call.config = cclzCodecConfig_t CCLZ_CODEC_CONFIG_INITIALIZER;
    call.config.codec = cclzCodecFp8;
  }
  return call;
}

// What a chunk becomes on its way: its frame decoded, or itself.
std::vector<uint8_t> throughWire(const OverlapCall& call, const std::vector<uint8_t>& rows,
                                 uint64_t elements) {
  if (!call.codec) return rows;
  std::vector<uint8_t> frame(call.codec->maxEncodedBytes(call.config, call.dtype, elements));
  const uint64_t used = call.codec->encodeHost(call.config, call.dtype, rows.data(), elements,
                                               frame.data(), frame.size());
  std::vector<uint8_t> out(rows.size());
  EXPECT_EQ(call.codec->decodeHost(call.config, frame.data(), used, call.dtype, elements,
                                   out.data()),
            0u);
  return out;
}

std::vector<uint8_t> gemm(const OverlapCall& call, const uint8_t* a, const uint8_t* b) {
  std::vector<uint8_t> c(kM * kN * test::elementSize(call.dtype));
  GemmArgs g;
  g.a = a, g.b = b, g.c = c.data(), g.m = kM, g.n = kN, g.k = kK, g.transB = true;
  g.dtype = call.dtype, g.lda = kK, g.ldb = kK, g.ldc = kN;
  gemmHost(g);
  return c;
}

// Counts the sends that cross a node boundary of `nodes`.
class CrossingCounter final : public test::ForwardingTransport {
 public:
  CrossingCounter(std::unique_ptr<Transport> inner, const NodeLayout& nodes,
                  std::atomic<int>* crossed)
      : ForwardingTransport(std::move(inner)), nodes_(nodes), crossed_(crossed) {}
  void send(const void* buf, uint64_t bytes, int peer) override {
    if (nodes_.nodeOf[peer] != nodes_.nodeOf[rank()]) ++*crossed_;
    ForwardingTransport::send(buf, bytes, peer);
  }

 private:
  const NodeLayout& nodes_;
  std::atomic<int>* crossed_;
};

// body on n ranks as threads over the loopback transport; with `nodes`, the sends that cross
// their boundaries counted into *crossed.
void onRanks(int n, const std::function<void(Transport&, int)>& body,
             const NodeLayout* nodes = nullptr, std::atomic<int>* crossed = nullptr) {
  auto hub = std::make_shared<LoopbackHub>(n, std::chrono::seconds(20));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      auto loopback = std::make_unique<LoopbackTransport>(hub, r);
      std::unique_ptr<Transport> t = std::move(loopback);
      if (nodes) t = std::make_unique<CrossingCounter>(std::move(t), *nodes, crossed);
      try {
        body(*t, r);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.what();
        hub->abort();
      }
    });
  for (auto& t : threads) t.join();
}

class HostOverlap : public ::testing::TestWithParam<Case> {};

// All-gather + GEMM on c.ranks ranks (across `nodes` where given): the gathered matrix is every
// chunk through its frame, the product each rank's weight times it, bit for bit.
void expectGatherThenProduct(const Case& c, const NodeLayout* nodes) {
  std::atomic<int> crossed{0};
  const size_t es = test::elementSize(c.dtype);
  const OverlapCall base = callFor(c);
  std::vector<std::vector<uint8_t>> a(c.ranks), b(c.ranks);
  for (int r = 0; r < c.ranks; ++r) {
    a[r] = seeded(c.dtype, kM * kK, 100 + r);
    b[r] = seeded(c.dtype, kN * kK, 200 + r);  // each rank's own weight shard
  }
  std::vector<uint8_t> gatheredWant;
  for (int r = 0; r < c.ranks; ++r) {
    const std::vector<uint8_t> chunk = throughWire(base, a[r], kM * kK);
    gatheredWant.insert(gatheredWant.end(), chunk.begin(), chunk.end());
  }
  onRanks(c.ranks, [&](Transport& t, int me) {
    std::vector<uint8_t> out(c.ranks * kM * kN * es, 0xA5), gathered(gatheredWant.size(), 0xA5);
    OverlapCall call = base;
    call.a = a[me].data(), call.b = b[me].data(), call.c = out.data();
    call.gathered = gathered.data();
    call.nodes = nodes;
    allGatherMatmulHost(t, call);
    EXPECT_EQ(gathered, gatheredWant) << "rank " << me;
    for (int r = 0; r < c.ranks; ++r) {
      const std::vector<uint8_t> want = gemm(call, gatheredWant.data() + r * kM * kK * es,
                                             b[me].data());
      EXPECT_EQ(std::vector<uint8_t>(out.begin() + r * kM * kN * es,
                                     out.begin() + (r + 1) * kM * kN * es),
                want)
          << "rank " << me << ", rows of chunk " << r;
    }
  }, nodes, &crossed);
  if (nodes) EXPECT_EQ(crossed.load(), c.ranks * (nodes->nodes - 1)) << "frames across the nodes";
}

TEST_P(HostOverlap, AllGatherMatmulIsTheGatherThenTheProduct) {
  expectGatherThenProduct(GetParam(), nullptr);
}

// Each rank's reduce-scatter input (ranks * kM rows of kK) and weight, seeded from `seed`.
struct Inputs {
  std::vector<std::vector<uint8_t>> a, b;
};
Inputs reduceScatterInputs(int ranks, int dtype, uint64_t seed) {
  Inputs in{std::vector<std::vector<uint8_t>>(ranks), std::vector<std::vector<uint8_t>>(ranks)};
  for (int r = 0; r < ranks; ++r) {
    in.a[r] = seeded(dtype, ranks * kM * kK, seed + r);
    in.b[r] = seeded(dtype, kN * kK, seed + 100 + r);
  }
  return in;
}

TEST_P(HostOverlap, MatmulReduceScatterIsTheSumOfThePartialsInArrivalOrder) {
  const Case c = GetParam();
  const size_t es = test::elementSize(c.dtype);
  const OverlapCall base = callFor(c);
  const auto [a, b] = reduceScatterInputs(c.ranks, c.dtype, 300);
  for (const int op : {int(cclzSum), int(cclzAvg)}) {
    onRanks(c.ranks, [&](Transport& t, int me) {
      std::vector<uint8_t> out(kM * kN * es, 0xA5);
      OverlapCall call = base;
      call.a = a[me].data(), call.b = b[me].data(), call.c = out.data(), call.redOp = op;
      matmulReduceScatterHost(t, call);
      std::vector<float> sum(kM * kN, 0.0f);
      for (int i = 0; i < c.ranks; ++i) {
        const int r = reduceOrder(me, c.ranks, i);
        const std::vector<uint8_t> partial = throughWire(
            call, gemm(call, a[r].data() + me * kM * kK * es, b[r].data()), kM * kN);
        for (uint64_t i = 0; i < kM * kN; ++i)
          reduce::accumulateElement(sum.data(), i, partial.data(), c.dtype);
      }
      std::vector<uint8_t> want(out.size());
      for (uint64_t i = 0; i < kM * kN; ++i)
        reduce::storeElement(sum.data(), i, op == cclzAvg ? float(c.ranks) : 1.0f, c.dtype,
                             want.data());
      EXPECT_EQ(out, want) << "rank " << me << (op == cclzAvg ? ", average" : ", sum");
    });
  }
}

std::vector<Case> cases() {
  std::vector<Case> all;
  for (int ranks = 1; ranks <= 4; ++ranks)
    for (int dtype : {int(cclzBfloat16), int(cclzFloat32)})
      for (bool fp8 : {false, true}) all.push_back({ranks, dtype, fp8});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostOverlap, ::testing::ValuesIn(cases()), caseName);

struct NodesCase {
  std::string label;
  int ranks;
  int (*nodeOf)(int);
  int dtype;
};

class HostOverlapAcrossNodes : public ::testing::TestWithParam<NodesCase> {};

NodeLayout layoutOf(const NodesCase& c) {
  std::vector<uint64_t> keys;
  for (int r = 0; r < c.ranks; ++r) keys.push_back(static_cast<uint64_t>(c.nodeOf(r)));
  return nodeLayoutFromKeys(keys);
}

TEST_P(HostOverlapAcrossNodes, AllGatherMatmulIsTheGatherThenTheProduct) {
  const NodesCase c = GetParam();
  const NodeLayout layout = layoutOf(c);
  for (const bool fp8 : {true, false}) expectGatherThenProduct({c.ranks, c.dtype, fp8}, &layout);
}

TEST_P(HostOverlapAcrossNodes, ReduceScatterWithFp8AddsInsideEachNodeFirst) {
  const NodesCase c = GetParam();
  const size_t es = test::elementSize(c.dtype);
  const NodeLayout layout = layoutOf(c);
  const auto [a, b] = reduceScatterInputs(c.ranks, c.dtype, 500);
  for (const bool fp8 : {true, false}) {
    const OverlapCall base = callFor({c.ranks, c.dtype, fp8});
    for (const int op : {int(cclzSum), int(cclzAvg)}) {
      std::atomic<int> crossed{0};
      onRanks(c.ranks, [&](Transport& t, int me) {
        std::vector<uint8_t> out(kM * kN * es, 0xA5);
        OverlapCall call = base;
        call.a = a[me].data(), call.b = b[me].data(), call.c = out.data(), call.redOp = op;
        call.nodes = &layout;
        matmulReduceScatterHost(t, call);
        auto partialOf = [&](int q) {
          return gemm(call, a[q].data() + me * kM * kK * es, b[q].data());
        };
        const float divisor = op == cclzAvg ? float(c.ranks) : 1.0f;
        std::vector<uint8_t> want;
        if (fp8) {
          want = test::twoLevelReduceScatterReference(
              layout, me, c.dtype, kM * kN, es, divisor, partialOf,
              [&](const std::vector<uint8_t>& rows) { return throughWire(call, rows, kM * kN); });
        } else {  // direct: the exact partials in arrival order, the rank's own last
          std::vector<float> sum(kM * kN, 0.0f);
          for (int i = 0; i < c.ranks; ++i) {
            const std::vector<uint8_t> p = partialOf(reduceOrder(me, c.ranks, i));
            for (uint64_t e = 0; e < kM * kN; ++e)
              reduce::accumulateElement(sum.data(), e, p.data(), c.dtype);
          }
          want.resize(out.size());
          for (uint64_t e = 0; e < kM * kN; ++e)
            reduce::storeElement(sum.data(), e, divisor, c.dtype, want.data());
        }
        EXPECT_EQ(out, want) << "rank " << me << (fp8 ? ", fp8" : ", plain")
                             << (op == cclzAvg ? ", average" : ", sum");
      }, &layout, &crossed);
      // Two-level: one frame per rank and other node; direct: every partial for another node.
      const int perNode = layout.perNode, nodes = layout.nodes;
      EXPECT_EQ(crossed.load(), c.ranks * (nodes - 1) * (fp8 ? 1 : perNode));
    }
  }
}

std::vector<NodesCase> nodesCases() {
  std::vector<NodesCase> all;
  for (int dtype : {int(cclzBfloat16), int(cclzFloat32)}) {
    const std::string d = test::dtypeLabel(dtype);
    all.push_back({"nodes2x2_" + d, 4, [](int r) { return r / 2; }, dtype});
    all.push_back({"nodes2x2_interleaved_" + d, 4, [](int r) { return r % 2; }, dtype});
    all.push_back({"nodes2x3_" + d, 6, [](int r) { return r / 3; }, dtype});
    all.push_back({"nodes3x2_interleaved_" + d, 6, [](int r) { return r % 3; }, dtype});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(Layouts, HostOverlapAcrossNodes, ::testing::ValuesIn(nodesCases()),
                         [](const auto& info) { return info.param.label; });

}  // namespace
}  // namespace cclz::overlap
