#ifdef CCLZ_HAVE_CUDA
#include "collective/call_graphs.h"

#include <algorithm>

#include "codec/device.h"  // CCLZ_CUDA_CHECK

namespace cclz {

CallGraphs::CallGraphs(size_t most) : most_(most) {
  CCLZ_CUDA_CHECK(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking));
}

CallGraphs::~CallGraphs() {
  clear();
  cudaStreamDestroy(capture_);
}

bool CallGraphs::launch(const std::string& key, cudaStream_t stream,
                        const std::function<void(cudaStream_t)>& queue) {
  const auto found = std::find_if(graphs_.begin(), graphs_.end(),
                                  [&](const auto& g) { return g.first == key; });
  const bool made = found == graphs_.end();
  cudaGraphExec_t exec = made ? nullptr : found->second;
  if (made) {
    exec = make(queue);
    if (graphs_.size() == most_) {
      cudaGraphExecDestroy(graphs_.front().second);
      graphs_.erase(graphs_.begin());
    }
    graphs_.emplace_back(key, exec);
  }
  CCLZ_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  return made;
}

cudaGraphExec_t CallGraphs::make(const std::function<void(cudaStream_t)>& queue) {
  CCLZ_CUDA_CHECK(cudaStreamBeginCapture(capture_, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    queue(capture_);
  } catch (...) {
    cudaStreamEndCapture(capture_, &graph);  // ends the capture, whatever it holds
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  CCLZ_CUDA_CHECK(cudaStreamEndCapture(capture_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CCLZ_CUDA_CHECK(made);
  return exec;
}

void CallGraphs::clear() {
  for (auto& g : graphs_) cudaGraphExecDestroy(g.second);
  graphs_.clear();
}

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
