#include "collective/deferred_checks.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <utility>

#include "common/error.h"
#include "common/trace.h"

namespace cclz {

struct DeferredChecks::Answer {
  bool done = false;
  std::vector<uint8_t> blocks;  // ranks_ blocks of kBlockBytes
};

DeferredChecks::DeferredChecks(std::unique_ptr<CheckExchange> exchange, int rank, int ranks,
                               std::function<void(const std::string&)> onFailure)
    : exchange_(std::move(exchange)),
      rank_(rank),
      ranks_(ranks),
      everyPeer_([&] {
        std::vector<int> peers;
        for (int r = 0; r < ranks; ++r)
          if (r != rank) peers.push_back(r);
        return peers;
      }()),
      onFailure_(std::move(onFailure)) {
  thread_ = std::thread([this] { loop(); });
}

DeferredChecks::~DeferredChecks() { stop(); }

void DeferredChecks::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

size_t DeferredChecks::ringBound() const { return 2 * static_cast<size_t>(exchange_->slots()); }

void DeferredChecks::handOver(std::unique_lock<std::mutex>& lock, Pending p) {
  // At most one ring of slots waits beyond those under way: the caller is then far ahead, and
  // waits until half of that is free (notifyLeft), not for each slot.
  if (waiting_.size() + started_.size() >= ringBound()) {
    ++roomWaiters_;
    changed_.wait(lock, [&] {
      return !failure_.empty() || stopping_ || waiting_.size() + started_.size() <= ringBound() / 2;
    });
    --roomWaiters_;
  }
  CCLZ_REQUIRE(failure_.empty(), cclzInvalidUsage,
               "an earlier call's check found that the ranks disagree: " + failure_);
  CCLZ_REQUIRE(!stopping_, cclzInvalidUsage, "the communicator is being destroyed");
  p.number = ++handed_;
  const bool urgent = p.answer != nullptr;
  waiting_.push_back(std::move(p));
  // Waking a thread that waits is a system call of microseconds, more than the rest of a small
  // call: wake it only when it sleeps with nothing to do, when an answer is awaited, or when a
  // ring of slots waits; while it works or lingers (loop) it finds hand-overs on its own.
  if (urgent || checkerSleeps_ || waiting_.size() >= static_cast<size_t>(exchange_->slots()))
    changed_.notify_all();
}

void DeferredChecks::queue(const CallDescriptor& mine, int peer, CollOp op) {
  static_assert(sizeof mine <= CheckExchange::kBlockBytes, "a descriptor is one block");
  CCLZ_REQUIRE(peer == kEveryPeer || (peer >= 0 && peer < ranks_ && peer != rank_),
               cclzInternalError, "a deferred check with rank " + std::to_string(peer));
  Pending p;
  std::memcpy(p.mine.data(), &mine, sizeof mine);
  p.peer = peer;
  p.op = op;
  std::unique_lock<std::mutex> lock(mutex_);
  handOver(lock, std::move(p));
}

std::vector<uint8_t> DeferredChecks::exchangeNow(const void* mine, size_t bytes,
                                                 const std::vector<int>& peers) {
  CCLZ_REQUIRE(bytes <= CheckExchange::kBlockBytes, cclzInternalError,
               "a control exchange carries at most one 64-byte block");
  const bool every = static_cast<int>(peers.size()) == ranks_ - 1;
  CCLZ_REQUIRE(every || peers.size() == 1, cclzInternalError,
               "a control exchange is with every other rank or with one");
  Pending p;
  std::memcpy(p.mine.data(), mine, bytes);
  p.peer = every ? kEveryPeer : peers[0];
  p.op = CollOp::AllGather;  // unused: an answer is not judged here
  auto answer = std::make_shared<Answer>();
  p.answer = answer;
  std::unique_lock<std::mutex> lock(mutex_);
  handOver(lock, std::move(p));
  changed_.wait(lock, [&] { return answer->done || !failure_.empty() || stopping_; });
  CCLZ_REQUIRE(answer->done, cclzInvalidUsage,
               failure_.empty() ? std::string("the communicator is being destroyed")
                                : "an earlier call's check found that the ranks disagree: " +
                                      failure_);
  std::vector<uint8_t> out(ranks_ * bytes, 0);
  for (int r : peers)
    std::memcpy(out.data() + r * bytes, answer->blocks.data() + r * CheckExchange::kBlockBytes,
                bytes);
  std::memcpy(out.data() + rank_ * bytes, mine, bytes);
  return out;
}

void DeferredChecks::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.notify_all();  // ends a pause of the thread's at once
  changed_.wait(lock, [&] {
    return (waiting_.empty() && started_.empty() && failure_.empty()) || reported_ || stopping_;
  });
}

