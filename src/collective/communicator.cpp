#include "collective/communicator.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "collective/plan.h"
#include "collective/plan_memo.h"
#include "common/error.h"
#include "common/trace.h"
#include "overlap/device_overlap.h"
#include "transport/host_mesh.h"

#ifdef CCLZ_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "codec/device.h"
#endif

namespace cclz {

namespace {

// A setting of two values from the environment: false for `standard` (the default, also when
// unset or empty), true for `other`; anything else is refused, naming both.
bool envSwitch(const char* name, const char* standard, const char* other) {
  const char* set = std::getenv(name);
  if (!set || !*set) return false;
  const std::string v = set;
  CCLZ_REQUIRE(v == standard || v == other, cclzInvalidArgument,
               std::string(name) + "=" + v + ": expected " + standard + " (the default) or " +
                   other);
  return v == other;
}

}  // namespace

CommSettings CommSettings::fromEnvironment() {
  CommSettings s;
  if (const char* piece = std::getenv("CCLZ_PIECE_BYTES"); piece && *piece) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(piece, &end, 10);
    uint64_t scale = 1;
    if (end && (*end == 'K' || *end == 'k')) scale = 1ull << 10, ++end;
    if (end && (*end == 'M' || *end == 'm')) scale = 1ull << 20, ++end;
    CCLZ_REQUIRE(end && *end == '\0' && v > 0 && v <= (1ull << 30) / scale, cclzInvalidArgument,
                 std::string("CCLZ_PIECE_BYTES=") + piece +
                     ": expected a size from 1 to 1G (K and M suffixes allowed)");
    s.pieceBytes = v * scale;
  }
  if (const char* check = std::getenv("CCLZ_CHECK_CALLS"); check && *check) {
    const std::string v = check;
    CCLZ_REQUIRE(v == "deferred" || v == "1" || v == "first", cclzInvalidArgument,
                 "CCLZ_CHECK_CALLS=" + v + ": expected deferred (the default), 1 (every call) "
                 "or first");
    s.checkCalls = v == "1" ? CheckCalls::Every
                   : v == "first" ? CheckCalls::First
                                  : CheckCalls::Deferred;
  }
  s.highPriorityMove = !envSwitch("CCLZ_MOVE_PRIORITY", "high", "normal");
  s.transportFrames = envSwitch("CCLZ_NCCL_WINDOWS", "0", "1");
  if (const char* fused = std::getenv("CCLZ_FUSED"); fused && *fused) {
    const std::string v = fused;
    CCLZ_REQUIRE(v == "0" || v == "1" || v == "ce" || v == "direct", cclzInvalidArgument,
                 "CCLZ_FUSED=" + v +
                     ": expected 0 (the default), 1 (frames stored by a kernel), "
                     "ce (frames copied by the copy engines) or direct (frames encoded straight "
                     "into the peers' windows)");
    s.fused = v != "0";
    s.fusedCopyEngines = v == "ce";
    s.fusedDirect = v == "direct";
  }
  s.fusedGraphs = !envSwitch("CCLZ_FUSED_GRAPHS", "1", "0");
  if (const char* sms = std::getenv("CCLZ_OVERLAP_COMM_SMS"); sms && *sms) {
    char* end = nullptr;
    const long v = std::strtol(sms, &end, 10);
    CCLZ_REQUIRE(end && *end == '\0' && v >= 0 && v <= 1024, cclzInvalidArgument,
                 std::string("CCLZ_OVERLAP_COMM_SMS=") + sms +
                     ": expected a count of multiprocessors from 0 to 1024");
    s.overlapCommSms = static_cast<int>(v);
  }
  s.overlapMergedGather = envSwitch("CCLZ_OVERLAP_GATHER", "ring", "merged");
  if (const char* copy = std::getenv("CCLZ_OVERLAP_COPY"); copy && *copy) {
    const std::string v = copy;
    CCLZ_REQUIRE(v == "nccl" || v == "ce" || v == "auto", cclzInvalidArgument,
                 "CCLZ_OVERLAP_COPY=" + v + ": expected nccl (the default), ce or auto");
    s.overlapCopy = v == "ce"     ? OverlapCopy::CopyEngines
                    : v == "auto" ? OverlapCopy::Auto
                                  : OverlapCopy::Nccl;
  }
  s.overlapPushInTurn = envSwitch("CCLZ_OVERLAP_PUSH", "together", "inturn");
  s.twoLevel = !envSwitch("CCLZ_TWO_LEVEL", "1", "0");
  s.adaptive = !envSwitch("CCLZ_ADAPTIVE", "1", "0");
  return s;
}

