#include "device_guard.h"

namespace cclz::interpose {

DeviceGuard::DeviceGuard(const CclzApi& api, int device) : api_(api) {
  if (api_.getDevice(&previous_) != cudaSuccess) {
    (void)api_.clearError();
    previous_ = -1;
    return;
  }
  ok_ = previous_ == device || api_.setDevice(device) == cudaSuccess;
  if (!ok_) (void)api_.clearError();
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (previous_ >= 0 && api_.getDevice(&current) == cudaSuccess && current != previous_)
    (void)api_.setDevice(previous_);
}

}  // namespace cclz::interpose
