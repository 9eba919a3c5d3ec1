#include "cclz_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <string>

#include "log.h"

namespace cclz::interpose {
namespace {

template <typename F>
bool lookUp(F* f, void* library, const char* name, bool programFirst, std::string* missing) {
  void* p = programFirst ? dlsym(RTLD_DEFAULT, name) : nullptr;
  if (!p) p = dlsym(library, name);
  *f = reinterpret_cast<F>(p);
  if (!p && missing->empty()) *missing = name;
  return p != nullptr;
}

const CclzApi* load() {
  const char* chosen = std::getenv("CCLZ_LIBRARY");
  const std::string path = chosen && *chosen ? chosen : "libcclz.so";
  // RTLD_NOW: a function missing from the NCCL the program loaded fails here, where the drop-in
  // can still send every call to NCCL, and not in the middle of a call.
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    warn("could not load %s (%s): every NCCL call goes to NCCL as it is", path.c_str(), dlerror());
    return nullptr;
  }
  static CclzApi api{};
  std::string missing;
  decltype(&cclzGetVersion) getVersion = nullptr;
  lookUp(&getVersion, library, "cclzGetVersion", false, &missing);
  lookUp(&api.errorString, library, "cclzGetErrorString", false, &missing);
  lookUp(&api.lastError, library, "cclzGetLastError", false, &missing);
  lookUp(&api.commInitFromNcclConfig, library, "cclzCommInitFromNcclConfig", false, &missing);
  lookUp(&api.commDestroy, library, "cclzCommDestroy", false, &missing);
  lookUp(&api.commAbort, library, "cclzCommAbort", false, &missing);
  lookUp(&api.commGetLastPath, library, "cclzCommGetLastPath", false, &missing);
  lookUp(&api.allGather, library, "cclzAllGather", false, &missing);
  lookUp(&api.allToAll, library, "cclzAllToAll", false, &missing);
  lookUp(&api.allReduce, library, "cclzAllReduce", false, &missing);
  lookUp(&api.reduceScatter, library, "cclzReduceScatter", false, &missing);
  lookUp(&api.send, library, "cclzSend", false, &missing);
  lookUp(&api.recv, library, "cclzRecv", false, &missing);
  lookUp(&api.streamIsCapturing, library, "cudaStreamIsCapturing", true, &missing);
  lookUp(&api.getDevice, library, "cudaGetDevice", true, &missing);
  lookUp(&api.setDevice, library, "cudaSetDevice", true, &missing);
  lookUp(&api.clearError, library, "cudaGetLastError", true, &missing);
  if (!missing.empty()) {
    warn("%s has no %s: every NCCL call goes to NCCL as it is", path.c_str(), missing.c_str());
    return nullptr;
  }
  int version = 0;
  if (getVersion(&version) != cclzSuccess || version / 100 != CCLZ_VERSION_CODE / 100) {
    warn("%s is cclz %d, the drop-in %d: every NCCL call goes to NCCL as it is", path.c_str(),
         version, CCLZ_VERSION_CODE);
    return nullptr;
  }
  // The library stays loaded for the life of the process: cclz's threads may outlive any scope.
  return &api;
}

}  // namespace

const CclzApi* cclzApi() {
  static const CclzApi* api = load();
  return api;
}

}  // namespace cclz::interpose
