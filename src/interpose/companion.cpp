#include "companion.h"

#include <thread>

#include "cclz_library.h"
#include "device_guard.h"
#include "log.h"
#include "real_nccl.h"
#include "registry.h"
#include "settings.h"

namespace cclz::interpose {
namespace {

// A communicator split off a nonblocking one may still be in the making when the split returns
// (ncclInProgress): NCCL's way to wait for it is to poll its asynchronous state.
ncclResult_t waitUntilMade(ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  while (state == ncclInProgress) {
    const ncclResult_t polled = real().commGetAsyncError(comm, &state);
    if (polled != ncclSuccess) return polled;
    if (state == ncclInProgress) std::this_thread::yield();
  }
  return state;
}

}  // namespace

Companion::Use Companion::use(bool collective) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_ == State::Unmade) {
    int ranks = 0;
    if (collective || (real().commCount(user_, &ranks) == ncclSuccess && ranks == 2)) make();
  }
  switch (state_) {
    case State::Ready:
      return {Reason::None, comm_, device_, rank_, ranks_};
    case State::Unmade:
      return {Reason::NoCompanion};
    case State::Unavailable:
      break;
  }
  return {Reason::Unavailable};
}

void Companion::make() {
  state_ = State::Unavailable;     // unless everything below succeeds
  const CclzApi* api = cclzApi();  // loaded by decide() already
  const RealNccl& nccl = real();
  if (!api) return;
  if (nccl.commCount(user_, &ranks_) != ncclSuccess ||
      nccl.commUserRank(user_, &rank_) != ncclSuccess ||
      nccl.commCuDevice(user_, &device_) != ncclSuccess) {
    warn("could not query an NCCL communicator (%s): its calls go to NCCL as they are",
         nccl.getLastError(user_));
    return;
  }
  if (ranks_ < 2) return;  // nothing to move: NCCL's own call is the fastest
  DeviceGuard device(*api, device_);
  if (!device.ok()) {
    warn("could not make GPU %d current: the calls of its NCCL communicator go to NCCL as they are",
         device_);
    return;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.commName = "cclz-interpose";
  ncclComm_t internal = nullptr;
  ncclResult_t split = nccl.commSplit(user_, 0, rank_, &internal, &config);
  if (split == ncclInProgress && internal) split = waitUntilMade(internal);
  if (split != ncclSuccess || !internal) {
    warn(
        "ncclCommSplit for cclz's communicator failed (%s: %s): the calls of this NCCL "
        "communicator go to NCCL as they are",
        nccl.getErrorString(split), nccl.getLastError(user_));
    return;
  }
  Registry::get().addInternal(internal);
  // Adaptive unless CCLZ_INTERPOSE_FORCE=1 (the drop-in's communicators only) or CCLZ_ADAPTIVE=0
  // (every cclz communicator of the process) says otherwise.
  cclzCommConfig_t cclzConfig = CCLZ_COMM_CONFIG_INITIALIZER;
  if (Settings::get().force) cclzConfig.adaptive = 0;
  const cclzResult_t made = api->commInitFromNcclConfig(&comm_, internal, &cclzConfig);
  if (made != cclzSuccess) {
    warn(
        "cclz could not set up beside an NCCL communicator (%s: %s): its calls go to NCCL as "
        "they are",
        api->errorString(made), api->lastError(nullptr));
    comm_ = nullptr;
    Registry::get().removeInternal(internal);
    nccl.commDestroy(internal);
    return;
  }
  internal_ = internal;
  state_ = State::Ready;
}

void Companion::destroy() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_ != State::Ready) return;
  state_ = State::Unavailable;
  const CclzApi& api = *cclzApi();  // Ready: loaded
  DeviceGuard device(api, device_);
  const cclzResult_t destroyed = api.commDestroy(comm_);
  if (destroyed != cclzSuccess)
    warn("cclzCommDestroy: %s: %s", api.errorString(destroyed), api.lastError(nullptr));
  Registry::get().removeInternal(internal_);
  real().commDestroy(internal_);
  comm_ = nullptr;
  internal_ = nullptr;
}

void Companion::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (state_ != State::Ready) return;
  state_ = State::Unavailable;
  const CclzApi& api = *cclzApi();
  DeviceGuard device(api, device_);
  // cclzCommAbort aborts internal_ too (cclz.h): through this library's ncclCommAbort, which
  // takes it out of the registry.
  const cclzResult_t aborted = api.commAbort(comm_);
  if (aborted != cclzSuccess)
    warn("cclzCommAbort: %s: %s", api.errorString(aborted), api.lastError(nullptr));
  Registry::get().removeInternal(internal_);
  comm_ = nullptr;
  internal_ = nullptr;
}

}  // namespace cclz::interpose
