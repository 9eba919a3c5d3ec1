// Deferred call checks (CCLZ_CHECK_CALLS=deferred, the default on device communicators; docs/
// collectives.md, "Checking the call"). A checked call waits for its peers' descriptors before
// it queues data: on NCCL that is a host synchronization per call (~30 us over NVLink), more
// than a small collective takes. A deferred check queues the same 64-byte exchange and returns;
// the call queues its data at once, and a thread of the communicator judges the descriptors when
// they arrive. A mismatch then becomes the communicator's asynchronous error, and the
// communicator aborts its transport, which ends the transfers that the mismatch left waiting:
// an error, not a hang, though the call itself returned success and its output is undefined.
//
// Plain C++: the exchange is an interface (the device one in device_check_exchange.cpp), so
// that the ring of slots, the order and the thread are tested without a GPU.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cclz/cclz.h"
#include "collective/descriptor.h"

namespace cclz {

// Where the descriptors travel: slots() exchanges may be under way at once, each in its own
// slot, started in order on the caller's thread and polled by the checking thread.
class CheckExchange {
 public:
  virtual ~CheckExchange() = default;
  virtual int slots() const = 0;
  // On the caller's thread: queues the exchange of `mine` with `peers` (every other rank, or the
  // peer of a send/recv) in `slot`, and returns without waiting for it.
  virtual void start(int slot, const CallDescriptor& mine, const std::vector<int>& peers) = 0;
  // On the checking thread, without blocking: whether slot's exchange has arrived. Then
  // received(slot)[r] is peer r's descriptor (entries of ranks that are not peers are
  // unspecified). Throws when the exchange failed.
  virtual bool arrived(int slot) = 0;
  virtual const CallDescriptor* received(int slot) = 0;
  // Runs first on the checking thread (the device exchange picks its GPU there).
  virtual void onCheckingThread() {}
};

class DeferredChecks {
 public:
  // onFailure runs once, on the checking thread, with "<op>: <verdict>" when a check finds
  // that the ranks disagree (or "<op>: <why>" when an exchange failed); later checks are
  // dropped.
  DeferredChecks(std::unique_ptr<CheckExchange> exchange, int rank,
                 std::function<void(const std::string&)> onFailure);
  // Stops the thread; checks still under way are dropped without a verdict.
  ~DeferredChecks();
  DeferredChecks(const DeferredChecks&) = delete;
  DeferredChecks& operator=(const DeferredChecks&) = delete;

  // Starts this call's check and returns. Waits while every slot holds a check under way; throws
  // cclzInvalidUsage once a check has failed.
  void queue(const CallDescriptor& mine, const std::vector<int>& peers, CollOp op);
  // Returns when every queued check has been judged, or one failed and was reported.
  void drain();
  // The first failure's message; empty while every check so far agreed.
  std::string failure();

 private:
  struct Pending {
    int slot;
    CallDescriptor mine;
    std::vector<int> ranks;  // sorted: this rank and its peers
    CollOp op;
  };
  void loop();
  // Polls `p`'s exchange until it arrives (true) or the checks stop (false).
  bool awaitArrival(const Pending& p);
  // The verdict on an arrived exchange: "" when the ranks agree.
  std::string judge(const Pending& p);
  void fail(const std::string& message);

  std::unique_ptr<CheckExchange> exchange_;
  const int rank_;
  const std::function<void(const std::string&)> onFailure_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> pending_;  // in the order started; the front is being judged
  uint64_t started_ = 0;         // checks queued so far; the next takes slot started_ % slots()
  bool stopping_ = false;
  std::string failure_;
  bool reported_ = false;  // onFailure has returned
  std::thread thread_;  // last: started once the rest is ready
};

#ifdef CCLZ_HAVE_CUDA
class Transport;
// Exchanges over `control` (a device transport) on `stream`, in slots of the current device's
// memory (device_check_exchange.cpp).
std::unique_ptr<CheckExchange> makeDeviceCheckExchange(Transport& control, cclzStream_t stream);
#endif

}  // namespace cclz
