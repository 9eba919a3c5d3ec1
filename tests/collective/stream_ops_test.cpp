// The mechanism CCLZ_ASYNC=1 rests on, alone, on one GPU and without NCCL (labels gpu;async_unsafe;
// src/collective/completion_words.h): the caller's stream waits on a completion word
// (cuStreamWaitValue32), and the proxy thread queues the work and the write of that word
// (cuStreamWriteValue32) on another stream *after* the wait was queued. The CUDA driver documents
// that the order a stream memory operation sets up is invisible to its scheduler, so streams that
// share one of the context's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, default 8) may be run in
// the order they were queued: a write queued behind a blocked wait would then never run.
//
// Every wait here is bounded: a wait not released in time is released from the host and the test
// fails, naming the writer streams that did not run, so the program ends instead of hanging.
// Registered twice: as the driver starts (default connections) and with
// CUDA_DEVICE_MAX_CONNECTIONS=1, where every stream shares one queue.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collective/completion_words.h"

namespace cclz {
namespace {

using Clock = std::chrono::steady_clock;

// Whether `event` completes within `seconds` (polled: a blocked stream must not block the test).
bool completesWithin(cudaEvent_t event, double seconds) {
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return true;
    EXPECT_EQ(state, cudaErrorNotReady) << cudaGetErrorString(state);
    if (state != cudaErrorNotReady || Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

class StreamOps : public ::testing::Test {
 protected:
  void SetUp() override {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) GTEST_SKIP() << "no GPU";
    ASSERT_EQ(cudaGetDevice(&device_), cudaSuccess);
    ASSERT_EQ(cudaStreamCreateWithFlags(&waiter_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaEventCreateWithFlags(&released_, cudaEventDisableTiming), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&scratch_, kScratch), cudaSuccess);
  }
  void TearDown() override {
    if (waiter_) cudaStreamSynchronize(waiter_);
    cudaDeviceSynchronize();
    cudaFree(scratch_);
    if (released_) cudaEventDestroy(released_);
    if (waiter_) cudaStreamDestroy(waiter_);
  }

  // Queues on the waiter stream the wait for `job` and, behind it, the event `released_`.
  void queueWait(CompletionWords& words, uint32_t job) {
    words.waitOn(reinterpret_cast<cclzStream_t>(waiter_), job);
    ASSERT_EQ(cudaEventRecord(released_, waiter_), cudaSuccess);
  }

  static constexpr size_t kScratch = 1 << 20;
  static constexpr double kSeconds = 3.0;
  int device_ = 0;
  cudaStream_t waiter_ = nullptr;
  cudaEvent_t released_ = nullptr;
  void* scratch_ = nullptr;
};

// The word's address, flags and driver entry points: a write from the host releases the wait.
TEST_F(StreamOps, HostWriteReleasesTheWait) {
  CompletionWords words;
  const uint32_t job = words.next();
  ASSERT_NO_FATAL_FAILURE(queueWait(words, job));
  EXPECT_EQ(cudaEventQuery(released_), cudaErrorNotReady) << "the wait did not wait";
  words.writeFromHost(job);
  EXPECT_TRUE(completesWithin(released_, kSeconds)) << "a host write did not release the wait";
}

// A write queued on another stream *before* the wait (the order CUDA sees): always safe.
TEST_F(StreamOps, EarlierWriteOnAnotherStreamReleasesTheWait) {
  CompletionWords words;
  cudaStream_t writer = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&writer, cudaStreamNonBlocking), cudaSuccess);
  const uint32_t job = words.next();
  words.writeOn(reinterpret_cast<cclzStream_t>(writer), job);
  ASSERT_NO_FATAL_FAILURE(queueWait(words, job));
  const bool released = completesWithin(released_, kSeconds);
  if (!released) words.writeFromHost(job);
  EXPECT_TRUE(released) << "a write queued before the wait did not release it";
  cudaStreamSynchronize(writer);
  cudaStreamDestroy(writer);
}

// What the proxy does: the wait is queued first; then another thread (on the same device, as the
// proxy is) queues work and the write on a stream of its own. One trial per writer stream, each
// created after the waiter, so that round the context's hardware queues some writer shares the
// waiter's queue. Fails, naming them, for the writers whose write never ran.
TEST_F(StreamOps, LaterWriteFromAnotherThreadReleasesTheWait) {
  CompletionWords words;
  constexpr int kWriters = 33;  // more than the 32 hardware queues a context can have
  std::vector<cudaStream_t> writers(kWriters, nullptr);
  for (cudaStream_t& s : writers)
    ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  std::string stuck;
  int stuckCount = 0;
  for (int w = 0; w < kWriters && stuckCount < 4; ++w) {
    const uint32_t job = words.next();
    ASSERT_NO_FATAL_FAILURE(queueWait(words, job));
    bool queued = false;
    std::thread proxy([&] {
      if (cudaSetDevice(device_) != cudaSuccess) return;
      // Work the write must follow, as a job's last transfer precedes its word.
      if (cudaMemsetAsync(scratch_, w, kScratch, writers[w]) != cudaSuccess) return;
      words.writeOn(reinterpret_cast<cclzStream_t>(writers[w]), job);
      queued = true;
    });
    proxy.join();
    ASSERT_TRUE(queued) << "writer " << w << ": the work or the write could not be queued";
    if (!completesWithin(released_, kSeconds)) {
      stuck += ' ';
      stuck += std::to_string(w);
      ++stuckCount;
      words.writeFromHost(job);  // releases the waiter, and with it the queue it blocked
      ASSERT_TRUE(completesWithin(released_, kSeconds)) << "not even a host write released it";
    }
    ASSERT_EQ(cudaStreamSynchronize(writers[w]), cudaSuccess);
  }
  for (cudaStream_t s : writers) cudaStreamDestroy(s);
  EXPECT_TRUE(stuck.empty())
      << "the write queued after the wait never ran for writer stream(s)" << stuck
      << " (of " << kWriters << " created after the waiter): a stream waiting on a word that a "
         "later-queued write sets blocks the streams that share its hardware queue, which is "
         "what CCLZ_ASYNC=1 does with the caller's stream and the proxy's";
}

}  // namespace
}  // namespace cclz
