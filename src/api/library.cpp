// Library-wide entry points: version, result names, last error, build information.
#include <cstring>
#include <string>

#include "api/guard.h"
#include "collective/communicator.h"
#include "common/error.h"

#ifdef CCLZ_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cclz {
namespace {
thread_local std::string lastError;
}  // namespace

void setLastError(const std::string& message) { lastError = message; }
void clearLastError() { lastError.clear(); }

}  // namespace cclz

extern "C" {

cclzResult_t cclzGetVersion(int* version) {
  return cclz::guarded(__func__, [&] {
    CCLZ_REQUIRE(version, cclzInvalidArgument, "version is NULL");
    *version = CCLZ_VERSION_CODE;
  });
}

const char* cclzGetErrorString(cclzResult_t result) {
  switch (result) {
    case cclzSuccess:
      return "no error";
    case cclzUnhandledCudaError:
      return "unhandled CUDA error";
    case cclzSystemError:
      return "system error";
    case cclzInternalError:
      return "internal error (please report)";
    case cclzInvalidArgument:
      return "invalid argument";
    case cclzInvalidUsage:
      return "invalid usage";
    case cclzCorruptFrame:
      return "corrupt or mismatched frame";
    case cclzNotSupported:
      return "not supported";
    case cclzBufferTooSmall:
      return "buffer too small";
    default:
      return "unknown result code";
  }
}

const char* cclzGetLastError(cclzComm_t comm) {
  if (comm && comm->impl) return comm->impl->lastError();
  return cclz::lastError.c_str();
}

cclzResult_t cclzGetBuildInfo(cclzBuildInfo_t* info) {
  return cclz::guarded(__func__, [&] {
    CCLZ_REQUIRE(info, cclzInvalidArgument, "info is NULL");
    CCLZ_REQUIRE(info->size == sizeof(cclzBuildInfo_t), cclzInvalidArgument,
                 "info->size must be sizeof(cclzBuildInfo_t)");
    std::memset(reinterpret_cast<char*>(info) + sizeof(size_t), 0,
                sizeof(cclzBuildInfo_t) - sizeof(size_t));
    info->version = CCLZ_VERSION_CODE;
#ifdef CCLZ_HAVE_CUDA
    info->hasCuda = 1;
    info->cudaRuntimeVersion = CUDART_VERSION;
    std::strncpy(info->cudaArchs, CCLZ_CUDA_ARCHS_STRING, sizeof(info->cudaArchs) - 1);
#endif
#ifdef CCLZ_HAVE_NCCL
    info->hasNccl = 1;
#endif
#ifdef CCLZ_HAVE_MPI
    info->hasMpi = 1;
#endif
#if defined(__clang__)
    std::strncpy(info->compiler, "clang " __clang_version__, sizeof(info->compiler) - 1);
#elif defined(__GNUC__)
    std::strncpy(info->compiler, "gcc " __VERSION__, sizeof(info->compiler) - 1);
#endif
  });
}

}  // extern "C"
