#include "transport/nccl/peer_window.h"

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

#include <nccl_device.h>

#include "codec/device.h"
#include "common/error.h"

namespace cclz {
namespace {

__global__ void peerPointersKernel(ncclWindow_t window, int n, void** out) {
  const int r = static_cast<int>(threadIdx.x);
  if (r < n) out[r] = ncclGetPeerPointer(window, 0, r);
}

}  // namespace

void peerPointers(ncclWindow_t window, int n, std::vector<uint8_t*>* out) {
  void** device = nullptr;
  CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&device), n * sizeof(void*)));
  peerPointersKernel<<<1, n>>>(window, n, device);
  cudaError_t launched = cudaGetLastError();
  std::vector<void*> host(n, nullptr);
  if (launched == cudaSuccess)
    launched = cudaMemcpy(host.data(), device, n * sizeof(void*), cudaMemcpyDeviceToHost);
  cudaFree(device);
  CCLZ_CUDA_CHECK(launched);
  out->assign(n, nullptr);
  for (int r = 0; r < n; ++r) (*out)[r] = static_cast<uint8_t*>(host[r]);
}

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL_DEVICE_API
