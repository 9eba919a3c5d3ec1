// An in-process transport: n ranks are n threads of one process that share a hub of mailboxes.
// It lets the collective algorithms run under GoogleTest in one process (fast, and under ASan)
// with the host codecs, exactly as they run over MPI.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/transport.h"

namespace cclz {

// The mailboxes of n ranks: one FIFO of messages per (sender, receiver) pair, so messages between
// two ranks match in the order they were sent, as with MPI and NCCL.
class LoopbackHub {
 public:
  // timeout: how long a receive waits before it fails (a test that would hang fails instead).
  explicit LoopbackHub(int ranks, std::chrono::milliseconds timeout = std::chrono::seconds(60));
  int size() const { return ranks_; }

  void post(int from, int to, const void* data, uint64_t bytes);
  // Takes the oldest message from `from` to `to`; fails if it is larger than capacity (as MPI
  // does) or nothing arrives within the timeout. Returns its size.
  uint64_t take(int from, int to, void* buf, uint64_t capacity);
  // Wakes every waiting receive with an error (one rank gave up: the others must not hang).
  void abort();

 private:
  std::deque<std::vector<uint8_t>>& box(int from, int to) { return boxes_[from * ranks_ + to]; }

  const int ranks_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::vector<std::deque<std::vector<uint8_t>>> boxes_;
  bool aborted_ = false;
};

class LoopbackTransport final : public Transport {
 public:
  LoopbackTransport(std::shared_ptr<LoopbackHub> hub, int rank);

  int rank() const override { return rank_; }
  int size() const override { return hub_->size(); }
  MemoryKind memory() const override { return MemoryKind::Host; }
  const char* name() const override { return "loopback"; }
  bool learnsReceivedSize() const override { return true; }

  void groupStart(cclzStream_t) override;
  void send(const void* buf, uint64_t bytes, int peer) override;
  void recv(void* buf, uint64_t capacity, int peer, uint64_t* receivedBytes) override;
  void groupEnd() override;
  void allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t stream) override;
  void abort() override { hub_->abort(); }

 private:
  struct PendingRecv {
    void* buf;
    uint64_t capacity;
    int peer;
    uint64_t* receivedBytes;
  };
  void checkPeer(int peer) const;

  std::shared_ptr<LoopbackHub> hub_;
  const int rank_;
  bool inGroup_ = false;
  std::vector<PendingRecv> recvs_;
};

}  // namespace cclz
