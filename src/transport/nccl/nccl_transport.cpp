#include "transport/nccl/nccl_transport.h"

#ifdef CCLZ_HAVE_NCCL

#include <cuda_runtime_api.h>

#include <chrono>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>

#include "codec/device.h"
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

void* allocateSymmetricWindow(ncclComm_t comm, uint64_t bytes, ncclWindow_t* window) {
  CCLZ_REQUIRE(comm, cclzInvalidUsage, "the communicator was aborted");
  void* p = nullptr;
  CCLZ_NCCL_CHECK(ncclMemAlloc(&p, bytes));
  // Zeroed before the registration, which every rank must enter before any returns: a peer
  // never sees old bytes in it (the copy engines' flags start at zero: peer_window.h).
  cudaError_t zeroed = cudaMemset(p, 0, bytes);
  if (zeroed == cudaSuccess) zeroed = cudaDeviceSynchronize();
  if (zeroed != cudaSuccess) {
    ncclMemFree(p);
    CCLZ_CUDA_CHECK(zeroed);
  }
  const ncclResult_t registered =
      ncclCommWindowRegister(comm, p, bytes, window, NCCL_WIN_COLL_SYMMETRIC);
  if (registered != ncclSuccess) {
    ncclMemFree(p);
    CCLZ_NCCL_CHECK(registered);
  }
  return p;
}

void* NcclWindows::allocate(uint64_t bytes) {
  ncclWindow_t w = nullptr;
  void* p = allocateSymmetricWindow(comm_.load(), bytes, &w);
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

// How long the ranks may take to connect the control mesh once they all have its addresses
// (they have just passed an all-gather together, so it is usually milliseconds).
constexpr std::chrono::seconds kMeshConnectTimeout{60};

NcclTransport::NcclTransport(ncclComm_t comm, bool owned) : comm_(comm), owned_(owned) {
  CCLZ_REQUIRE(comm, cclzInvalidArgument, "the NCCL communicator is NULL");
  query();
  // If this throws, the constructor does not finish and the caller still owns comm
  // (cclzCommInitRank destroys it). A rank that cannot listen still takes part in the all-gather,
  // with an empty address, so that its peers fail with it instead of waiting for it there.
  std::optional<MeshListener> listener;
  cclzResult_t code = cclzSuccess;
  std::string why;
  try {
    listener.emplace();
  } catch (const Error& e) {
    code = e.code(), why = e.what();
  } catch (const std::exception& e) {
    code = cclzSystemError, why = e.what();
  }
  const std::vector<MeshAddress> addresses =
      allGatherAddresses(listener ? listener->address() : MeshAddress{});
  CCLZ_REQUIRE(why.empty(), code, why);
  for (int r = 0; r < size_; ++r)
    CCLZ_REQUIRE(hasAddress(addresses[r]), cclzSystemError,
                 "rank " + std::to_string(r) +
                     " could not listen for the control mesh (see its own error)");
  mesh_ = std::make_unique<HostMesh>(std::move(*listener), addresses, rank_, kMeshConnectTimeout);
}

namespace {

void cudaCheck(cudaError_t result, const char* call) {
  if (result != cudaSuccess)
    CCLZ_FAIL(cclzUnhandledCudaError, std::string(call) + " failed: " + cudaGetErrorString(result));
}

}  // namespace

std::vector<MeshAddress> NcclTransport::allGatherAddresses(const MeshAddress& mine) {
  const size_t d = sizeof(MeshAddress);
  std::vector<MeshAddress> all(size_);
  cudaStream_t stream = nullptr;
  uint8_t* wire = nullptr;  // [size_ addresses received][this rank's]
  cudaCheck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  try {
    cudaCheck(cudaMalloc(reinterpret_cast<void**>(&wire), (size_ + 1) * d), "cudaMalloc");
    cudaCheck(cudaMemcpyAsync(wire + size_ * d, &mine, d, cudaMemcpyHostToDevice, stream),
              "cudaMemcpyAsync");
    stream_ = stream;
    traceLaunch("all-gather of the control mesh's addresses", d, "bytes");
    CCLZ_NCCL_CHECK(ncclAllGather(wire + size_ * d, wire, d, ncclUint8, comm_, stream));
    cudaCheck(cudaMemcpyAsync(all.data(), wire, size_ * d, cudaMemcpyDeviceToHost, stream),
              "cudaMemcpyAsync");
    cudaCheck(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  } catch (...) {
    cudaStreamSynchronize(stream);
    cudaFree(wire);
    cudaStreamDestroy(stream);
    stream_ = nullptr;
    throw;
  }
  cudaFree(wire);
  cudaStreamDestroy(stream);
  stream_ = nullptr;
  return all;
}

void NcclTransport::query() {
  CCLZ_NCCL_CHECK(ncclCommUserRank(comm_, &rank_));
  CCLZ_NCCL_CHECK(ncclCommCount(comm_, &size_));
}

NcclTransport::~NcclTransport() {
  windows_.releaseAll();  // the engine released its areas already; not after comm_ is gone
  mesh_.reset();
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
  CCLZ_TRACE("nccl: send/recv group queued");
}

// NCCL wants its work launched in one order on every rank: the trace shows each launch and its
// thread, to compare the ranks' orders.
void NcclTransport::traceLaunch(const char* what, uint64_t amount, const char* unit) const {
  CCLZ_TRACE("nccl: %s, %llu %s, stream %p", what, static_cast<unsigned long long>(amount), unit,
             static_cast<void*>(stream_));
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
  if (state == ncclSuccess || state == ncclInProgress) return {};
  return std::string("NCCL: ") + ncclGetErrorString(state);
}

void NcclTransport::abort() {
  if (ncclComm_t comm = comm_.exchange(nullptr)) {
    CCLZ_TRACE("nccl: ncclCommAbort");
    const ncclResult_t r = ncclCommAbort(comm);
    CCLZ_TRACE("nccl: ncclCommAbort returned %d", static_cast<int>(r));
  }
}

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL
