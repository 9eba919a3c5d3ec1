#include "device_guard.h"

#include <cuda_runtime_api.h>

namespace cclz::interpose {

DeviceGuard::DeviceGuard(int device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) {
    (void)cudaGetLastError();
    previous_ = -1;
    return;
  }
  ok_ = previous_ == device || cudaSetDevice(device) == cudaSuccess;
  if (!ok_) (void)cudaGetLastError();
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (previous_ >= 0 && cudaGetDevice(&current) == cudaSuccess && current != previous_)
    (void)cudaSetDevice(previous_);
}

}  // namespace cclz::interpose
