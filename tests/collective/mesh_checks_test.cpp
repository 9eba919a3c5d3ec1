// Deferred call checks over the control mesh (deferred_checks.h, mesh_check_exchange.cpp), ranks
// as threads on the loopback interface: hundreds of checks of collectives and of send/recv pairs,
// with answered exchanges among them, agree on 2-4 ranks through reused slots; a mismatch fails
// every rank with the same verdict; a rank whose checks stop ends its peers' wait with an error
// instead of a hang; exchanges on the caller's thread (no checking thread) cycle through the
// slots.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collective/deferred_checks.h"
#include "common/error.h"
#include "transport/host_mesh.h"

namespace cclz {
namespace {

using namespace std::chrono_literals;

CallDescriptor descriptor(CollOp op, uint64_t count, int ranks, int peer = -1) {
  CallDescriptor d{};
  d.magic = kDescriptorMagic;
  d.version = kDescriptorVersion;
  d.op = static_cast<uint8_t>(op);
  d.dtype = cclzBfloat16;
  d.peer = peer;
  d.ranks = ranks;
  d.count = count;
  return d;
}

std::vector<int> everyOther(int n, int me) {
  std::vector<int> peers;
  for (int r = 0; r < n; ++r)
    if (r != me) peers.push_back(r);
  return peers;
}

// n meshes on 127.0.0.1, connected on n threads, then body(mesh, rank) on each.
void onMesh(int n, const std::function<void(HostMesh&, int)>& body) {
  std::vector<MeshListener> listeners;
  std::vector<MeshAddress> addresses;
  for (int r = 0; r < n; ++r) {
    listeners.emplace_back("127.0.0.1");
    addresses.push_back(listeners.back().address());
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      HostMesh mesh(std::move(listeners[r]), addresses, r, 10s);
      body(mesh, r);
    });
  for (auto& t : threads) t.join();
}

struct Reported {
  std::mutex mutex;
  std::vector<std::string> messages;
  std::function<void(const std::string&)> callback() {
    return [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mutex);
      messages.push_back(m);
    };
  }
};

// 400 calls, every rank alike: collectives (every peer), and with an even rank count send/recv
// pairs (rank r with r ^ 1, a send and the matching recv); every 9th an answered exchange of a
// value only that rank knows. More calls than slots, so slots are reused.
TEST(MeshChecks, ManyCallsAgreeOnEveryRank) {
  for (int n = 2; n <= 4; ++n) {
    SCOPED_TRACE(n);
    std::vector<std::string> failures(n);
    onMesh(n, [&](HostMesh& mesh, int me) {
      Reported reported;
      DeferredChecks checks(makeMeshCheckExchange(mesh), me, n, reported.callback());
      for (int i = 0; i < 400; ++i) {
        if (i % 9 == 4) {
          const uint64_t mine = 1000 * me + i;
          const std::vector<uint8_t> all =
              checks.exchangeNow(&mine, sizeof mine, everyOther(n, me));
          for (int r = 0; r < n; ++r) {
            uint64_t got = 0;
            std::memcpy(&got, all.data() + r * sizeof got, sizeof got);
            EXPECT_EQ(got, static_cast<uint64_t>(1000 * r + i)) << "call " << i;
          }
        } else if (n % 2 == 0 && i % 5 == 0) {
          const int peer = me ^ 1;
          const CollOp op = me < peer ? CollOp::Send : CollOp::Recv;
          checks.queue(descriptor(op, 100 + i, n, peer), peer, op);
        } else {
          checks.queue(descriptor(CollOp::AllGather, 100 + i, n), DeferredChecks::kEveryPeer,
                       CollOp::AllGather);
        }
      }
      checks.drain();
      failures[me] = checks.failure();
      std::lock_guard<std::mutex> lock(reported.mutex);
      EXPECT_TRUE(reported.messages.empty());
    });
    for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
  }
}

TEST(MeshChecks, AMismatchFailsEveryRankAlike) {
  constexpr int n = 3;
  std::vector<std::string> failures(n);
  onMesh(n, [&](HostMesh& mesh, int me) {
    Reported reported;
    DeferredChecks checks(makeMeshCheckExchange(mesh), me, n, reported.callback());
    try {
      for (int i = 0; i < 100; ++i) {
        const uint64_t count = i == 50 && me == 2 ? 7 : 100 + i;
        checks.queue(descriptor(CollOp::AllGather, count, n), DeferredChecks::kEveryPeer,
                     CollOp::AllGather);
      }
    } catch (const Error&) {  // a call after the failure is refused
    }
    checks.drain();
    failures[me] = checks.failure();
    std::lock_guard<std::mutex> lock(reported.mutex);
    EXPECT_EQ(reported.messages.size(), 1u);
  });
  EXPECT_NE(failures[0].find("count differs: 150 on rank 0, 7 on rank 2"), std::string::npos)
      << failures[0];
  for (int r = 1; r < n; ++r) EXPECT_EQ(failures[r], failures[0]) << "rank " << r;
}

// Rank 1 makes no calls and goes (its checks stopped, its mesh closed, as an abort does): rank 0's
// check of a call fails with the connection's end, and drain returns, instead of waiting forever.
TEST(MeshChecks, APeerThatGoesEndsTheWaitWithAnError) {
  std::string failure;
  onMesh(2, [&](HostMesh& mesh, int me) {
    if (me == 1) return;
    Reported reported;
    DeferredChecks checks(makeMeshCheckExchange(mesh), me, 2, reported.callback());
    checks.queue(descriptor(CollOp::AllGather, 1, 2), 1, CollOp::AllGather);
    checks.drain();
    failure = checks.failure();
  });
  EXPECT_NE(failure.find("rank 1's control connection ended"), std::string::npos) << failure;
}

// stop() while an exchange waits for a peer that is there but never answers: it returns.
TEST(MeshChecks, StopReturnsWhileAPeerNeverAnswers) {
  onMesh(2, [&](HostMesh& mesh, int me) {
    if (me == 1) {
      std::this_thread::sleep_for(300ms);  // connected, silent
      return;
    }
    Reported reported;
    DeferredChecks checks(makeMeshCheckExchange(mesh), me, 2, reported.callback());
    checks.queue(descriptor(CollOp::AllGather, 1, 2), 1, CollOp::AllGather);
    std::this_thread::sleep_for(50ms);
    const auto begin = std::chrono::steady_clock::now();
    checks.stop();
    EXPECT_LT(std::chrono::steady_clock::now() - begin, 1s);
    EXPECT_EQ(checks.failure(), "");
  });
}

// Without a checking thread: each exchange waits on the caller's thread, slot after slot.
TEST(MeshChecks, ExchangesOnTheCallersThreadCycleThroughTheSlots) {
  constexpr int n = 3;
  onMesh(n, [&](HostMesh& mesh, int me) {
    std::unique_ptr<CheckExchange> exchange = makeMeshCheckExchange(mesh);
    for (int i = 0; i < 3 * exchange->slots(); ++i) {
      const uint32_t mine = 100 * me + i;
      const std::vector<uint8_t> all = exchangeAndWait(*exchange, i % exchange->slots(), me, n,
                                                       &mine, sizeof mine, everyOther(n, me));
      for (int r = 0; r < n; ++r) {
        uint32_t got = 0;
        std::memcpy(&got, all.data() + r * sizeof got, sizeof got);
        ASSERT_EQ(got, static_cast<uint32_t>(100 * r + i)) << "exchange " << i;
      }
    }
  });
}

}  // namespace
}  // namespace cclz
