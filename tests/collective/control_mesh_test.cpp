// Calls on communicators whose transport has a control mesh (transport/host_mesh.h), as device
// communicators' do, here over loopback ranks: the checks then run deferred on the checking
// thread over the mesh, while the caller's calls (adaptive trials, settled calls, error
// feedback) queue their data. The invariant that keeps NCCL from hanging: no thread but the
// caller's ever calls the transport, and every rank calls it in the same order. Every output is
// checked as in the other loopback suites.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cclz/cclz.h"
#include "coll_cases.h"
#include "coll_runner.h"
#include "loopback_ranks.h"
#include "transport/host_mesh.h"

namespace cclz::test {
namespace {

using namespace std::chrono_literals;

// One transport call: the thread that made it and what it was.
struct Use {
  std::thread::id thread;
  char what;
};

// Forwards every call to the loopback transport and records it; owns the rank's control mesh.
class RecordingTransport final : public Transport {
 public:
  RecordingTransport(std::unique_ptr<Transport> inner, std::unique_ptr<HostMesh> mesh,
                     std::vector<Use>* uses)
      : inner_(std::move(inner)), mesh_(std::move(mesh)), uses_(uses) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  MemoryKind memory() const override { return inner_->memory(); }
  const char* name() const override { return "recording loopback"; }
  bool learnsReceivedSize() const override { return inner_->learnsReceivedSize(); }
  void groupStart(cclzStream_t stream) override {
    use('g');
    inner_->groupStart(stream);
  }
  void send(const void* buf, uint64_t bytes, int peer) override {
    use('s');
    inner_->send(buf, bytes, peer);
  }
  void recv(void* buf, uint64_t capacity, int peer, uint64_t* receivedBytes) override {
    use('r');
    inner_->recv(buf, capacity, peer, receivedBytes);
  }
  void groupEnd() override {
    use('e');
    inner_->groupEnd();
  }
  void allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t stream) override {
    use('a');
    inner_->allGather(send, recv, bytes, stream);
  }
  bool reduceScatter(const void* send, void* recv, uint64_t count, int dtype, bool average,
                     cclzStream_t stream) override {
    use('R');
    return inner_->reduceScatter(send, recv, count, dtype, average, stream);
  }
  bool allReduce(const void* send, void* recv, uint64_t count, int dtype, bool average,
                 cclzStream_t stream) override {
    use('A');
    return inner_->allReduce(send, recv, count, dtype, average, stream);
  }
  uint64_t maxMessageBytes() const override { return inner_->maxMessageBytes(); }
  HostMesh* controlMesh() override { return mesh_.get(); }
  std::string asyncError() override { return inner_->asyncError(); }
  void abort() override {
    use('x');
    inner_->abort();
  }

 private:
  void use(char what) {
    std::lock_guard<std::mutex> lock(mutex_);
    uses_->push_back(Use{std::this_thread::get_id(), what});
  }
  std::unique_ptr<Transport> inner_;
  std::unique_ptr<HostMesh> mesh_;
  std::vector<Use>* uses_;
  std::mutex mutex_;
};

std::string launches(const std::vector<Use>& uses) {
  std::string order;
  for (const Use& u : uses)
    if (u.what == 'e' || u.what == 'a' || u.what == 'R' || u.what == 'A') order += u.what;
  return order;
}

TEST(LoopbackControlMesh, OnlyTheCallersThreadCallsTheTransportInTheSameOrderEverywhere) {
  constexpr int kTrialCalls = 2 * Tuner::kSmallKindTrialPairs;  // the cases are small kinds
  for (int n = 2; n <= 4; ++n) {
    SCOPED_TRACE(n);
    std::vector<MeshListener> listeners;
    std::vector<MeshAddress> addresses;
    for (int r = 0; r < n; ++r) {
      listeners.emplace_back("127.0.0.1");
      addresses.push_back(listeners.back().address());
    }
    std::vector<std::vector<Use>> uses(n);
    std::vector<std::thread::id> callers(n);
    std::vector<int> plain(n, 0), compressed(n, 0);
    TransportWrap wrap = [&](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
      const int r = t->rank();
      auto mesh = std::make_unique<HostMesh>(std::move(listeners[r]), addresses, r, 10s);
      return std::make_unique<RecordingTransport>(std::move(t), std::move(mesh), &uses[r]);
    };
    CommSettings settings = testSettings();
    settings.adaptive = true;
    settings.checkCalls = CheckCalls::Deferred;
    const std::vector<CollCase> cases = {
        {Coll::AllReduce, cclzFloat32, codecNamed("qgrad4"), 5003, cclzSum},
        {Coll::ReduceScatter, cclzBfloat16, codecNamed("fp8"), 2500, cclzAvg},
        {Coll::AllGather, cclzBfloat16, codecNamed("lossless"), 3000, cclzSum},
    };
    onRanks(
        n,
        [&](cclzComm_t comm, int r) {
          callers[r] = std::this_thread::get_id();
          // The kinds interleaved, each past its trials, as a training step calls them.
          for (int i = 0; i < kTrialCalls + 4; ++i)
            for (const CollCase& c : cases) {
              std::vector<uint8_t> out;
              ASSERT_EQ(runCase(comm, c, n, r, &out), cclzSuccess) << cclzGetLastError(comm);
              EXPECT_EQ(checkOutput(c, n, r, out), "") << "call " << i;
              cclzPath_t path = cclzPathCompressed;
              int decided = 0;
              ASSERT_EQ(cclzCommGetLastPath(comm, &path, &decided), cclzSuccess);
              (path == cclzPathPlain ? plain : compressed)[r]++;
            }
          cclzResult_t async = cclzSuccess;
          EXPECT_EQ(cclzCommGetAsyncError(comm, &async), cclzSuccess);
          EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(comm);
        },
        60s, wrap, settings);
    for (int r = 0; r < n; ++r) {
      EXPECT_GT(plain[r], 0) << "rank " << r;
      EXPECT_GT(compressed[r], 0) << "rank " << r;
      ASSERT_FALSE(uses[r].empty());
      for (const Use& u : uses[r])
        EXPECT_EQ(u.thread, callers[r]) << "rank " << r << ": '" << u.what << "' from a thread "
                                        << "that is not the caller's";
      // What NCCL would launch: each group (its end) and each collective, in order.
      EXPECT_EQ(launches(uses[r]), launches(uses[0]))
          << "rank " << r << " called the transport in another order";
    }
  }
}

}  // namespace
}  // namespace cclz::test
