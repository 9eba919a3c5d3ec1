// What the interposer keeps per thread, as NCCL does: the depth of the caller's NCCL groups
// (ncclGroupStart/ncclGroupEnd nest per thread), and whether the thread is inside a call this
// library forwarded (NCCL calling its own exported functions, e.g. ncclBcast calling
// ncclBroadcast, must reach NCCL as they are and be counted once).
#pragma once

namespace cclz::interpose {

int& groupDepth();

bool forwarding();

// Marks the thread as inside a forwarded call for its lifetime.
class ForwardScope {
 public:
  ForwardScope();
  ~ForwardScope();
  ForwardScope(const ForwardScope&) = delete;
  ForwardScope& operator=(const ForwardScope&) = delete;

 private:
  bool outer_;
};

}  // namespace cclz::interpose
