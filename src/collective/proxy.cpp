#include "collective/proxy.h"

#include <utility>

namespace cclz {

Proxy::Proxy(std::function<void()> onStart)
    : thread_([this, start = std::move(onStart)] { loop(start); }) {}

Proxy::~Proxy() { stop(false); }

void Proxy::submit(Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!stopping_) {
      queue_.push_back(std::move(job));
      changed_.notify_all();
      return;
    }
  }
  job.cancel();
}

bool Proxy::busy() {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_ || !queue_.empty();
}

void Proxy::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [&] { return !running_ && queue_.empty(); });
}

void Proxy::stop(bool cancelQueued) {
  std::deque<Job> dropped;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    if (cancelQueued) dropped.swap(queue_);
    changed_.notify_all();
  }
  for (Job& job : dropped) job.cancel();
  if (thread_.joinable()) thread_.join();
}

void Proxy::loop(const std::function<void()>& onStart) {
  if (onStart) onStart();
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to run
    Job job = std::move(queue_.front());
    queue_.pop_front();
    running_ = true;
    lock.unlock();
    job.run();
    lock.lock();
    running_ = false;
    changed_.notify_all();
  }
}

}  // namespace cclz
