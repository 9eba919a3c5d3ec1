// Probe (not part of cclz): what a control exchange over the control mesh costs
// (src/transport/host_mesh.h; docs/collectives.md, "Checking the call"). Ranks are threads of
// one process on the loopback interface, as the CPU tests run them. For 2, 3 and 4 ranks it
// prints the median and 90th percentile of:
//   post:  posting one 64-byte block to every peer (what the checking thread does per check);
//   round: one exchange waited for on the calling thread (exchangeAndWait: CCLZ_CHECK_CALLS=1),
//          the slowest rank's time, the ranks released together by a spin barrier;
//   queue: one deferred check handed to the checking thread (DeferredChecks::queue: what the
//          caller pays per call by default), and the time until every check was judged.
// Build and run from the repository root after building cclz_core in build/:
//   g++ -O2 -std=c++17 -Isrc -Iinclude bench/probes/meshcost.cpp build/src/libcclz_core.a \
//       -lpthread -o /tmp/meshcost && /tmp/meshcost
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "collective/deferred_checks.h"
#include "transport/host_mesh.h"

using namespace cclz;
using Clock = std::chrono::steady_clock;

static double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}
static double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

// A barrier the ranks spin on, so that a round starts together without a system call.
struct Barrier {
  std::atomic<int> arrived{0}, generation{0};
  int n;
  explicit Barrier(int ranks) : n(ranks) {}
  void wait() {
    const int g = generation.load();
    if (arrived.fetch_add(1) + 1 == n) {
      arrived = 0;
      generation.fetch_add(1);
      return;
    }
    while (generation.load() == g) std::this_thread::yield();
  }
};

int main() {
  constexpr int kRounds = 2000;
  std::printf(
      "ranks | post us (median / p90) | round us (median / p90) | queue us (median / p90) | "
      "%d queued checks judged after, ms\n",
      kRounds);
  for (int n = 2; n <= 4; ++n) {
    std::vector<MeshListener> listeners;
    std::vector<MeshAddress> addresses;
    for (int r = 0; r < n; ++r) {
      listeners.emplace_back("127.0.0.1");
      addresses.push_back(listeners.back().address());
    }
    Barrier barrier(n);
    std::vector<std::vector<double>> post(n), round(n), queue(n);
    std::vector<double> judged(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        HostMesh mesh(std::move(listeners[r]), addresses, r, std::chrono::seconds(10));
        std::vector<int> peers;
        for (int q = 0; q < n; ++q)
          if (q != r) peers.push_back(q);
        {
          std::unique_ptr<CheckExchange> x = makeMeshCheckExchange(mesh);
          uint8_t block[CheckExchange::kBlockBytes] = {};
          for (int i = 0; i < kRounds; ++i) {
            barrier.wait();
            const auto t0 = Clock::now();
            exchangeAndWait(*x, i % x->slots(), r, n, block, sizeof block, peers);
            round[r].push_back(us(t0, Clock::now()));
          }
          for (int i = 0; i < kRounds; ++i) {  // posts alone, then what they carried taken
            const auto t0 = Clock::now();
            for (int q : peers) mesh.post(q, block, sizeof block);
            post[r].push_back(us(t0, Clock::now()));
          }
          std::vector<int> left(n, kRounds);
          left[r] = 0;
          while (std::any_of(left.begin(), left.end(), [](int v) { return v > 0; })) {
            mesh.progress(10);
            for (int q : peers)
              while (left[q] > 0 && mesh.take(q, block, sizeof block)) --left[q];
          }
        }
        barrier.wait();
        DeferredChecks checks(makeMeshCheckExchange(mesh), r, n, [](const std::string&) {});
        CallDescriptor d{};
        d.magic = kDescriptorMagic;
        d.version = kDescriptorVersion;
        d.op = static_cast<uint8_t>(CollOp::AllReduce);
        d.ranks = n;
        d.peer = -1;
        d.count = 1000;
        const auto begin = Clock::now();
        for (int i = 0; i < kRounds; ++i) {
          const auto t0 = Clock::now();
          checks.queue(d, DeferredChecks::kEveryPeer, CollOp::AllReduce);
          queue[r].push_back(us(t0, Clock::now()));
        }
        checks.drain();
        judged[r] = us(begin, Clock::now()) / 1000;
        barrier.wait();
      });
    for (auto& t : threads) t.join();
    std::vector<double> roundMax(kRounds), postAll, queueAll;
    for (int i = 0; i < kRounds; ++i)
      for (int r = 0; r < n; ++r) roundMax[i] = std::max(roundMax[i], round[r][i]);
    for (int r = 0; r < n; ++r) {
      postAll.insert(postAll.end(), post[r].begin(), post[r].end());
      queueAll.insert(queueAll.end(), queue[r].begin(), queue[r].end());
    }
    std::printf("%d | %.1f / %.1f | %.1f / %.1f | %.1f / %.1f | %.1f\n", n, quantile(postAll, 0.5),
                quantile(postAll, 0.9), quantile(roundMax, 0.5), quantile(roundMax, 0.9),
                quantile(queueAll, 0.5), quantile(queueAll, 0.9),
                *std::max_element(judged.begin(), judged.end()));
  }
  return 0;
}
