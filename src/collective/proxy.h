// The proxy: one thread per communicator that runs queued jobs in order (docs/collectives.md,
// "Calls that return at once"). On a device communicator with asyncCalls, every collective hands
// its data part to the proxy and returns: the proxy then does the host waits for frame sizes
// (lossless) instead of the caller. Jobs run one at a time in the order they were queued, which
// keeps the order of the communicator's NCCL operations the same on every rank. Plain C++: the
// CUDA parts live in the jobs.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace cclz {

class Proxy {
 public:
  struct Job {
    std::function<void()> run;     // on the proxy thread; must not throw
    std::function<void()> cancel;  // instead of run, when the job is dropped; must not throw
  };

  // Starts the thread; it calls onStart first (the device the jobs use).
  explicit Proxy(std::function<void()> onStart);
  // stop(false): every queued job still runs.
  ~Proxy();
  Proxy(const Proxy&) = delete;
  Proxy& operator=(const Proxy&) = delete;

  void submit(Job job);
  // Whether a job is queued or running. Only the thread that submits may rely on a false answer
  // staying false (nothing else queues jobs).
  bool busy();
  // Returns when every job queued so far has run.
  void drain();
  // Ends the thread: with `cancelQueued`, the jobs not yet started are cancelled (cancel()), else
  // they run first. The running job always finishes. Later submits are cancelled at once.
  void stop(bool cancelQueued);

 private:
  void loop(const std::function<void()>& onStart);

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  bool running_ = false;  // a job has been taken off the queue and has not finished
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace cclz
