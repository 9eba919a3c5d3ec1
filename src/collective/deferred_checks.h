// Deferred call checks (CCLZ_CHECK_CALLS=deferred, the default on device communicators without
// asyncCalls; docs/collectives.md, "Checking the call"). A checked call waits for its peers'
// descriptors before it queues data: a round trip to every peer per call, more than a small
// collective takes. So a thread of the communicator does every exchange of its control channel,
// in call order: the caller hands it the descriptor and queues its data at once, and the thread
// judges the descriptors when they arrive. A mismatch then becomes the communicator's
// asynchronous error, and the communicator aborts its transport, which ends the transfers the
// mismatch left waiting: an error, not a hang, though the call itself returned success and its
// output is undefined.
//
// The calls that must wait for an answer (the first call of each op, checked before its data;
// the adaptive calls' exchange of trial times) go through the same thread with exchangeNow, so
// that the control channel sees one sequence of exchanges, the same on every rank.
//
// The thread must never launch GPU work: NCCL kernels wait for their peers, and NCCL wants the
// work of every communicator of a device launched in one order on every rank, which a thread
// beside the caller's cannot keep. Device communicators therefore exchange over the control
// mesh (TCP, transport/host_mesh.h; mesh_check_exchange.cpp), which makes no CUDA call.
//
// Plain C++: the exchange is an interface, so that the ring of slots, the order and the thread
// are tested without a GPU.
#pragma once

#include <array>
#include <chrono>
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

// Where the blocks travel: up to slots() exchanges under way at once, each in its own slot,
// started in order and polled, all on the checking thread. A block is kBlockBytes.
class CheckExchange {
 public:
  static constexpr size_t kBlockBytes = sizeof(CallDescriptor);
  virtual ~CheckExchange() = default;
  virtual int slots() const = 0;
  // Queues the exchange of `mine` (kBlockBytes) with `peers` (every other rank, or the peer of
  // a send/recv) in `slot`, and returns without waiting for it.
  virtual void start(int slot, const uint8_t* mine, const std::vector<int>& peers) = 0;
  // Without blocking: whether slot's exchange has arrived. Then received(slot) + r * kBlockBytes
  // is peer r's block (the blocks of ranks that are not peers are unspecified). Throws when the
  // exchange failed.
  virtual bool arrived(int slot) = 0;
  virtual const uint8_t* received(int slot) = 0;
  // Waits up to maxMs for something to arrive, for a thread with nothing else to do; this
  // default returns at once.
  virtual void idle(int maxMs) { (void)maxMs; }
  // Runs first on the checking thread.
  virtual void onCheckingThread() {}
};

class DeferredChecks {
 public:
  // onFailure runs once, on the checking thread, with "<op>: <verdict>" when a deferred check
  // finds that the ranks disagree (or "<op>: <why>" when an exchange failed); later exchanges are
  // dropped.
  DeferredChecks(std::unique_ptr<CheckExchange> exchange, int rank, int ranks,
                 std::function<void(const std::string&)> onFailure);
  // stop().
  ~DeferredChecks();
  DeferredChecks(const DeferredChecks&) = delete;
  DeferredChecks& operator=(const DeferredChecks&) = delete;

  // The peers of a collective's check: every other rank.
  static constexpr int kEveryPeer = -1;
  // Hands this call's check to the thread and returns: exchanged with `peer` (a send's or recv's)
  // or kEveryPeer, so that nothing is allocated on the call's path. Waits while the thread is a
  // full ring behind; throws cclzInvalidUsage once a check has failed.
  void queue(const CallDescriptor& mine, int peer, CollOp op);
  // Exchanges `bytes` (at most kBlockBytes) at `mine` with `peers` (every other rank, or one)
  // after every exchange handed over before, and waits for it. Returns one block of `bytes` per
  // rank, by rank (this rank's and its peers' filled). Throws cclzInvalidUsage once a check has
  // failed.
  std::vector<uint8_t> exchangeNow(const void* mine, size_t bytes, const std::vector<int>& peers);
  // Returns when every exchange handed over has been done, or one failed and was reported, or
  // the thread was stopped.
  void drain();
  // Stops the thread and joins it; exchanges still under way are dropped without a verdict, and
  // later hand-overs throw. Idempotent.
  void stop();
  // The first failure's message; empty while every check so far agreed.
  std::string failure();

 private:
  struct Answer;  // what exchangeNow waits for
  struct Pending {
    std::array<uint8_t, CheckExchange::kBlockBytes> mine{};  // in place: no allocation per call
    int peer = kEveryPeer;                                   // queue()'s
    CollOp op = CollOp::AllGather;
    uint64_t number = 0;             // 1, 2, ...: the order of the exchanges
    std::shared_ptr<Answer> answer;  // exchangeNow's; NULL for a deferred check
    int slot = -1;                   // once started
  };
  // How long the thread looks for hand-overs, and how often, before it sleeps until woken.
  static constexpr std::chrono::microseconds kLinger{20000};
  static constexpr std::chrono::microseconds kLingerPoll{200};
  void loop();
  // Starts what waits while slots are free; true if it started any.
  bool startWaiting();
  // The verdict on an arrived deferred check: "" when the ranks agree.
  std::string judge(const Pending& p);
  // On the checking thread: the ranks p exchanges with (valid until the next call).
  const std::vector<int>& peersOf(const Pending& p);
  // Hands a pending exchange to the thread (mutex_ held by `lock`).
  void handOver(std::unique_lock<std::mutex>& lock, Pending p);
  // The checks waiting or under way beyond which a hand-over waits.
  size_t ringBound() const;
  // After an agreed check left the ring (mutex_ held): wakes drain() once the ring is empty, and
  // a caller waiting for room once half the ring is free. Waking it at every check would cost a
  // system call per check in a long burst: the caller would hand over one and wait again.
  void notifyLeft();
  void fail(const std::string& message);

  std::unique_ptr<CheckExchange> exchange_;
  const int rank_;
  const int ranks_;
  const std::vector<int> everyPeer_;  // every rank but this one
  std::vector<int> onePeer_;          // peersOf()'s answer for one peer
  const std::function<void(const std::string&)> onFailure_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> waiting_;  // handed over, not started (in order)
  std::deque<Pending> started_;  // started, in order; the front is polled first
  uint64_t handed_ = 0;          // exchanges handed over so far
  uint64_t startedCount_ = 0;    // started so far; the next takes slot startedCount_ % slots()
  bool stopping_ = false;
  bool checkerSleeps_ = false;  // the thread waits on changed_ with nothing to do
  int roomWaiters_ = 0;         // callers in handOver, waiting for room in the ring
  std::string failure_;
  bool reported_ = false;  // onFailure has returned
  std::thread thread_;     // last: started once the rest is ready
};

class HostMesh;
// Exchanges over the control mesh, host memory only (mesh_check_exchange.cpp). The mesh must
// outlive it, and only this exchange may take messages from it.
std::unique_ptr<CheckExchange> makeMeshCheckExchange(HostMesh& mesh);

// One exchange on the calling thread, for communicators without a checking thread: starts it
// in `slot` (free: every earlier exchange in it has arrived) and waits for it. Returns one block
// of `bytes` (at most kBlockBytes) per rank, by rank, this rank's and its peers' filled.
std::vector<uint8_t> exchangeAndWait(CheckExchange& exchange, int slot, int rank, int ranks,
                                     const void* mine, size_t bytes,
                                     const std::vector<int>& peers);

}  // namespace cclz
