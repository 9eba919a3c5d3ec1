// Probe (not part of cclz): the host time of one plain call (codec none, adaptive off, the
// default deferred check) through cclz's call path, without the network: ranks are threads whose
// transport's collectives return at once and whose checks travel over a control mesh on the
// loopback interface, as a device communicator's do. What it prints is what cclz adds on the
// caller's thread to each call that NCCL alone would queue (docs/collectives.md, "Checking the
// call"; issue 36's small calls). For 2 ranks: the median over rounds of ns per call of
// cclzAllReduce and cclzAllGather, in batches of 20 calls (a training step's burst, nccl-tests'
// -n 20), the checks drained between batches, untimed: a caller far ahead of its checks would
// time the checking thread's exchanges instead. That is the third line: 10000 all-reduces and
// the drain of their checks, the rate a long burst of calls is held to (at most two rings of
// checks wait: DeferredChecks::handOver).
// Build and run from the repository root after building cclz_core in build/ (a CUDA build also
// needs its libraries, which the probe never calls on its host buffers):
//   g++ -O2 -std=c++20 -Isrc -Iinclude -Itests/collective bench/probes/callcost.cpp \
//       build/src/libcclz_core.a -L/usr/local/cuda/lib64 -L/usr/local/cuda/lib64/stubs \
//       -lcudart -lnccl -lcublasLt -lcuda $(mpicxx --showme:link) -lpthread -o /tmp/callcost
//   LD_LIBRARY_PATH=/usr/local/cuda/lib64 /tmp/callcost
// (perf record -g /tmp/callcost shows where the time goes.)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "cclz/cclz.h"
#include "collective/communicator.h"
#include "forwarding_transport.h"
#include "transport/host_mesh.h"
#include "transport/loopback.h"

namespace cclz {
namespace {

using namespace std::chrono_literals;

// Collectives that return at once (as NCCL's queue and return), a control mesh of its own.
class InstantTransport final : public test::ForwardingTransport {
 public:
  InstantTransport(std::unique_ptr<Transport> inner, std::unique_ptr<HostMesh> mesh)
      : ForwardingTransport(std::move(inner)), mesh_(std::move(mesh)) {}
  void allGather(const void*, void*, uint64_t, cclzStream_t) override {}
  bool allReduce(const void*, void*, uint64_t, int, bool, cclzStream_t) override { return true; }
  HostMesh* controlMesh() override { return mesh_.get(); }

 private:
  std::unique_ptr<HostMesh> mesh_;
};

constexpr int kRanks = 2, kBatch = 20, kBatches = 500, kRounds = 7;

void run() {
  auto hub = std::make_shared<LoopbackHub>(kRanks, 60s);
  std::vector<MeshListener> listeners;
  std::vector<MeshAddress> addresses;
  for (int r = 0; r < kRanks; ++r) {
    listeners.emplace_back("127.0.0.1");
    addresses.push_back(listeners.back().address());
  }
  std::atomic<int> arrived{0};
  std::vector<std::vector<double>> times(3);  // [way][round], rank 0's ns per call
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      auto t = std::make_unique<InstantTransport>(
          std::make_unique<LoopbackTransport>(hub, r),
          std::make_unique<HostMesh>(std::move(listeners[r]), addresses, r, 10s));
      CommSettings s;
      s.adaptive = false;
      auto* comm = new cclzComm;
      comm->impl = std::make_unique<Communicator>(std::move(t), s);
      std::vector<uint16_t> in(32768), out(32768 * kRanks);
      auto call = [&](int op) {
        const cclzResult_t code =
            op != 1 ? cclzAllReduce(in.data(), in.data(), in.size(), cclzBfloat16, cclzSum, comm,
                                    nullptr, nullptr)
                    : cclzAllGather(in.data(), out.data(), in.size(), cclzBfloat16, comm, nullptr,
                                    nullptr);
        if (code != cclzSuccess) {
          std::fprintf(stderr, "rank %d: %s\n", r, cclzGetLastError(comm));
          std::abort();
        }
      };
      using Clock = std::chrono::steady_clock;
      auto since = [](Clock::time_point t0) {
        return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
      };
      for (int way = 0; way < 3; ++way)
        for (int round = 0; round < kRounds; ++round) {
          // Start together (a spin barrier), so that neither rank's checks wait for the other.
          const int target = (way * kRounds + round + 1) * kRanks;
          arrived.fetch_add(1);
          while (arrived.load() < target) std::this_thread::yield();
          double ns = 0;
          if (way < 2) {
            for (int b = 0; b < kBatches; ++b) {
              const auto t0 = Clock::now();
              for (int i = 0; i < kBatch; ++i) call(way);
              ns += since(t0);
              comm->impl->deferredChecks().drain();
            }
            ns /= kBatches * kBatch;
          } else {
            const auto t0 = Clock::now();
            for (int i = 0; i < kBatches * kBatch; ++i) call(way);
            comm->impl->deferredChecks().drain();
            ns = since(t0) / (kBatches * kBatch);
          }
          if (r == 0) times[way].push_back(ns);
        }
      cclzCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
  const char* names[] = {"all-reduce, batches of 20", "all-gather, batches of 20",
                         "all-reduce, 10000 in a row and their checks"};
  for (int way = 0; way < 3; ++way) {
    std::sort(times[way].begin(), times[way].end());
    std::printf("%s, codec none, deferred checks, 2 ranks: %.0f ns per call (median of %d "
                "rounds; min %.0f)\n",
                names[way], times[way][kRounds / 2], kRounds, times[way].front());
  }
}

}  // namespace
}  // namespace cclz

int main() { cclz::run(); }
