// Makes a communicator's GPU the thread's current device for a scope, and puts back the one the
// caller had: cclz creates its streams and memory on the current device, while an NCCL call may
// come from a thread whose current device is another (NCCL itself uses the communicator's).
#pragma once

#include "cclz_library.h"

namespace cclz::interpose {

class DeviceGuard {
 public:
  DeviceGuard(const CclzApi& api, int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  bool ok() const { return ok_; }

 private:
  const CclzApi& api_;
  int previous_ = -1;
  bool ok_ = false;
};

}  // namespace cclz::interpose