void CommSettings::apply(const cclzCommConfig_t* config) {
  if (!config) return;
  CCLZ_REQUIRE(config->magic == CCLZ_CONFIG_MAGIC && config->size == sizeof(cclzCommConfig_t) &&
                   config->version / 100 == CCLZ_VERSION_CODE / 100,
               cclzInvalidArgument,
               "comm config was not initialized with CCLZ_COMM_CONFIG_INITIALIZER (of cclz " +
                   std::to_string(CCLZ_MAJOR) + "." + std::to_string(CCLZ_MINOR) + ")");
  CCLZ_REQUIRE(config->asyncCalls == 0 || config->asyncCalls == 1, cclzInvalidArgument,
               "asyncCalls must be 0 or 1, not " + std::to_string(config->asyncCalls));
  async = config->asyncCalls == 1;
  CCLZ_REQUIRE(config->adaptive == CCLZ_ADAPTIVE_DEFAULT || config->adaptive == 0 ||
                   config->adaptive == 1,
               cclzInvalidArgument,
               "adaptive must be 0, 1 or CCLZ_ADAPTIVE_DEFAULT, not " +
                   std::to_string(config->adaptive));
  if (config->adaptive != CCLZ_ADAPTIVE_DEFAULT) adaptive = config->adaptive == 1;
}

Communicator::Communicator(std::unique_ptr<Transport> transport, CommSettings settings)
    : transport_(std::move(transport)),
      settings_(settings),
      planMemo_(std::make_unique<PlanMemo>()) {
  traceRefresh();  // CCLZ_TRACE as set now
  // First, before anything that every rank must do alike (settings_agreement.cpp).
  agreeWithPeers();
  if (settings_.adaptive && !settings_.async) tuner_ = std::make_unique<Tuner>();
  // A host call returns complete: there is nothing to hand to a thread.
  CCLZ_REQUIRE(!settings_.async || transport_->memory() == MemoryKind::Device, cclzInvalidUsage,
               "asyncCalls = 1 is for device (NCCL) communicators; a host (MPI) communicator's "
               "calls return complete");
#ifdef CCLZ_HAVE_CUDA
  FrameMemory* frames = settings_.transportFrames ? transport_->frameMemory() : nullptr;
  engine_ = transport_->memory() == MemoryKind::Device
                ? makeDeviceEngine(settings_.highPriorityMove, frames)
                : makeHostEngine();
  // A host communicator has no NVLink to fuse over: CCLZ_FUSED leaves it as it is.
  if (settings_.fused && transport_->memory() == MemoryKind::Device) {
#ifdef CCLZ_HAVE_NCCL
    fused_ = makeFusedNvlink(*transport_, settings_.fusedCopyEngines, settings_.fusedGraphs,
                             settings_.pieceBytes, settings_.fusedDirect);
#else
    CCLZ_FAIL(cclzNotSupported, "CCLZ_FUSED needs a build with NCCL");
#endif
  }
  if (settings_.async) {
    int device = 0;
    CCLZ_CUDA_CHECK(cudaGetDevice(&device));
    // A new thread starts on device 0: without this, rank 1's jobs would use GPU 0.
    proxy_ = std::make_unique<Proxy>([device] {
      const cudaError_t set = cudaSetDevice(device);
      CCLZ_TRACE("proxy: thread up on device %d (%s)", device, cudaGetErrorString(set));
    });
  }
#else
  CCLZ_REQUIRE(transport_->memory() == MemoryKind::Host, cclzInvalidUsage,
               "a device transport needs a build with CUDA");
  engine_ = makeHostEngine();
#endif
  // Only a deferred check can fail while a call waits on work it queued.
  if (checksOnThread()) engine_->cancelWaitsWhen(&checkFailed_);
}

