// The check exchange of device communicators (deferred_checks.h) over the control mesh
// (transport/host_mesh.h): each exchange posts this rank's block to each peer and takes one
// block from each. Host memory and TCP only: no CUDA call and no NCCL work, so whatever thread
// runs it, the only GPU work of the communicator is its data, queued by the caller's thread (or
// the proxy's) in call order (docs/collectives.md, "Checking the call").
#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "collective/deferred_checks.h"
#include "common/error.h"
#include "common/trace.h"
#include "transport/host_mesh.h"

namespace cclz {
namespace {

class MeshCheckExchange final : public CheckExchange {
 public:
  explicit MeshCheckExchange(HostMesh& mesh)
      : mesh_(mesh), ranks_(mesh.size()), slots_(kSlots), waitingFor_(mesh.size()) {
    for (Slot& s : slots_) s.received.resize(static_cast<size_t>(ranks_) * kBlockBytes);
  }

  int slots() const override { return kSlots; }

  void start(int slot, const uint8_t* mine, const std::vector<int>& peers) override {
    Slot& s = slots_[slot];
    CCLZ_REQUIRE(s.missing == 0, cclzInternalError, "a check slot reused before its exchange");
    s.peers = peers;
    s.missing = static_cast<int>(peers.size());
    ++started_;
    CCLZ_TRACE("control exchange %llu: %zu bytes with %zu peers",
               static_cast<unsigned long long>(started_), kBlockBytes, peers.size());
    // Queued: the next arrived() or idle() writes every exchange started since, one write per
    // peer (the checking thread starts all the checks waiting, then polls).
    for (int r : peers) {
      waitingFor_[r].push_back(slot);
      mesh_.queue(r, mine, kBlockBytes);
    }
  }

  bool arrived(int slot) override {
    // Blocks of several exchanges come in one read: a slot complete already needs no system
    // call, unless this rank's own blocks still wait to be written.
    if (!mesh_.hasQueued() && collect(slot)) return true;
    mesh_.progress(0);
    return collect(slot);
  }

  const uint8_t* received(int slot) override { return slots_[slot].received.data(); }

  void idle(int maxMs) override { mesh_.progress(maxMs); }

 private:
  static constexpr int kSlots = 64;
  struct Slot {
    std::vector<uint8_t> received;  // ranks_ blocks, by rank
    std::vector<int> peers;
    int missing = 0;  // peers whose block has not arrived
  };

  // Hands each peer's arrived blocks to its slots in the order they were started (the peer
  // posts its blocks in that same order), then says whether `slot` is complete.
  bool collect(int slot) {
    for (int r = 0; r < ranks_; ++r) {
      std::deque<int>& q = waitingFor_[r];
      while (!q.empty() &&
             mesh_.take(r, slots_[q.front()].received.data() + r * kBlockBytes, kBlockBytes)) {
        --slots_[q.front()].missing;
        q.pop_front();
      }
    }
    const Slot& s = slots_[slot];
    if (s.missing == 0) return true;
    for (int r : s.peers) {
      if (!mesh_.closed(r)) continue;
      const std::deque<int>& q = waitingFor_[r];
      CCLZ_REQUIRE(std::find(q.begin(), q.end(), slot) == q.end(), cclzSystemError,
                   "rank " + std::to_string(r) +
                       "'s control connection ended before its part of the exchange (" +
                       mesh_.closedWhy(r) +
                       "): its communicator was destroyed or aborted, or its process ended");
    }
    return false;
  }

  HostMesh& mesh_;
  const int ranks_;
  std::vector<Slot> slots_;
  std::vector<std::deque<int>> waitingFor_;  // by peer: slots waiting for its next block
  unsigned long long started_ = 0;
};

}  // namespace

std::unique_ptr<CheckExchange> makeMeshCheckExchange(HostMesh& mesh) {
  return std::make_unique<MeshCheckExchange>(mesh);
}

std::vector<uint8_t> exchangeAndWait(CheckExchange& exchange, int slot, int rank, int ranks,
                                     const void* mine, size_t bytes,
                                     const std::vector<int>& peers) {
  CCLZ_REQUIRE(bytes <= CheckExchange::kBlockBytes, cclzInternalError,
               "a control exchange carries at most one 64-byte block");
  std::vector<uint8_t> block(CheckExchange::kBlockBytes, 0);
  std::memcpy(block.data(), mine, bytes);
  exchange.start(slot, block.data(), peers);
  while (!exchange.arrived(slot)) exchange.idle(100);
  const uint8_t* received = exchange.received(slot);
  std::vector<uint8_t> out(static_cast<size_t>(ranks) * bytes, 0);
  for (int r : peers)
    std::memcpy(out.data() + r * bytes, received + r * CheckExchange::kBlockBytes, bytes);
  std::memcpy(out.data() + rank * bytes, mine, bytes);
  return out;
}

}  // namespace cclz
