// A transport that forwards every call to another (the loopback; NCCL's in a probe), for tests
// that watch what the collectives ask of their transport: a subclass overrides the calls it
// watches and forwards them through this class.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>

#include "transport/transport.h"

namespace cclz::test {

class ForwardingTransport : public Transport {
 public:
  explicit ForwardingTransport(std::unique_ptr<Transport> inner) : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  MemoryKind memory() const override { return inner_->memory(); }
  const char* name() const override { return "forwarding loopback"; }
  bool learnsReceivedSize() const override { return inner_->learnsReceivedSize(); }
  void groupStart(cclzStream_t s) override { inner_->groupStart(s); }
  void send(const void* buf, uint64_t bytes, int peer) override { inner_->send(buf, bytes, peer); }
  void recv(void* buf, uint64_t capacity, int peer, uint64_t* received) override {
    inner_->recv(buf, capacity, peer, received);
  }
  void groupEnd() override { inner_->groupEnd(); }
  void allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t s) override {
    inner_->allGather(send, recv, bytes, s);
  }
  bool reduceScatter(const void* send, void* recv, uint64_t count, int dtype, bool average,
                     cclzStream_t s) override {
    return inner_->reduceScatter(send, recv, count, dtype, average, s);
  }
  bool allReduce(const void* send, void* recv, uint64_t count, int dtype, bool average,
                 cclzStream_t s) override {
    return inner_->allReduce(send, recv, count, dtype, average, s);
  }
  HostMesh* controlMesh() override { return inner_->controlMesh(); }
  FrameMemory* frameMemory() override { return inner_->frameMemory(); }

 private:
  std::unique_ptr<Transport> inner_;
};

}  // namespace cclz::test
