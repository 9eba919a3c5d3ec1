// The NCCL functions the drop-in calls: those it defines itself (as the program's NCCL defines
// them: every forwarded call, and every call on cclz's own communicators, goes there) and the
// queries it makes of a communicator. libcclz_nccl.so links no NCCL: the program's is the one.
#pragma once

#include <nccl.h>

namespace cclz::interpose {

struct RealNccl {
  decltype(&ncclAllGather) allGather;
  decltype(&ncclAllReduce) allReduce;
  decltype(&ncclReduceScatter) reduceScatter;
  decltype(&ncclAlltoAll) allToAll;
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclBcast) bcast;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclGroupStart) groupStart;
  decltype(&ncclGroupEnd) groupEnd;
  decltype(&ncclGroupSimulateEnd) groupSimulateEnd;
  decltype(&ncclCommSplit) commSplit;
  decltype(&ncclCommDestroy) commDestroy;
  decltype(&ncclCommAbort) commAbort;
  decltype(&ncclCommCount) commCount;
  decltype(&ncclCommUserRank) commUserRank;
  decltype(&ncclCommCuDevice) commCuDevice;
  decltype(&ncclCommGetAsyncError) commGetAsyncError;
  decltype(&ncclGetErrorString) getErrorString;
  decltype(&ncclGetLastError) getLastError;
};

// Looked up once, at the first call: dlsym(RTLD_NEXT, ...), the next definition after this
// library in the process's search order; where the program loaded its NCCL outside that order
// (a Python extension's libraries are loaded with RTLD_LOCAL), the first loaded libnccl. A
// function this NCCL lacks is NULL.
const RealNccl& real();

// The call for a function this NCCL lacks: ncclInvalidUsage, with a warning naming it.
ncclResult_t missing(const char* function);

}  // namespace cclz::interpose
