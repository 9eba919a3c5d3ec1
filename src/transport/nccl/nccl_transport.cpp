#include "transport/nccl/nccl_transport.h"

#ifdef CCLZ_HAVE_NCCL

#include <cstdlib>
#include <string>
#include <system_error>
#include <thread>

#include "common/error.h"
#include "common/trace.h"

namespace cclz {

void ncclCheck(ncclResult_t result, const char* call, const char* file, int line) {
  if (result == ncclSuccess) return;
  const cclzResult_t code =
      result == ncclInvalidArgument ? cclzInvalidArgument
      : result == ncclInvalidUsage  ? cclzInvalidUsage
      : result == ncclUnhandledCudaError ? cclzUnhandledCudaError
                                         : cclzSystemError;
  throwError(code, std::string(call) + " failed: " + ncclGetErrorString(result) + " (" +
                       ncclGetLastError(nullptr) + ")",
             file, line);
}

ncclConfig_t ncclConfigFromEnvironment() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  const char* policy = std::getenv("CCLZ_NCCL_CTA_POLICY");
  if (!policy || !*policy) return config;
  const std::string v = policy;
  if (v == "default")
    config.CTAPolicy = NCCL_CTA_POLICY_DEFAULT;
  else if (v == "efficiency")
    config.CTAPolicy = NCCL_CTA_POLICY_EFFICIENCY;
  else if (v == "zero")
    config.CTAPolicy = NCCL_CTA_POLICY_ZERO;
  else
    CCLZ_FAIL(cclzInvalidArgument,
              "CCLZ_NCCL_CTA_POLICY=" + v + ": expected default, efficiency or zero");
  return config;
}

void NcclWindows::releaseAll() noexcept {
  std::map<void*, ncclWindow_t> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(windows_);
  }
  for (const auto& [p, w] : left) {
    if (ncclComm_t comm = comm_.load()) ncclCommWindowDeregister(comm, w);
    ncclMemFree(p);
  }
}

void* NcclWindows::allocate(uint64_t bytes) {
  ncclComm_t comm = comm_.load();
  CCLZ_REQUIRE(comm, cclzInvalidUsage, "the communicator was aborted");
  void* p = nullptr;
  CCLZ_NCCL_CHECK(ncclMemAlloc(&p, bytes));
  ncclWindow_t w = nullptr;
  const ncclResult_t registered =
      ncclCommWindowRegister(comm, p, bytes, &w, NCCL_WIN_COLL_SYMMETRIC);
  if (registered != ncclSuccess) {
    ncclMemFree(p);
    CCLZ_NCCL_CHECK(registered);
  }
  CCLZ_TRACE("nccl: %llu bytes of frames in a symmetric window",
             static_cast<unsigned long long>(bytes));
  std::lock_guard<std::mutex> lock(mutex_);
  windows_[p] = w;
  return p;
}

void NcclWindows::release(void* p) noexcept {
  if (!p) return;
  ncclWindow_t w = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = windows_.find(p);
    if (it == windows_.end()) return;
    w = it->second;
    windows_.erase(it);
  }
  if (ncclComm_t comm = comm_.load()) ncclCommWindowDeregister(comm, w);
  ncclMemFree(p);
}

NcclTransport::NcclTransport(ncclComm_t comm, bool owned) : comm_(comm), owned_(owned) {
  CCLZ_REQUIRE(comm, cclzInvalidArgument, "the NCCL communicator is NULL");
  query();
  // Same ranks in the same order (one color, the rank as key). If the split throws, the
  // constructor does not finish and the caller still owns comm (cclzCommInitRank destroys it).
  ncclComm_t split = nullptr;
  CCLZ_NCCL_CHECK(ncclCommSplit(comm_, 0, rank_, &split, nullptr));
  CCLZ_REQUIRE(split, cclzSystemError, "ncclCommSplit returned no communicator");
  try {
    control_.reset(new NcclTransport(split, ControlTag{}));
  } catch (...) {
    ncclCommDestroy(split);
    throw;
  }
}

NcclTransport::NcclTransport(ncclComm_t comm, ControlTag) : comm_(comm), owned_(true) { query(); }

void NcclTransport::query() {
  CCLZ_NCCL_CHECK(ncclCommUserRank(comm_, &rank_));
  CCLZ_NCCL_CHECK(ncclCommCount(comm_, &size_));
}

NcclTransport::~NcclTransport() {
  windows_.releaseAll();  // the engine released its areas already; not after comm_ is gone
  control_.reset();
  if (owned_ && comm_) ncclCommDestroy(comm_);
}

void NcclTransport::checkPeer(int peer) const {
  CCLZ_REQUIRE(peer >= 0 && peer < size_, cclzInvalidArgument,
               "peer " + std::to_string(peer) + " is not a rank of the communicator");
}

void NcclTransport::checkReady() const {
  CCLZ_REQUIRE(comm_, cclzInvalidUsage, "the communicator was aborted");
  CCLZ_REQUIRE(!inGroup_, cclzInternalError, "NCCL groups do not nest here");
}

void NcclTransport::groupStart(cclzStream_t stream) {
  checkReady();
  stream_ = reinterpret_cast<cudaStream_t>(stream);
  CCLZ_NCCL_CHECK(ncclGroupStart());
  inGroup_ = true;
  groupBytes_ = 0;
}

