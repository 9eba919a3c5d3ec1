// Deferred call checks (src/collective/deferred_checks.h) over a fake exchange: every exchange
// started and judged in order on the checking thread; slots reused only once judged; an exchange
// that waits for its answer in order with the deferred ones; a mismatch (or a rank that rejected
// its arguments) reported once, with later calls refused; an exchange that never arrives does
// not keep the destructor waiting.
#include "collective/deferred_checks.h"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

namespace cclz {
namespace {

using namespace std::chrono_literals;

CallDescriptor descriptor(uint64_t count) {
  CallDescriptor d{};
  d.magic = kDescriptorMagic;
  d.version = kDescriptorVersion;
  d.op = static_cast<uint8_t>(CollOp::AllGather);
  d.dtype = cclzBfloat16;
  d.peer = -1;
  d.ranks = 2;
  d.count = count;
  return d;
}

// Two ranks; this is rank 0, and the peer's descriptor for each call is given in advance.
// Exchanges arrive only once released (released counts the calls whose exchange is done).
class FakeExchange final : public CheckExchange {
 public:
  explicit FakeExchange(int slots) : slots_(slots), received_(slots) {}
  int slots() const override { return slots_; }
  void start(int slot, const uint8_t*, const std::vector<int>& peers) override {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(peers, std::vector<int>{1});
    EXPECT_EQ(std::this_thread::get_id(), thread.load());
    ASSERT_LT(started, peerCalls.size());
    slotOfCall.push_back(slot);
    std::memcpy(received_[slot].data() + kBlockBytes, &peerCalls[started++], kBlockBytes);
  }
  bool arrived(int slot) override {
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t call = 0; call < slotOfCall.size(); ++call)
      if (slotOfCall[call] == slot && call >= judged) {
        ++polls;
        if (call < released) {
          ++judged;
          return true;
        }
        return false;
      }
    ADD_FAILURE() << "slot " << slot << " polled with no call in it";
    return true;
  }
  const uint8_t* received(int slot) override { return received_[slot].data(); }
  void onCheckingThread() override { thread = std::this_thread::get_id(); }

  std::mutex mutex;
  std::vector<CallDescriptor> peerCalls;
  std::vector<int> slotOfCall;
  size_t started = 0, judged = 0, polls = 0;
  std::atomic<size_t> released{0};
  std::atomic<std::thread::id> thread{};

