// The plans of calls already validated, by their arguments (internal). A training step makes the
// same calls on the same buffers step after step, and makePlan (plan.h) is a function of a call's
// arguments and its communicator alone: a call equal to an earlier one in every argument takes
// that call's plan instead of being validated and planned again (50-90 ns of a small call's
// ~300 ns host path on an H200's host: bench/results/call-cost-one-rank-h200).
//
// What a kept plan assumes of its buffers is what validation's own memory-kind cache assumes
// (plan.cpp, isDeviceMemory): an address that was device memory stays addressable by the GPU. So
// only device communicators keep plans (runCollective), and calls with error feedback never do
// (their state is checked at each call).
#pragma once

#include <array>
#include <cstdint>

#include "collective/plan.h"

namespace cclz {

class PlanMemo {
 public:
  // Direct-mapped by the arguments' hash: a call whose slot holds another call's plan replaces it.
  static constexpr int kSlots = 64;

  // The plan kept for a call with exactly these arguments (the stream aside, which a plan does not
  // depend on), or NULL. Valid until the next keep().
  const Plan* find(const CollArgs& a) const;
  // Keeps `plan`, validated for `a`, and returns it.
  const Plan& keep(const CollArgs& a, Plan plan);

 private:
  // The arguments makePlan reads.
  struct Key {
    CollOp op = CollOp::AllGather;
    const void* send = nullptr;
    const void* recv = nullptr;
    uint64_t count = 0;
    int dtype = 0;
    int redOp = 0;
    int peer = -1;
    bool hasCodec = false;
    cclzCodecConfig_t config{};  // when hasCodec (else zero)
    bool feedback = false;
    bool operator==(const Key& other) const;
  };
  struct Slot {
    bool used = false;
    Key key;
    Plan plan;
  };
  static Key keyOf(const CollArgs& a);
  static int slotOf(const Key& k);

  std::array<Slot, kSlots> slots_{};
};

}  // namespace cclz
