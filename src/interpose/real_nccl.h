// The NCCL functions that libcclz_nccl.so defines itself, as the NCCL loaded after it defines
// them: what every forwarded call, and every call on cclz's own communicators, goes to.
#pragma once

#include <nccl.h>

namespace cclz::interpose {

struct RealNccl {
  decltype(&ncclAllGather) allGather;
  decltype(&ncclAllReduce) allReduce;
  decltype(&ncclReduceScatter) reduceScatter;
  decltype(&ncclAlltoAll) allToAll;  // NULL in an NCCL older than 2.28
  decltype(&ncclBroadcast) broadcast;
  decltype(&ncclBcast) bcast;
  decltype(&ncclSend) send;
  decltype(&ncclRecv) recv;
  decltype(&ncclGroupStart) groupStart;
  decltype(&ncclGroupEnd) groupEnd;
  decltype(&ncclGroupSimulateEnd) groupSimulateEnd;  // NULL in an NCCL older than 2.22
  decltype(&ncclCommSplit) commSplit;
  decltype(&ncclCommDestroy) commDestroy;
  decltype(&ncclCommAbort) commAbort;
};

// Looked up once with dlsym(RTLD_NEXT, ...): the next definition after this library in the
// process's search order, which is the NCCL that the program (and libcclz) loaded.
const RealNccl& real();

// The call for a function this NCCL lacks: ncclInvalidUsage, with a warning naming it.
ncclResult_t missing(const char* function);

}  // namespace cclz::interpose
