#include "real_nccl.h"

#include <dlfcn.h>

#include "log.h"

namespace cclz::interpose {
namespace {

template <typename F>
void lookUp(F* f, const char* name) {
  *f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

RealNccl lookUpAll() {
  RealNccl r{};
  lookUp(&r.allGather, "ncclAllGather");
  lookUp(&r.allReduce, "ncclAllReduce");
  lookUp(&r.reduceScatter, "ncclReduceScatter");
  lookUp(&r.allToAll, "ncclAlltoAll");
  lookUp(&r.broadcast, "ncclBroadcast");
  lookUp(&r.bcast, "ncclBcast");
  lookUp(&r.send, "ncclSend");
  lookUp(&r.recv, "ncclRecv");
  lookUp(&r.groupStart, "ncclGroupStart");
  lookUp(&r.groupEnd, "ncclGroupEnd");
  lookUp(&r.groupSimulateEnd, "ncclGroupSimulateEnd");
  lookUp(&r.commSplit, "ncclCommSplit");
  lookUp(&r.commDestroy, "ncclCommDestroy");
  lookUp(&r.commAbort, "ncclCommAbort");
  return r;
}

}  // namespace

const RealNccl& real() {
  static const RealNccl table = lookUpAll();
  return table;
}

ncclResult_t missing(const char* function) {
  warn("%s is not in the NCCL loaded after libcclz_nccl.so", function);
  return ncclInvalidUsage;
}

}  // namespace cclz::interpose
