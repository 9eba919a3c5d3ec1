#include "transport/loopback.h"

#include <cstring>
#include <string>

#include "common/error.h"

namespace cclz {

LoopbackHub::LoopbackHub(int ranks, std::chrono::milliseconds timeout)
    : ranks_(ranks), timeout_(timeout), boxes_(static_cast<size_t>(ranks) * ranks) {
  CCLZ_REQUIRE(ranks >= 1, cclzInvalidArgument, "a loopback hub needs at least one rank");
}

void LoopbackHub::post(int from, int to, const void* data, uint64_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  std::vector<uint8_t> message(p, p + bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    box(from, to).push_back(std::move(message));
  }
  arrived_.notify_all();
}

uint64_t LoopbackHub::take(int from, int to, void* buf, uint64_t capacity) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto& queue = box(from, to);
  const bool ready =
      arrived_.wait_for(lock, timeout_, [&] { return aborted_ || !queue.empty(); });
  CCLZ_REQUIRE(!aborted_, cclzSystemError, "the loopback transport was aborted");
  CCLZ_REQUIRE(ready, cclzSystemError,
               "rank " + std::to_string(to) + " waited too long for a message from rank " +
                   std::to_string(from));
  std::vector<uint8_t> message = std::move(queue.front());
  queue.pop_front();
  CCLZ_REQUIRE(message.size() <= capacity, cclzSystemError,
               "a message of " + std::to_string(message.size()) + " bytes from rank " +
                   std::to_string(from) + " does not fit the " + std::to_string(capacity) +
                   " bytes posted for it");
  if (!message.empty()) std::memcpy(buf, message.data(), message.size());
  return message.size();
}

void LoopbackHub::abort() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
  }
  arrived_.notify_all();
}

LoopbackTransport::LoopbackTransport(std::shared_ptr<LoopbackHub> hub, int rank)
    : hub_(std::move(hub)), rank_(rank) {
  CCLZ_REQUIRE(rank >= 0 && rank < hub_->size(), cclzInvalidArgument, "rank out of range");
}

void LoopbackTransport::checkPeer(int peer) const {
  CCLZ_REQUIRE(peer >= 0 && peer < size(), cclzInvalidArgument,
               "peer " + std::to_string(peer) + " is not a rank of the communicator");
}

void LoopbackTransport::groupStart(cclzStream_t) {
  CCLZ_REQUIRE(!inGroup_, cclzInternalError, "loopback groups do not nest");
  inGroup_ = true;
  recvs_.clear();
}

// Sends are buffered by the hub, so posting them at once cannot deadlock.
void LoopbackTransport::send(const void* buf, uint64_t bytes, int peer) {
  checkPeer(peer);
  CCLZ_REQUIRE(inGroup_, cclzInternalError, "send outside a group");
  hub_->post(rank_, peer, buf, bytes);
}

void LoopbackTransport::recv(void* buf, uint64_t capacity, int peer, uint64_t* receivedBytes) {
  checkPeer(peer);
  CCLZ_REQUIRE(inGroup_, cclzInternalError, "recv outside a group");
  recvs_.push_back({buf, capacity, peer, receivedBytes});
}

void LoopbackTransport::groupEnd() {
  CCLZ_REQUIRE(inGroup_, cclzInternalError, "groupEnd without groupStart");
  inGroup_ = false;
  for (const PendingRecv& r : recvs_) {
    const uint64_t got = hub_->take(r.peer, rank_, r.buf, r.capacity);
    if (r.receivedBytes) *r.receivedBytes = got;
  }
  recvs_.clear();
}

// A group of sends to every rank, this one included, and a receive from each.
void LoopbackTransport::allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t) {
  groupStart(nullptr);
  for (int r = 0; r < size(); ++r) {
    this->send(send, bytes, r);
    this->recv(static_cast<uint8_t*>(recv) + r * bytes, bytes, r, nullptr);
  }
  groupEnd();
}

}  // namespace cclz
