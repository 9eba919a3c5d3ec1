#include "real_nccl.h"

#include <dlfcn.h>
#include <link.h>

#include <cstring>
#include <string>

#include "log.h"

namespace cclz::interpose {
namespace {

// The path of the first loaded object whose name holds "libnccl".
int findNccl(struct dl_phdr_info* info, size_t, void* path) {
  if (!info->dlpi_name || !std::strstr(info->dlpi_name, "libnccl")) return 0;
  *static_cast<std::string*>(path) = info->dlpi_name;
  return 1;
}

void* loadedNccl() {
  std::string path;
  dl_iterate_phdr(findNccl, &path);
  return path.empty() ? nullptr : dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
}

template <typename F>
void lookUp(F* f, const char* name, void* nccl) {
  void* p = dlsym(RTLD_NEXT, name);
  if (!p && nccl) p = dlsym(nccl, name);
  *f = reinterpret_cast<F>(p);
}

RealNccl lookUpAll() {
  void* nccl = loadedNccl();
  RealNccl r{};
  lookUp(&r.allGather, "ncclAllGather", nccl);
  lookUp(&r.allReduce, "ncclAllReduce", nccl);
  lookUp(&r.reduceScatter, "ncclReduceScatter", nccl);
  lookUp(&r.allToAll, "ncclAlltoAll", nccl);
  lookUp(&r.broadcast, "ncclBroadcast", nccl);
  lookUp(&r.bcast, "ncclBcast", nccl);
  lookUp(&r.send, "ncclSend", nccl);
  lookUp(&r.recv, "ncclRecv", nccl);
  lookUp(&r.groupStart, "ncclGroupStart", nccl);
  lookUp(&r.groupEnd, "ncclGroupEnd", nccl);
  lookUp(&r.groupSimulateEnd, "ncclGroupSimulateEnd", nccl);
  lookUp(&r.commSplit, "ncclCommSplit", nccl);
  lookUp(&r.commDestroy, "ncclCommDestroy", nccl);
  lookUp(&r.commAbort, "ncclCommAbort", nccl);
  lookUp(&r.commCount, "ncclCommCount", nccl);
  lookUp(&r.commUserRank, "ncclCommUserRank", nccl);
  lookUp(&r.commCuDevice, "ncclCommCuDevice", nccl);
  lookUp(&r.commGetAsyncError, "ncclCommGetAsyncError", nccl);
  lookUp(&r.getErrorString, "ncclGetErrorString", nccl);
  lookUp(&r.getLastError, "ncclGetLastError", nccl);
  if (!r.allGather) warn("found no NCCL in the process: every NCCL call will fail");
  return r;
}

}  // namespace

const RealNccl& real() {
  static const RealNccl table = lookUpAll();
  return table;
}

ncclResult_t missing(const char* function) {
  warn("%s is not in the NCCL this process loaded", function);
  return ncclInvalidUsage;
}

}  // namespace cclz::interpose
