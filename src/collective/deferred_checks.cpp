#include "collective/deferred_checks.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <utility>

#include "common/error.h"
#include "common/trace.h"

namespace cclz {

DeferredChecks::DeferredChecks(std::unique_ptr<CheckExchange> exchange, int rank,
                               std::function<void(const std::string&)> onFailure)
    : exchange_(std::move(exchange)), rank_(rank), onFailure_(std::move(onFailure)) {
  thread_ = std::thread([this] { loop(); });
}

DeferredChecks::~DeferredChecks() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    changed_.notify_all();
  }
  thread_.join();
}

void DeferredChecks::queue(const CallDescriptor& mine, const std::vector<int>& peers, CollOp op) {
  const int slots = exchange_->slots();
  Pending p{0, mine, peers, op};
  p.ranks.push_back(rank_);
  std::sort(p.ranks.begin(), p.ranks.end());
  std::unique_lock<std::mutex> lock(mutex_);
  // A slot is reused only once its check has been judged: the exchange writes into it.
  changed_.wait(lock, [&] {
    return !failure_.empty() || static_cast<int>(pending_.size()) < slots;
  });
  CCLZ_REQUIRE(failure_.empty(), cclzInvalidUsage,
               "an earlier call's check found that the ranks disagree: " + failure_);
  p.slot = static_cast<int>(started_ % slots);
  exchange_->start(p.slot, mine, peers);
  ++started_;
  pending_.push_back(std::move(p));
  changed_.notify_all();
}

void DeferredChecks::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] {
    return (pending_.empty() && failure_.empty()) || reported_ || stopping_;
  });
}

std::string DeferredChecks::failure() {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void DeferredChecks::loop() {
  try {
    exchange_->onCheckingThread();
  } catch (const std::exception& e) {
    fail(std::string("the checking thread could not start: ") + e.what());
    return;
  }
  for (;;) {
    Pending p;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (stopping_) return;
      p = pending_.front();  // stays queued, so its slot is not reused, until judged
    }
    std::string verdict;
    try {
      if (!awaitArrival(p)) return;
      verdict = judge(p);
    } catch (const std::exception& e) {
      verdict = std::string("its check's exchange failed: ") + e.what();
    }
    if (!verdict.empty()) {
      fail(std::string(collOpName(p.op)) + ": " + verdict);
      return;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.pop_front();
    changed_.notify_all();
  }
}

// A check usually arrives within tens of microseconds of its call, so the thread polls: a
// yield at first, then sleeps that grow to 1 ms, so that a peer that is far behind costs no
// core.
bool DeferredChecks::awaitArrival(const Pending& p) {
  using namespace std::chrono;
  auto pause = microseconds(0);
  while (!exchange_->arrived(p.slot)) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return false;
    }
    if (pause.count() == 0) {
      std::this_thread::yield();
      pause = microseconds(10);
    } else {
      std::this_thread::sleep_for(pause);
      pause = std::min<microseconds>(pause * 2, milliseconds(1));
    }
  }
  return true;
}

std::string DeferredChecks::judge(const Pending& p) {
  const CallDescriptor* received = exchange_->received(p.slot);
  std::vector<CallDescriptor> all(static_cast<size_t>(p.ranks.back()) + 1);
  for (int r : p.ranks) all[r] = r == rank_ ? p.mine : received[r];
  return compareDescriptors(all, p.ranks);
}

void DeferredChecks::fail(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    failure_ = message;
    pending_.clear();
    changed_.notify_all();
  }
  CCLZ_TRACE("deferred check failed: %s", message.c_str());
  // After failure_ is published: a caller waiting for a slot must not wait for the callback,
  // which may wait for that caller's call to end (Communicator::failCheck).
  onFailure_(message);
  std::lock_guard<std::mutex> lock(mutex_);
  reported_ = true;
  changed_.notify_all();
}

}  // namespace cclz
