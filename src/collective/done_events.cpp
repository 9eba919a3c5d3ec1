#include "collective/done_events.h"

#include <algorithm>
#include <utility>

namespace cclz {

uint64_t DoneEvents::issue() {
  std::lock_guard<std::mutex> lock(mutex_);
  return ++issued_;
}

uint64_t DoneEvents::lastIssued() {
  std::lock_guard<std::mutex> lock(mutex_);
  return issued_;
}

void DoneEvents::publish(uint64_t ticket, Event event) {
  std::lock_guard<std::mutex> lock(mutex_);
  published_ = std::max(published_, ticket);
  if (event && ticket >= latestTicket_) {
    latest_ = std::move(event);
    latestTicket_ = ticket;
  }
  changed_.notify_all();
}

DoneEvents::Event DoneEvents::waitFor(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return published_ >= ticket; });
  return latest_;
}

}  // namespace cclz
