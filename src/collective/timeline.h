// CCLZ_TIMELINE=1: where a device collective's GPU time goes. The device engine, the fused NVLink
// paths and the overlapped GEMMs record a timing event where each stage (encode, move, decode of
// one slot; a GEMM of one chunk) begins on its stream, after the stage's waits and the stream's
// earlier work, and one where it ends; at the end of the call it waits for them and prints one
// line per stage on stderr, in microseconds from the call's start on the caller's stream. Two
// stages overlap where their spans do. It synchronizes the host at every call (a diagnostic, like
// CCLZ_TRACE, read once per communicator, free to differ between ranks); off, the default, it
// records nothing.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstdint>
#include <vector>

#include "collective/engine.h"

namespace cclz {

class Timeline {
 public:
  Timeline();
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  bool enabled() const { return enabled_; }
  // A call starts on `stream` (its start is the origin of the call's times).
  void start(cudaStream_t stream);
  // The stage now queued on `stream` begins here; the open one (if any) ends on its stream.
  // Spans on several streams are each closed where the next one opens, so the work of one
  // stream must be queued in one run (as the engines and the overlapped GEMMs queue it).
  void open(Stage stage, int slot, cudaStream_t stream);
  void open(const char* label, int slot, cudaStream_t stream);
  void close();
  // The call's work is joined on `stream`: waits for it and prints the call's lines.
  void report(cudaStream_t stream);

 private:
  struct Span {
    const char* label;
    int slot;
    cudaEvent_t begin, end;
  };
  cudaEvent_t event();  // from the pool, reused by the next call

  bool enabled_ = false;
  std::vector<cudaEvent_t> pool_;
  size_t used_ = 0;
  cudaEvent_t origin_ = nullptr;
  std::vector<Span> spans_;
  // The stream of the open span, if one is open. NOTE: a flag beside it, as the caller's stream
  // may be the legacy default stream, whose handle is null: a null check took such a span for
  // closed, so its end was never recorded ("invalid resource handle" for the overlapped GEMMs'
  // spans on torch's default stream).
  bool spanOpen_ = false;
  cudaStream_t openStream_ = nullptr;
  uint64_t calls_ = 0;
};

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
