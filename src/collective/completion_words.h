// Completion words: how a caller's stream waits for work that has not been queued yet (an async
// job of the proxy, proxy.h). An event cannot do it: cudaStreamWaitEvent waits for the event's
// last record, and the job records nothing until the proxy runs it. So the caller queues
// cuStreamWaitValue32 on its stream for the job's word, and the proxy queues
// cuStreamWriteValue32 after the job's last work; if the job fails, the proxy writes the word from
// the host, so the caller's stream never hangs.
//
// The words: a ring of kWords 32-bit words in pinned host memory mapped into the device (both the
// host and the GPU reach it). Job number s (from 1) uses word s % kWords and is complete when
// (int32_t)(word - s) >= 0 (CU_STREAM_WAIT_VALUE_GEQ): a later job that reuses the word writes a
// larger number, which also releases waiters of the earlier one (jobs finish in order).
// The driver's functions come through cudaGetDriverEntryPointByVersion: cclz does not link libcuda.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cstdint>

#include "cclz/cclz.h"

namespace cclz {

class CompletionWords {
 public:
  static constexpr uint32_t kWords = 1024;

  CompletionWords();  // throws cclz::Error where the driver lacks stream memory operations
  ~CompletionWords();
  CompletionWords(const CompletionWords&) = delete;
  CompletionWords& operator=(const CompletionWords&) = delete;

  // The next job's number (caller's thread).
  uint32_t next() { return ++last_; }
  // Queues on `stream` a wait for job `job` (cuStreamWaitValue32).
  void waitOn(cclzStream_t stream, uint32_t job);
  // Queues on `stream` the write that completes job `job` (cuStreamWriteValue32).
  void writeOn(cclzStream_t stream, uint32_t job);
  // Completes job `job` from the host, now (a failed or cancelled job). Never throws.
  void writeFromHost(uint32_t job) noexcept;

 private:
  uint32_t* host_ = nullptr;    // kWords words, cudaHostAllocMapped
  uint64_t device_ = 0;         // their device address (CUdeviceptr)
  uint32_t last_ = 0;
  void* wait_ = nullptr;        // the driver's cuStreamWaitValue32
  void* write_ = nullptr;       // the driver's cuStreamWriteValue32
};

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