// The proxy's jobs still use the engine and the transport: they run to the end
// first (cclzCommDestroy waits for them, as NCCL's destroy waits for queued operations). The
// checking thread's exchanges too: every peer made the same calls, so they finish, and a peer
// that is gone ends its connection, which ends the wait with a failure.
Communicator::~Communicator() {
  if (proxy_ && !aborted_) {
    CCLZ_TRACE("destroy: waiting for the proxy's queued jobs");
    proxy_->stop(false);
    CCLZ_TRACE("destroy: proxy stopped");
  }
  if (deferred_ && !aborted_) {
    CCLZ_TRACE("destroy: waiting for the deferred checks");
    deferred_->drain();
    CCLZ_TRACE("destroy: deferred checks done");
  }
}

void Communicator::setJobError(cclzResult_t code, const std::string& message) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  if (jobError_ != cclzSuccess) return;
  jobError_ = code;
  jobErrorMessage_ = message;
}

CheckWhen Communicator::checkWhen(CollOp op) {
  // A rank alone has no peer to disagree with (a tensor-parallel group of one, say). Its deferred
  // checks had taken its small calls from 0.85-0.96x of NCCL's time to 0.78-0.86x
  // (bench/results/call-cost-one-rank-h200).
  if (transport_->size() == 1) return CheckWhen::Skip;
  const uint32_t bit = 1u << static_cast<int>(op);
  const bool first = (checkedOps_ & bit) == 0;
  checkedOps_ |= bit;
  switch (settings_.checkCalls) {
    case CheckCalls::Every:
      return CheckWhen::Now;
    case CheckCalls::First:
      return first ? CheckWhen::Now : CheckWhen::Skip;
    case CheckCalls::Deferred:
      break;
  }
  return first || !checksOnThread() ? CheckWhen::Now : CheckWhen::Deferred;
}

// The checking thread needs a control channel of its own that launches nothing on the data path:
// the transport's control mesh (device transports). A host call blocks until its data has moved,
// and nothing could end a wait that a mismatch left: host transports have no mesh and check now
// (an MPI exchange costs microseconds). An asyncCalls communicator's proxy queues NCCL work on
// its own thread, which the abort of a failed check would race: it checks now too.
bool Communicator::checksOnThread() const {
  return settings_.checkCalls == CheckCalls::Deferred && transport_->controlMesh() && !proxy_;
}

DeferredChecks& Communicator::deferredChecks() {
  if (!deferred_) {
    HostMesh* mesh = transport_->controlMesh();
    CCLZ_REQUIRE(mesh, cclzInternalError, "deferred checks need a transport with a control mesh");
    deferred_ = std::make_unique<DeferredChecks>(
        makeMeshCheckExchange(*mesh), transport_->rank(), transport_->size(),
        [this](const std::string& message) { failCheck(message); });
  }
  return *deferred_;
}

std::vector<uint8_t> Communicator::exchangeOnCaller(const void* mine, size_t bytes,
                                                    const std::vector<int>& peers) {
  if (!callerExchange_) {
    HostMesh* mesh = transport_->controlMesh();
    CCLZ_REQUIRE(mesh, cclzInternalError, "no control mesh to exchange over");
    callerExchange_ = makeMeshCheckExchange(*mesh);
  }
  const int slot = static_cast<int>(callerExchanges_++ % callerExchange_->slots());
  return exchangeAndWait(*callerExchange_, slot, transport_->rank(), transport_->size(), mine,
                         bytes, peers);
}

void Communicator::throwIfCheckFailed() {
  if (!checkFailed_.load(std::memory_order_acquire)) return;  // every call asks: no lock then
  std::lock_guard<std::mutex> lock(errorMutex_);
  CCLZ_REQUIRE(checkError_.empty(), cclzInvalidUsage,
               "an earlier call's deferred check found that the ranks disagree, and the "
               "communicator was aborted: " +
                   checkError_);
}

// The mismatched call's transfers may wait forever for bytes no peer sends; aborting the
// transport ends them. The abort must not race the caller's thread queuing work on the same
// NCCL communicators, so it waits for the call in progress to end. A call blocked in a host wait
// on that very work (a lossless call waits for frame sizes) gives up once checkFailed_ is set;
// the 2 s bound covers any other wait.
void Communicator::failCheck(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!checkError_.empty()) return;
    checkError_ = message;
  }
  checkFailed_ = true;  // a call waiting on the host for that work gives up (cancelWaitsWhen)
  std::unique_lock<std::timed_mutex> call(callMutex_, std::defer_lock);
  const bool callEnded = call.try_lock_for(std::chrono::seconds(2));
  CCLZ_TRACE("deferred check failed (%s); aborting the transport%s", message.c_str(),
             callEnded ? "" : " while a call is blocked");
  if (fused_) fused_->abort();  // NCCL's abort does not end a fused kernel waiting for its peers
