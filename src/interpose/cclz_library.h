// libcclz and the CUDA runtime, as the drop-in uses them: loaded at the first call that may go
// through cclz, not with the drop-in. Preloaded with the program, a libcclz linked in would bring
// its own libnccl.so.2 before the program's libraries load theirs, and those would bind to it (a
// library is loaded once per soname): a torch wheel would run on cclz's NCCL, and fail to load
// where it needs functions of a newer one. Loaded later, libcclz binds to the NCCL and the CUDA
// runtime the program has loaded already. CCLZ_LIBRARY names another libcclz; by default it is the
// libcclz.so beside the drop-in (its RUNPATH: $ORIGIN, and the build folder in a build).
#pragma once

#include <cuda_runtime_api.h>

#include "cclz/cclz.h"

namespace cclz::interpose {

struct CclzApi {
  decltype(&cclzGetErrorString) errorString;
  decltype(&cclzGetLastError) lastError;
  decltype(&cclzCommInitFromNcclConfig) commInitFromNcclConfig;
  decltype(&cclzCommDestroy) commDestroy;
  decltype(&cclzCommAbort) commAbort;
  decltype(&cclzCommGetLastPath) commGetLastPath;
  decltype(&cclzAllGather) allGather;
  decltype(&cclzAllToAll) allToAll;
  decltype(&cclzAllReduce) allReduce;
  decltype(&cclzReduceScatter) reduceScatter;
  decltype(&cclzSend) send;
  decltype(&cclzRecv) recv;
  // The CUDA runtime's: the program's where it exports one (RTLD_DEFAULT), else libcclz's.
  decltype(&cudaStreamIsCapturing) streamIsCapturing;
  decltype(&cudaGetDevice) getDevice;
  decltype(&cudaSetDevice) setDevice;
  decltype(&cudaGetLastError) clearError;  // cudaGetLastError
};

// Loads libcclz once; NULL if it cannot be loaded, lacks a function or has another major.minor
// version than cclz.h here (the first call prints why).
const CclzApi* cclzApi();

}  // namespace cclz::interpose