 private:
  const int slots_;
  std::vector<std::array<uint8_t, 2 * kBlockBytes>> received_;
};

struct Failures {
  std::mutex mutex;
  std::vector<std::string> messages;
  std::vector<std::thread::id> threads;
  auto callback() {
    return [this](const std::string& m) {
      std::lock_guard<std::mutex> lock(mutex);
      messages.push_back(m);
      threads.push_back(std::this_thread::get_id());
    };
  }
};

TEST(DeferredChecks, AgreeingCallsPassInOrderThroughReusedSlots) {
  auto owned = std::make_unique<FakeExchange>(4);
  FakeExchange& fake = *owned;
  for (int i = 0; i < 10; ++i) fake.peerCalls.push_back(descriptor(100 + i));
  Failures failures;
  DeferredChecks checks(std::move(owned), 0, 2, failures.callback());
  std::thread releaser([&] {
    for (size_t i = 1; i <= 10; ++i) {
      std::this_thread::sleep_for(2ms);
      fake.released = i;
    }
  });
  // The fifth call waits for a slot: the first must be judged before its slot is reused.
  // The third is an exchange with an answer: it returns the peer's block, in its turn.
  for (int i = 0; i < 10; ++i) {
    if (i != 2) {
      checks.queue(descriptor(100 + i), 1, CollOp::AllGather);
      continue;
    }
    const uint64_t mine = 7;
    const std::vector<uint8_t> both = checks.exchangeNow(&mine, sizeof mine, {1});
    ASSERT_EQ(both.size(), 2 * sizeof mine);
    uint64_t got[2];
    std::memcpy(got, both.data(), sizeof got);
    EXPECT_EQ(got[0], 7u);
    const CallDescriptor peer = descriptor(102);  // the peer's third block: its first 8 bytes
    uint64_t expected = 0;
    std::memcpy(&expected, &peer, sizeof expected);
    EXPECT_EQ(got[1], expected);
    EXPECT_GE(fake.released.load(), 3u);
  }
  checks.drain();
  releaser.join();
  EXPECT_EQ(checks.failure(), "");
  EXPECT_TRUE(failures.messages.empty());
  EXPECT_EQ(fake.judged, 10u);
  std::vector<int> expected;
  for (int i = 0; i < 10; ++i) expected.push_back(i % 4);
  EXPECT_EQ(fake.slotOfCall, expected);
  EXPECT_NE(fake.thread.load(), std::this_thread::get_id());
}

// A caller two rings ahead waits for room, and is let go once half the ring is free, not at the
// first check judged (which would cost a wake-up per check in a long burst).
TEST(DeferredChecks, ACallerAheadByTwoRingsResumesOnceHalfTheRingIsFree) {
  constexpr int kSlots = 4, kRing = 2 * kSlots, kCalls = kRing + 1;
  auto owned = std::make_unique<FakeExchange>(kSlots);
  FakeExchange& fake = *owned;
  for (int i = 0; i < kCalls; ++i) fake.peerCalls.push_back(descriptor(100 + i));
  Failures failures;
  DeferredChecks checks(std::move(owned), 0, 2, failures.callback());
  for (int i = 0; i < kRing; ++i) checks.queue(descriptor(100 + i), 1, CollOp::AllGather);
  std::atomic<bool> handed{false};
  std::thread caller([&] {
    checks.queue(descriptor(100 + kRing), 1, CollOp::AllGather);
    handed = true;
  });
  auto judgedNow = [&] {
    std::lock_guard<std::mutex> lock(fake.mutex);
    return fake.judged;
  };
  std::this_thread::sleep_for(20ms);  // the caller reaches its wait
  EXPECT_FALSE(handed.load()) << "handed over into a full ring";
  // Three judged leave five of eight in the ring: the caller still waits.
  fake.released = 3;
  for (int i = 0; i < 200 && judgedNow() < 3; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(judgedNow(), 3u);
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(handed.load()) << "woken before half the ring was free";
  // The fourth leaves half: the caller goes on.
  fake.released = 4;
  for (int i = 0; i < 2000 && !handed.load(); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(handed.load());
  fake.released = kCalls;
  caller.join();
  checks.drain();
  EXPECT_EQ(checks.failure(), "");
  EXPECT_TRUE(failures.messages.empty());
  EXPECT_EQ(fake.judged, static_cast<size_t>(kCalls));
}

TEST(DeferredChecks, AMismatchIsReportedOnceAndLaterCallsAreRefused) {
  auto owned = std::make_unique<FakeExchange>(8);
  FakeExchange& fake = *owned;
  fake.peerCalls = {descriptor(100), descriptor(101), descriptor(102)};
  Failures failures;
  DeferredChecks checks(std::move(owned), 0, 2, failures.callback());
  checks.queue(descriptor(100), 1, CollOp::AllGather);
  checks.queue(descriptor(999), 1, CollOp::AllGather);  // the peer passed 101
  checks.queue(descriptor(102), 1, CollOp::AllGather);
  fake.released = 3;
  checks.drain();
  EXPECT_NE(checks.failure().find("count differs: 999 on rank 0, 101 on rank 1"),
            std::string::npos)
      << checks.failure();
  EXPECT_EQ(checks.failure().rfind("all-gather: ", 0), 0u) << checks.failure();
  try {
    checks.queue(descriptor(103), 1, CollOp::AllGather);
    ADD_FAILURE() << "a call after the failure was queued";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclzInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("count differs"), std::string::npos) << e.what();
  }
  std::lock_guard<std::mutex> lock(failures.mutex);
  ASSERT_EQ(failures.messages.size(), 1u);
  EXPECT_EQ(failures.messages[0], checks.failure());
  EXPECT_EQ(failures.threads[0], fake.thread.load());
  EXPECT_EQ(fake.judged, 2u);  // the third call is dropped, never judged
}

TEST(DeferredChecks, APeerThatRejectedItsArgumentsFailsTheCheck) {
  auto owned = std::make_unique<FakeExchange>(2);
  FakeExchange& fake = *owned;
  CallDescriptor rejected = descriptor(100);
  rejected.rejected = 1;
  fake.peerCalls = {rejected};
  Failures failures;
  DeferredChecks checks(std::move(owned), 0, 2, failures.callback());
  checks.queue(descriptor(100), 1, CollOp::AllGather);
  fake.released = 1;
  checks.drain();
  EXPECT_NE(checks.failure().find("rank 1 rejected its arguments"), std::string::npos)
      << checks.failure();
}

// A waiting caller is woken by the failure instead of waiting for a slot forever.
TEST(DeferredChecks, ACallerWaitingForASlotIsRefusedOnFailure) {
  auto owned = std::make_unique<FakeExchange>(1);
  FakeExchange& fake = *owned;
  fake.peerCalls = {descriptor(1), descriptor(2)};
  Failures failures;
  DeferredChecks checks(std::move(owned), 0, 2, failures.callback());
  checks.queue(descriptor(5), 1, CollOp::AllGather);  // disagrees, once it arrives
  std::thread releaser([&] {
    std::this_thread::sleep_for(20ms);
    fake.released = 1;
  });
  // One check may wait beside the one under way; the third hand-over waits for room.
  EXPECT_THROW(
      {
        for (int i = 0; i < 3; ++i) checks.queue(descriptor(2), 1, CollOp::AllGather);
      },
      Error);
  releaser.join();
}

TEST(DeferredChecks, StopsWhileAnExchangeNeverArrives) {
  auto owned = std::make_unique<FakeExchange>(2);
  FakeExchange& fake = *owned;
  fake.peerCalls = {descriptor(1)};
  Failures failures;
  {
    DeferredChecks checks(std::move(owned), 0, 2, failures.callback());
    checks.queue(descriptor(1), 1, CollOp::AllGather);
    while (true) {
      std::lock_guard<std::mutex> lock(fake.mutex);
      if (fake.polls >= 3) break;
    }
  }  // the destructor returns with the check still under way
  EXPECT_TRUE(failures.messages.empty());
}

}  // namespace
}  // namespace cclz
