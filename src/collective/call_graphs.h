// Calls replayed as CUDA graphs: a call that queues tens of runtime calls (the copy-engine fused
// path: per peer a wait, a copy and a flag per piece) is captured once per key (whatever its
// queued work depends on: buffers, counts, configuration) on a stream of its own, instantiated,
// and launched for that call and every later one of the same key, one runtime call instead of
// the many (docs/collectives.md, "Fused NVLink paths"). The owner decides what may be replayed
// and drops every graph when the memory they point at moves.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace cclz {

class CallGraphs {
 public:
  explicit CallGraphs(size_t most = 16);
  ~CallGraphs();
  CallGraphs(const CallGraphs&) = delete;
  CallGraphs& operator=(const CallGraphs&) = delete;

  // Launches the graph of `key` on `stream`, made first where there is none: `queue(s)` queues
  // the call on s, a stream of this object's in thread-local capture mode (the caller's may be
  // the legacy stream, which cannot be captured); whatever other streams it uses must join s
  // again. Past `most` graphs the first made is dropped (one in flight is freed once it ends).
  // True where the graph was made now.
  bool launch(const std::string& key, cudaStream_t stream,
              const std::function<void(cudaStream_t)>& queue);

  void clear();

 private:
  cudaGraphExec_t make(const std::function<void(cudaStream_t)>& queue);

  size_t most_;
  cudaStream_t capture_ = nullptr;
  std::vector<std::pair<std::string, cudaGraphExec_t>> graphs_;  // the most recent last
};

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