std::string DeferredChecks::failure() {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

bool DeferredChecks::startWaiting() {
  bool any = false;
  for (;;) {
    Pending* next = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (waiting_.empty() || started_.size() >= static_cast<size_t>(exchange_->slots()))
        return any;
      started_.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
      next = &started_.back();  // deque: stays valid while only this thread pops
      next->slot = static_cast<int>(startedCount_++ % exchange_->slots());
    }
    exchange_->start(next->slot, next->mine.data(), peersOf(*next));
    any = true;
  }
}

// The thread starts every exchange handed over while slots are free, then polls the oldest.
// A check usually arrives within tens of microseconds, so it polls: a yield at first, then
// pauses that grow to 1 ms (ended early by a hand-over that wakes it), so that a peer far behind
// costs no core. With nothing to do it lingers for kLinger, looking for hand-overs every
// kLingerPoll, before it sleeps until woken: calls that come faster than that never pay for a
// wake-up (handOver).
void DeferredChecks::loop() {
  using namespace std::chrono;
  try {
    exchange_->onCheckingThread();
  } catch (const std::exception& e) {
    fail(std::string("the checking thread could not start: ") + e.what());
    return;
  }
  auto pause = microseconds(0);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto work = [&] { return stopping_ || !waiting_.empty() || !started_.empty(); };
      // Lingering waits on changed_ rather than sleeping: a hand-over that fills a ring of slots
      // wakes it at once (handOver), where a sleep would leave a burst of calls blocked.
      for (auto lingered = microseconds(0); !work() && lingered < kLinger; lingered += kLingerPoll)
        changed_.wait_for(lock, kLingerPoll);
      if (!work()) {
        checkerSleeps_ = true;
        changed_.wait(lock, work);
        checkerSleeps_ = false;
      }
      if (stopping_) return;
    }
    std::string verdict;
    try {
      if (startWaiting()) pause = microseconds(0);
      Pending* oldest = nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!started_.empty()) oldest = &started_.front();
      }
      if (!oldest) continue;
      if (!exchange_->arrived(oldest->slot)) {
        if (pause.count() == 0) {
          std::this_thread::yield();
          pause = microseconds(10);
        } else {
          // A hand-over ends the pause: its exchange starts at once.
          std::unique_lock<std::mutex> lock(mutex_);
          changed_.wait_for(lock, pause, [&] { return stopping_ || !waiting_.empty(); });
          pause = std::min<microseconds>(pause * 2, milliseconds(1));
        }
        continue;
      }
      pause = microseconds(0);
      if (oldest->answer) {
        const uint8_t* blocks = exchange_->received(oldest->slot);
        std::lock_guard<std::mutex> lock(mutex_);
        oldest->answer->blocks.assign(blocks, blocks + ranks_ * CheckExchange::kBlockBytes);
        oldest->answer->done = true;
        started_.pop_front();
        changed_.notify_all();
        continue;
      }
      verdict = judge(*oldest);
      if (verdict.empty()) {
        CCLZ_TRACE("deferred check %llu (%s): agreed",
                   static_cast<unsigned long long>(oldest->number), collOpName(oldest->op));
        std::lock_guard<std::mutex> lock(mutex_);
        started_.pop_front();
        notifyLeft();
        continue;
      }
      verdict = std::string(collOpName(oldest->op)) + ": " + verdict;
    } catch (const std::exception& e) {
      verdict = std::string("a control exchange failed: ") + e.what();
    }
    fail(verdict);
    return;
  }
}

void DeferredChecks::notifyLeft() {
  const size_t inRing = waiting_.size() + started_.size();
  if (inRing == 0 || (roomWaiters_ > 0 && inRing <= ringBound() / 2)) changed_.notify_all();
}

const std::vector<int>& DeferredChecks::peersOf(const Pending& p) {
  if (p.peer == kEveryPeer) return everyPeer_;
  onePeer_.assign(1, p.peer);
  return onePeer_;
}

std::string DeferredChecks::judge(const Pending& p) {
  const uint8_t* received = exchange_->received(p.slot);
  std::vector<int> ranks = peersOf(p);
  ranks.push_back(rank_);
  std::sort(ranks.begin(), ranks.end());
  std::vector<CallDescriptor> all(ranks_);
  for (int r : ranks)
    std::memcpy(&all[r], r == rank_ ? p.mine.data() : received + r * CheckExchange::kBlockBytes,
                sizeof(CallDescriptor));
  return compareDescriptors(all, ranks);
}

void DeferredChecks::fail(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = message;
    waiting_.clear();
    started_.clear();
    changed_.notify_all();
  }
  CCLZ_TRACE("deferred check failed: %s", message.c_str());
  // After failure_ is published: a caller waiting to hand over must not wait for the callback,
  // which may wait for that caller's call to end (Communicator::failCheck).
  onFailure_(message);
  std::lock_guard<std::mutex> lock(mutex_);
  reported_ = true;
  changed_.notify_all();
}

}  // namespace cclz