void NcclTransport::send(const void* buf, uint64_t bytes, int peer) {
  checkPeer(peer);
  CCLZ_REQUIRE(inGroup_, cclzInternalError, "send outside a group");
  CCLZ_NCCL_CHECK(ncclSend(buf, bytes, ncclUint8, peer, comm_, stream_));
  groupBytes_ += bytes;
}

void NcclTransport::recv(void* buf, uint64_t capacity, int peer, uint64_t* receivedBytes) {
  checkPeer(peer);
  CCLZ_REQUIRE(inGroup_, cclzInternalError, "recv outside a group");
  CCLZ_NCCL_CHECK(ncclRecv(buf, capacity, ncclUint8, peer, comm_, stream_));
  groupBytes_ += capacity;
  if (receivedBytes) *receivedBytes = capacity;
}

void NcclTransport::groupEnd() {
  CCLZ_REQUIRE(inGroup_, cclzInternalError, "groupEnd without groupStart");
  inGroup_ = false;
  traceLaunch("send/recv group", groupBytes_, "bytes sent and received");
  CCLZ_NCCL_CHECK(ncclGroupEnd());
  // After the call too: a hang inside ncclGroupEnd (connection setup on first use) and one in
  // what follows it look alike otherwise.
  CCLZ_TRACE("nccl %s: send/recv group queued", control_ ? "data" : "control");
}

// With asyncCalls = 1 the control communicator is driven by the caller's thread and the data one by
// the proxy's: NCCL wants launches on several communicators of a device in one order on every
// rank, so the trace shows each launch, and which communicator, to compare the ranks' orders.
void NcclTransport::traceLaunch(const char* what, uint64_t amount, const char* unit) const {
  CCLZ_TRACE("nccl %s: %s, %llu %s, stream %p", control_ ? "data" : "control", what,
             static_cast<unsigned long long>(amount), unit, static_cast<void*>(stream_));
}

void NcclTransport::allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t stream) {
  checkReady();
  stream_ = reinterpret_cast<cudaStream_t>(stream);
  traceLaunch("all-gather", bytes, "bytes");
  CCLZ_NCCL_CHECK(ncclAllGather(send, recv, bytes, ncclUint8, comm_,
                                reinterpret_cast<cudaStream_t>(stream)));
}

namespace {

// NCCL's type for a cclz floating dtype; false for the others (no reductions on them here).
bool ncclFloatType(int dtype, ncclDataType_t* type) {
  switch (dtype) {
    case cclzBfloat16: *type = ncclBfloat16; return true;
    case cclzFloat16: *type = ncclFloat16; return true;
    case cclzFloat32: *type = ncclFloat32; return true;
    default: return false;
  }
}

}  // namespace

bool NcclTransport::reduceScatter(const void* send, void* recv, uint64_t count, int dtype,
                                  bool average, cclzStream_t stream) {
  ncclDataType_t type;
  if (!ncclFloatType(dtype, &type)) return false;
  checkReady();
  stream_ = reinterpret_cast<cudaStream_t>(stream);
  traceLaunch("reduce-scatter", count, "elements");
  CCLZ_NCCL_CHECK(ncclReduceScatter(send, recv, count, type, average ? ncclAvg : ncclSum, comm_,
                                    reinterpret_cast<cudaStream_t>(stream)));
  return true;
}

bool NcclTransport::allReduce(const void* send, void* recv, uint64_t count, int dtype,
                              bool average, cclzStream_t stream) {
  ncclDataType_t type;
  if (!ncclFloatType(dtype, &type)) return false;
  checkReady();
  stream_ = reinterpret_cast<cudaStream_t>(stream);
  traceLaunch("all-reduce", count, "elements");
  CCLZ_NCCL_CHECK(ncclAllReduce(send, recv, count, type, average ? ncclAvg : ncclSum, comm_,
                                reinterpret_cast<cudaStream_t>(stream)));
  return true;
}

std::string NcclTransport::asyncError() {
  if (!comm_) return "the communicator was aborted";
  ncclResult_t state = ncclSuccess;
  if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) return "ncclCommGetAsyncError failed";
  if (state == ncclSuccess || state == ncclInProgress)
    return control_ ? control_->asyncError() : std::string();
  return std::string("NCCL: ") + ncclGetErrorString(state);
}

void NcclTransport::abortOwn() {
  if (ncclComm_t comm = comm_.exchange(nullptr)) {
    const char* which = control_ ? "data" : "control";
    CCLZ_TRACE("nccl %s: ncclCommAbort", which);
    const ncclResult_t r = ncclCommAbort(comm);
    CCLZ_TRACE("nccl %s: ncclCommAbort returned %d", which, static_cast<int>(r));
  }
}

// Both communicators at once. Aborting one communicator while a kernel of the other waits for a
// peer that will never come hangs (2x H200, NCCL 2.28: the control communicator, aborted first,
// hangs on the rank whose data kernel waits for a transfer its peer rejected; most likely the
// abort's frees wait for that kernel). With both abort flags raised together, every kernel
// of this transport ends and both aborts return (docs/collectives.md, "Checking the call").
void NcclTransport::abort() {
  if (!control_) return abortOwn();
  std::thread control;
  try {
    control = std::thread([this] { control_->abortOwn(); });
  } catch (const std::system_error&) {  // no thread to be had: the data one first, then
    abortOwn();
    return control_->abortOwn();
  }
  abortOwn();
  control.join();
}

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL
