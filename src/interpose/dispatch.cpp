#include "dispatch.h"

#include "companion.h"
#include "log.h"
#include "registry.h"
#include "settings.h"

namespace cclz::interpose {
namespace {

const Settings& settings() {
  static const Settings& s = []() -> const Settings& {
    const Settings& parsed = Settings::get();
    if (!parsed.error.empty()) warn("%s", parsed.error.c_str());
    return parsed;
  }();
  return s;
}

ncclResult_t ncclResultOf(cclzResult_t result) {
  switch (result) {
    case cclzSuccess:
      return ncclSuccess;
    case cclzUnhandledCudaError:
      return ncclUnhandledCudaError;
    case cclzSystemError:
      return ncclSystemError;
    case cclzInvalidArgument:
      return ncclInvalidArgument;
    case cclzInvalidUsage:
      return ncclInvalidUsage;
    default:
      return ncclInternalError;
  }
}

}  // namespace

Decision decide(const Call& call, ncclComm_t comm, cudaStream_t stream, int peer) {
  if (forwarding() || Registry::get().isInternal(comm)) return {Reason::Internal};
  const Reason routed = route(call, groupDepth(), settings());
  if (routed != Reason::None) return {routed};
  const CclzApi* api = cclzApi();
  if (!api) return {Reason::Unavailable};
  // A call being captured must stay NCCL's: cclz may wait on the host for its peers, which a
  // graph's launch cannot do, and its adaptive trials time calls with events.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (api->streamIsCapturing(stream, &capture) != cudaSuccess) {
    (void)api->clearError();  // NCCL reports the stream's problem, if there is one
    return {Reason::Cuda};
  }
  if (capture != cudaStreamCaptureStatusNone) return {Reason::Capture};
  if (isPointToPoint(call.op)) {
    // Before the companion, which a send or receive may make: NCCL's own call copies to this
    // rank, or reports a peer that is no rank.
    int rank = -1, ranks = 0;
    if (real().commUserRank(comm, &rank) != ncclSuccess ||
        real().commCount(comm, &ranks) != ncclSuccess || peer < 0 || peer >= ranks || peer == rank)
      return {Reason::Peer};
  }
  const Companion::Use use = Registry::get().companion(comm)->use(!isPointToPoint(call.op));
  if (use.reason != Reason::None) return {use.reason};
  return {Reason::None, api, use.comm, use.device};
}

const cclzCodecConfig_t* lossless() {
  static const cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  return &config;
}

ncclResult_t finish(const char* function, Op op, const CclzApi& api, cclzComm_t comm,
                    cclzResult_t result) {
  if (result != cclzSuccess) {
    // Not forwarded: cclz may have moved data already, and peers may be inside cclz's call.
    warn("%s through cclz failed: %s: %s", function, api.errorString(result), api.lastError(comm));
    countOutcome(op, Outcome::Failed);
    return ncclResultOf(result);
  }
  if (statsEnabled()) {  // one more C call per call: only when counting
    cclzPath_t path = cclzPathCompressed;
    api.commGetLastPath(comm, &path, nullptr);
    countOutcome(op, path == cclzPathPlain ? Outcome::Plain : Outcome::Compressed);
  }
  return ncclSuccess;
}

ncclResult_t deviceFailed(const char* function, Op op, int device) {
  warn("%s: could not make the communicator's GPU %d current", function, device);
  countOutcome(op, Outcome::Failed);
  return ncclUnhandledCudaError;
}

}  // namespace cclz::interpose
