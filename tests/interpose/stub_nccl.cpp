#include "stub_nccl.h"

#include <memory>
#include <mutex>

// NCCL's handle is opaque; here it only knows its ranks.
struct ncclComm {
  int rank;
  int ranks;
};

namespace {

std::mutex mutex;
std::vector<StubCall> calls;
std::vector<std::unique_ptr<ncclComm>> comms;
cudaStream_t capturing = nullptr;
ncclResult_t result = ncclSuccess;

ncclResult_t record(StubCall call) {
  std::lock_guard<std::mutex> lock(mutex);
  calls.push_back(std::move(call));
  return result;
}

StubCall data(const char* function, ncclComm_t comm, const void* send, const void* recv,
              size_t count, ncclDataType_t dtype, cudaStream_t stream) {
  StubCall c;
  c.function = function;
  c.comm = comm, c.send = send, c.recv = recv, c.count = count, c.dtype = dtype;
  c.stream = stream;
  return c;
}

}  // namespace

std::vector<StubCall> stubTakeCalls() {
  std::lock_guard<std::mutex> lock(mutex);
  std::vector<StubCall> taken;
  taken.swap(calls);
  return taken;
}

ncclComm_t stubMakeComm(int rank, int ranks) {
  std::lock_guard<std::mutex> lock(mutex);
  comms.push_back(std::make_unique<ncclComm>(ncclComm{rank, ranks}));
  return comms.back().get();
}

void stubSetCapturing(cudaStream_t stream) { capturing = stream; }
void stubSetResult(ncclResult_t r) { result = r; }

extern "C" {

ncclResult_t ncclAllGather(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                           ncclComm_t comm, cudaStream_t stream) {
  return record(data(__func__, comm, send, recv, count, dtype, stream));
}

ncclResult_t ncclAlltoAll(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                          ncclComm_t comm, cudaStream_t stream) {
  return record(data(__func__, comm, send, recv, count, dtype, stream));
}

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  StubCall c = data(__func__, comm, send, recv, count, dtype, stream);
  c.redOp = op;
  return record(c);
}

ncclResult_t ncclReduceScatter(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  StubCall c = data(__func__, comm, send, recv, count, dtype, stream);
  c.redOp = op;
  return record(c);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t dtype,
                           int root, ncclComm_t comm, cudaStream_t stream) {
  StubCall c = data(__func__, comm, send, recv, count, dtype, stream);
  c.root = root;
  return record(c);
}

ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t dtype, int root, ncclComm_t comm,
                       cudaStream_t stream) {
  StubCall c = data(__func__, comm, buff, buff, count, dtype, stream);
  c.root = root;
  return record(c);
}

ncclResult_t ncclSend(const void* send, size_t count, ncclDataType_t dtype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  StubCall c = data(__func__, comm, send, nullptr, count, dtype, stream);
  c.peer = peer;
  return record(c);
}

ncclResult_t ncclRecv(void* recv, size_t count, ncclDataType_t dtype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  StubCall c = data(__func__, comm, nullptr, recv, count, dtype, stream);
  c.peer = peer;
  return record(c);
}

ncclResult_t ncclGroupStart() {
  StubCall c;
  c.function = __func__;
  record(c);
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  StubCall c;
  c.function = __func__;
  record(c);
  return ncclSuccess;
}

ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t*) {
  StubCall c;
  c.function = __func__;
  record(c);
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                           ncclConfig_t* config) {
  *newcomm = stubMakeComm(comm->rank, comm->ranks);
  StubCall c;
  c.function = __func__;
  c.comm = comm, c.color = color, c.key = key, c.child = *newcomm;
  c.blocking = config ? config->blocking : -1;
  record(c);
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  StubCall c;
  c.function = __func__;
  c.comm = comm;
  record(c);
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  StubCall c;
  c.function = __func__;
  c.comm = comm;
  record(c);
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = comm->ranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t, int* device) {
  *device = 0;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t, ncclResult_t* state) {
  *state = ncclSuccess;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t) { return "stub"; }
const char* ncclGetLastError(ncclComm_t) { return "stub"; }

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  *status =
      stream && stream == capturing ? cudaStreamCaptureStatusActive : cudaStreamCaptureStatusNone;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int) { return cudaSuccess; }
cudaError_t cudaGetLastError() { return cudaSuccess; }

}  // extern "C"