#ifdef CCLZ_HAVE_CUDA
  if (overlap_) overlap_->abort();  // nor a stream waiting for a copy-engine path's flag
#endif
  transport_->abort();
  CCLZ_TRACE("deferred check failed: the transport is aborted");
}

cclzResult_t Communicator::asyncError(std::string* message) {
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (!checkError_.empty()) {
      *message = "a call's deferred check found that the ranks disagree, and the communicator "
                 "was aborted: " + checkError_;
      return cclzInvalidUsage;
    }
  }
  *message = transport_->asyncError();
  if (!message->empty()) return cclzSystemError;
  {
    std::lock_guard<std::mutex> lock(errorMutex_);
    if (jobError_ != cclzSuccess) {
      *message = "a queued call failed on the proxy thread: " + jobErrorMessage_;
      return jobError_;
    }
  }
  // The engine's error word belongs to the thread using the engine: while the proxy runs jobs,
  // it is read once they are done (a later call of this function).
  if (proxy_ && proxy_->busy()) return cclzSuccess;
  cclzResult_t found = engine_->pollError(message);
  if (found == cclzSuccess && fused_) found = fused_->pollError(message);
#ifdef CCLZ_HAVE_CUDA
  if (found == cclzSuccess && overlap_) found = overlap_->pollError(message);
#endif
  return found;
}

overlap::DeviceOverlap& Communicator::deviceOverlap() {
#ifdef CCLZ_HAVE_CUDA
  if (!overlap_)
    overlap_ = std::make_unique<overlap::DeviceOverlap>(
        settings_.highPriorityMove, settings_.overlapReservedSms(false),
        settings_.overlapReservedSms(true), settings_.overlapMergedGather, settings_.overlapCopy,
        settings_.overlapPushInTurn);
  return *overlap_;
#else
  CCLZ_FAIL(cclzNotSupported, "this build of cclz has no CUDA support");
#endif
}

// Queued jobs are cancelled (their tickets published, so no cclzCommStreamWait hangs), the
// transport is aborted (which ends the NCCL waits of a running job), then the proxy's thread ends.
// The checking thread stops without waiting for its exchanges; peers waiting for this rank's
// part then see its control mesh close (at destroy) and fail theirs.
void Communicator::abort() {
  aborted_ = true;
  if (fused_) fused_->abort();  // before the transport's: see failCheck
#ifdef CCLZ_HAVE_CUDA
  if (overlap_) overlap_->abort();
#endif
  if (deferred_) deferred_->stop();
  if (proxy_) {
    setJobError(cclzInvalidUsage, "the communicator was aborted");
    transport_->abort();
    proxy_->stop(true);
    return;
  }
  transport_->abort();
}

void Communicator::streamWait(cclzStream_t stream) {
  if (!proxy_) return;
#ifdef CCLZ_HAVE_CUDA
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CCLZ_CUDA_CHECK(cudaStreamIsCapturing(s, &status));
  CCLZ_REQUIRE(status == cudaStreamCaptureStatusNone, cclzInvalidUsage,
               "the stream is being captured into a CUDA graph: a graph cannot wait for the "
               "proxy's calls (capture on a communicator without asyncCalls)");
  const uint64_t last = doneEvents_.lastIssued();
  CCLZ_TRACE("stream wait: for call %llu to be queued", static_cast<unsigned long long>(last));
  const DoneEvents::Event done = doneEvents_.waitFor(last);
  CCLZ_TRACE("stream wait: call %llu queued", static_cast<unsigned long long>(last));
  if (done) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(done.get()), 0));
#else
  (void)stream;
#endif
  std::lock_guard<std::mutex> lock(errorMutex_);
  CCLZ_REQUIRE(jobError_ == cclzSuccess, jobError_,
               "a queued call failed on the proxy thread: " + jobErrorMessage_);
}

void Communicator::setLastError(const std::string& message) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  lastError_ = message;
}

const char* Communicator::lastError() {
  std::lock_guard<std::mutex> lock(errorMutex_);
  lastErrorCopy_ = lastError_;
  return lastErrorCopy_.c_str();
}

}  // namespace cclz
