// The proxy thread (src/collective/proxy.h): jobs run one at a time in the order queued, busy()
// covers queued and running jobs, drain() waits for them, stop(true) cancels what has not
// started and lets the running job finish, a submit after stop is cancelled at once.
#include "collective/proxy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace cclz {
namespace {

using namespace std::chrono_literals;

TEST(Proxy, RunsJobsInOrderOnItsOwnThread) {
  std::atomic<bool> started{false};
  Proxy proxy([&] { started = true; });
  std::mutex m;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  for (int i = 0; i < 100; ++i)
    proxy.submit({[&, i] {
                    std::lock_guard<std::mutex> lock(m);
                    order.push_back(i);
                    threads.push_back(std::this_thread::get_id());
                  },
                  [] { ADD_FAILURE() << "nothing is cancelled"; }});
  proxy.drain();
  EXPECT_FALSE(proxy.busy());
  EXPECT_TRUE(started);
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  for (const auto& id : threads) {
    EXPECT_NE(id, std::this_thread::get_id());
    EXPECT_EQ(id, threads[0]);
  }
}

TEST(Proxy, BusyWhileAJobRuns) {
  Proxy proxy(nullptr);
  std::atomic<bool> release{false}, running{false};
  proxy.submit({[&] {
                  running = true;
                  while (!release) std::this_thread::sleep_for(1ms);
                },
                [] {}});
  while (!running) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(proxy.busy());  // taken off the queue, still running
  release = true;
  proxy.drain();
  EXPECT_FALSE(proxy.busy());
}

TEST(Proxy, StopCancelsQueuedJobsAndFinishesTheRunningOne) {
  Proxy proxy(nullptr);
  std::atomic<bool> release{false}, running{false}, firstDone{false};
  std::atomic<int> ran{0}, cancelled{0};
  proxy.submit({[&] {
                  running = true;
                  while (!release) std::this_thread::sleep_for(1ms);
                  firstDone = true;
                },
                [&] { ++cancelled; }});
  for (int i = 0; i < 5; ++i) proxy.submit({[&] { ++ran; }, [&] { ++cancelled; }});
  while (!running) std::this_thread::sleep_for(1ms);
  std::thread stopper([&] { proxy.stop(true); });
  std::this_thread::sleep_for(20ms);
  release = true;
  stopper.join();
  EXPECT_TRUE(firstDone);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(cancelled, 5);
  bool late = false;
  proxy.submit({[] { ADD_FAILURE() << "runs after stop"; }, [&] { late = true; }});
  EXPECT_TRUE(late);
}

TEST(Proxy, DestructionRunsEveryQueuedJob) {
  std::atomic<int> ran{0};
  {
    Proxy proxy(nullptr);
    for (int i = 0; i < 20; ++i)
      proxy.submit({[&] {
                      std::this_thread::sleep_for(100us);
                      ++ran;
                    },
                    [] { ADD_FAILURE() << "nothing is cancelled"; }});
  }
  EXPECT_EQ(ran, 20);
}

}  // namespace
}  // namespace cclz
