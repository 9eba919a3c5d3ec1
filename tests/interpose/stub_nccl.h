// A stand-in for NCCL and for the few CUDA calls libcclz_nccl.so makes before it hands a call to
// cclz, for tests on a machine without a GPU: it records every call it gets and moves nothing.
// A test program links it and runs with LD_PRELOAD=libcclz_nccl.so: the program's NCCL calls
// reach the interposer first, and what the interposer forwards (dlsym(RTLD_NEXT)) reaches this
// library, which comes before the real NCCL and CUDA runtime in the process's search order.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <vector>

struct StubCall {
  std::string function;  // "ncclAllGather", ...
  ncclComm_t comm = nullptr;
  const void* send = nullptr;
  const void* recv = nullptr;
  size_t count = 0;
  int dtype = -1;
  int redOp = -1;
  int root = -1;  // broadcast
  int peer = -1;  // send, recv
  cudaStream_t stream = nullptr;
  // ncclCommSplit
  int color = 0, key = 0;
  int blocking = -1;  // the config's, -1 without one
  ncclComm_t child = nullptr;
};

// The calls that reached the stub since the last take, oldest first.
std::vector<StubCall> stubTakeCalls();
// A communicator of `ranks` ranks, this process being `rank`, on GPU 0.
ncclComm_t stubMakeComm(int rank, int ranks);
// cudaStreamIsCapturing says that this stream is being captured.
void stubSetCapturing(cudaStream_t stream);
// What the collective and point-to-point calls return (ncclSuccess unless set).
void stubSetResult(ncclResult_t result);
