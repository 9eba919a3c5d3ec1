// One NCCL call's way: to NCCL as it is, or through cclz with the lossless codec.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "cclz/cclz.h"
#include "cclz_library.h"
#include "device_guard.h"
#include "real_nccl.h"
#include "route.h"
#include "stats.h"
#include "thread_state.h"

namespace cclz::interpose {

struct Decision {
  Reason reason;  // None: through cclz, on comm
  const CclzApi* api = nullptr;
  cclzComm_t comm = nullptr;
  int device = 0;
};

// Where the call goes. peer: a send's or receive's peer, else -1.
Decision decide(const Call& call, ncclComm_t comm, cudaStream_t stream, int peer);

// The codec of every call that goes through cclz: lossless, at its defaults, alike on every rank.
const cclzCodecConfig_t* lossless();

// What a call that went through cclz returns: counted; a failure printed and given NCCL's code.
ncclResult_t finish(const char* function, Op op, const CclzApi& api, cclzComm_t comm,
                    cclzResult_t result);
// The same when the communicator's GPU could not be made current.
ncclResult_t deviceFailed(const char* function, Op op, int device);

// Calls the real NCCL function (NULL: this NCCL lacks it).
template <typename Fn, typename... Args>
ncclResult_t forward(const char* function, Fn fn, Args... args) {
  if (!fn) return missing(function);
  ForwardScope scope;
  return fn(args...);
}

// The body of every collective and point-to-point call this library defines. forwardCall() calls
// NCCL; viaCclz(api, comm) makes the cclz call and returns its result.
template <typename Forward, typename ViaCclz>
ncclResult_t interpose(const char* function, const Call& call, ncclComm_t comm, cudaStream_t stream,
                       int peer, Forward&& forwardCall, ViaCclz&& viaCclz) {
  const Decision d = decide(call, comm, stream, peer);
  if (d.reason != Reason::None) {
    countForwarded(call.op, d.reason);
    return forwardCall();
  }
  DeviceGuard device(*d.api, d.device);
  if (!device.ok()) return deviceFailed(function, call.op, d.device);
  return finish(function, call.op, *d.api, d.comm, viaCclz(*d.api, d.comm));
}

}  // namespace cclz::interpose
