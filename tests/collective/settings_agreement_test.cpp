// The exchange at creation (collective/settings_agreement.cpp): where one rank is given a setting
// that the others are not (a CCLZ_* variable in one rank's environment, another comm config),
// creating the communicator fails on every rank with cclzInvalidUsage naming the setting and the
// ranks, instead of the ranks running different protocols and waiting for each other. Over a
// host transport (the exchange is its all-gather) and over a control mesh (device communicators'
// way), ranks as threads.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective/plan.h"
#include "common/error.h"
#include "forwarding_transport.h"
#include "loopback_ranks.h"
#include "transport/host_mesh.h"

namespace cclz::test {
namespace {

using namespace std::chrono_literals;

// The loopback transport with a control mesh of its own, as a device transport has.
class MeshTransport final : public ForwardingTransport {
 public:
  MeshTransport(std::unique_ptr<Transport> inner, std::unique_ptr<HostMesh> mesh)
      : ForwardingTransport(std::move(inner)), mesh_(std::move(mesh)) {}
  HostMesh* controlMesh() override { return mesh_.get(); }

 private:
  std::unique_ptr<HostMesh> mesh_;
};

// n ranks' listeners on the loopback interface, and their addresses: wrap(t) gives rank t's
// transport its control mesh to them.
struct Listening {
  explicit Listening(int n) {
    for (int r = 0; r < n; ++r) {
      listeners.emplace_back("127.0.0.1");
      addresses.push_back(listeners.back().address());
    }
  }
  std::unique_ptr<Transport> wrap(std::unique_ptr<Transport> t) {
    const int r = t->rank();
    return std::make_unique<MeshTransport>(
        std::move(t), std::make_unique<HostMesh>(std::move(listeners[r]), addresses, r, 10s));
  }
  std::vector<MeshListener> listeners;
  std::vector<MeshAddress> addresses;
};

// Creates a communicator on each of n rank threads with settingsOf(rank), over the loopback
// (withMesh: and a control mesh). Returns each rank's error message, empty where creation
// succeeded (that communicator then made a call, so that a success is a working one).
std::vector<std::string> create(int n, bool withMesh,
                                const std::function<CommSettings(int)>& settingsOf) {
  auto hub = std::make_shared<LoopbackHub>(n, 20s);
  Listening mesh(withMesh ? n : 0);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      std::unique_ptr<Transport> t = std::make_unique<LoopbackTransport>(hub, r);
      if (withMesh) t = mesh.wrap(std::move(t));
      try {
        Communicator comm(std::move(t), settingsOf(r));
        std::vector<float> in(8, static_cast<float>(r)), out(8 * n, -1.0f);
        comm.transport().allGather(in.data(), out.data(), in.size() * sizeof(float), nullptr);
        for (int p = 0; p < n; ++p) EXPECT_EQ(out[p * 8], static_cast<float>(p));
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), cclzInvalidUsage) << e.what();
        errors[r] = e.what();
        if (errors[r].empty()) errors[r] = "(an error without a message)";
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

struct Difference {
  const char* named;  // what the message must name
  std::function<void(CommSettings&)> change;
};

std::vector<Difference> differences() {
  return {
      {"CCLZ_TWO_LEVEL", [](CommSettings& s) { s.twoLevel = !s.twoLevel; }},
      {"CCLZ_PIECE_BYTES", [](CommSettings& s) { s.pieceBytes = 2 * kTestPieceBytes; }},
      {"CCLZ_CHECK_CALLS", [](CommSettings& s) { s.checkCalls = CheckCalls::First; }},
      {"adaptive", [](CommSettings& s) { s.adaptive = !s.adaptive; }},
      {"CCLZ_OVERLAP_GATHER", [](CommSettings& s) { s.overlapMergedGather = true; }},
      {"CCLZ_OVERLAP_COPY", [](CommSettings& s) { s.overlapCopy = OverlapCopy::Auto; }},
      {"CCLZ_FUSED", [](CommSettings& s) { s.fused = s.fusedCopyEngines = true; }},
      {"CCLZ_FUSED", [](CommSettings& s) { s.fused = s.fusedDirect = true; }},
  };
}

void expectEveryRankRefuses(bool withMesh) {
  for (const Difference& d : differences()) {
    for (int n : {2, 3}) {
      SCOPED_TRACE(std::string(d.named) + " on " + std::to_string(n) + " ranks");
      const int odd = n - 1;  // the one rank given the other value
      const std::vector<std::string> errors = create(n, withMesh, [&](int r) {
        CommSettings s = testSettings();
        if (r == odd) d.change(s);
        return s;
      });
      for (int r = 0; r < n; ++r) {
        SCOPED_TRACE("rank " + std::to_string(r));
        ASSERT_FALSE(errors[r].empty()) << "creation succeeded";
        EXPECT_NE(errors[r].find(d.named), std::string::npos) << errors[r];
        EXPECT_NE(errors[r].find("differs across ranks"), std::string::npos) << errors[r];
        // Each rank names the odd rank, or (the odd rank itself) another one.
        const std::string other = "rank " + std::to_string(r == odd ? 0 : odd);
        EXPECT_NE(errors[r].find(other), std::string::npos) << errors[r];
      }
    }
  }
}

TEST(SettingsAgreement, ADifferentSettingFailsEveryRankOverAHostTransport) {
  expectEveryRankRefuses(false);
}

TEST(SettingsAgreement, ADifferentSettingFailsEveryRankOverAControlMesh) {
  expectEveryRankRefuses(true);
}

TEST(SettingsAgreement, TheSameSettingsCreateWorkingCommunicators) {
  for (bool withMesh : {false, true}) {
    const std::vector<std::string> errors = create(3, withMesh, [](int) {
      CommSettings s = testSettings();
      s.twoLevel = true;
      s.pieceBytes = 8192;
      return s;
    });
    for (const std::string& e : errors) EXPECT_EQ(e, "");
  }
}

// The node names that only the layout reads may differ: they say where each rank is.
TEST(SettingsAgreement, RanksOnDifferentNodesAgree) {
  const std::vector<std::string> errors = create(4, true, [](int r) {
    CommSettings s = testSettings();
    s.twoLevel = true;
    s.nodeName = "node" + std::to_string(r / 2);
    return s;
  });
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// everyRankCan, the agreement of the overlapped GEMMs' first call on the copy engines: true on
// every rank only where it is true on every rank, over a host transport and over a control mesh.
TEST(SettingsAgreement, EveryRankCanIsTrueOnlyWhereEveryRankIs) {
  for (bool withMesh : {false, true})
    for (int n : {1, 2, 3}) {
      SCOPED_TRACE(std::string(withMesh ? "mesh, " : "host, ") + std::to_string(n) + " ranks");
      Listening mesh(withMesh ? n : 0);
      const TransportWrap wrap = [&](std::unique_ptr<Transport> t) -> std::unique_ptr<Transport> {
        return withMesh ? mesh.wrap(std::move(t)) : std::move(t);
      };
      std::vector<int> answers(n * (n + 1), -1);
      onRanks(
          n,
          [&](cclzComm_t comm, int rank) {
            Communicator& c = *comm->impl;
            for (int no = 0; no <= n; ++no)  // rank `no` says no (n: nobody does)
              answers[no * n + rank] = everyRankCan(c, rank != no) ? 1 : 0;
          },
          std::chrono::seconds(20), wrap);
      for (int no = 0; no <= n; ++no)
        for (int r = 0; r < n; ++r)
          EXPECT_EQ(answers[no * n + r], no == n ? 1 : 0) << "rank " << no << " said no, rank " << r;
    }
}

}  // namespace
}  // namespace cclz::test
