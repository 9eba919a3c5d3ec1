// The done events of queued calls (src/collective/done_events.h), what cclzCommStreamWait waits
// for: a wait returns only once the call it names is published (queued on the GPU), it returns
// the latest event published, a call published without an event (failed, cancelled) keeps the
// earlier one, and an event lives until its last holder lets it go.
#include "collective/done_events.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace cclz {
namespace {

using namespace std::chrono_literals;

// A stand-in for a cudaEvent_t: an int whose deleter counts.
DoneEvents::Event fakeEvent(int value, std::atomic<int>* destroyed) {
  return DoneEvents::Event(new int(value), [destroyed](void* p) {
    delete static_cast<int*>(p);
    ++*destroyed;
  });
}

int valueOf(const DoneEvents::Event& e) { return e ? *static_cast<int*>(e.get()) : -1; }

TEST(DoneEvents, NothingIssuedReturnsAtOnceWithNoEvent) {
  DoneEvents events;
  EXPECT_EQ(events.lastIssued(), 0u);
  EXPECT_EQ(events.waitFor(0), nullptr);
}

TEST(DoneEvents, TicketsCountFromOne) {
  DoneEvents events;
  EXPECT_EQ(events.issue(), 1u);
  EXPECT_EQ(events.issue(), 2u);
  EXPECT_EQ(events.lastIssued(), 2u);
}

TEST(DoneEvents, WaitBlocksUntilTheCallIsPublished) {
  DoneEvents events;
  std::atomic<int> destroyed{0};
  const uint64_t first = events.issue(), second = events.issue();
  std::atomic<bool> returned{false};
  DoneEvents::Event got;
  std::thread waiter([&] {
    got = events.waitFor(second);
    returned = true;
  });
  events.publish(first, fakeEvent(1, &destroyed));
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(returned) << "returned before the call it waits for was published";
  events.publish(second, fakeEvent(2, &destroyed));
  waiter.join();
  EXPECT_TRUE(returned);
  EXPECT_EQ(valueOf(got), 2) << "the latest event covers both calls";
  EXPECT_EQ(destroyed, 1) << "the first event is released once replaced";
}

TEST(DoneEvents, ACallWithoutEventKeepsTheEarlierOne) {
  DoneEvents events;
  std::atomic<int> destroyed{0};
  events.publish(events.issue(), fakeEvent(7, &destroyed));
  const uint64_t failed = events.issue();
  events.publish(failed, nullptr);
  EXPECT_EQ(valueOf(events.waitFor(failed)), 7);
  EXPECT_EQ(destroyed, 0);
}

TEST(DoneEvents, NoEventEverPublishedWaitsAndReturnsNull) {
  DoneEvents events;
  const uint64_t t = events.issue();
  events.publish(t, nullptr);
  EXPECT_EQ(events.waitFor(t), nullptr);
}

// An abort cancels queued calls before the running one finishes: the later tickets arrive
// first, and the running call's event must not replace nothing newer.
TEST(DoneEvents, OutOfOrderPublishKeepsTheNewestEvent) {
  DoneEvents events;
  std::atomic<int> destroyed{0};
  const uint64_t running = events.issue(), cancelled = events.issue();
  events.publish(cancelled, fakeEvent(2, &destroyed));
  events.publish(running, fakeEvent(1, &destroyed));
  EXPECT_EQ(valueOf(events.waitFor(cancelled)), 2);
  EXPECT_EQ(destroyed, 1);
}

TEST(DoneEvents, AnEventHeldByAWaiterOutlivesItsReplacement) {
  DoneEvents events;
  std::atomic<int> destroyed{0};
  events.publish(events.issue(), fakeEvent(1, &destroyed));
  DoneEvents::Event held = events.waitFor(1);
  events.publish(events.issue(), fakeEvent(2, &destroyed));
  EXPECT_EQ(destroyed, 0);
  EXPECT_EQ(valueOf(held), 1);
  held.reset();
  EXPECT_EQ(destroyed, 1);
}

}  // namespace
}  // namespace cclz
