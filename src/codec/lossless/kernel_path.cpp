#include "codec/lossless/kernel_path.h"

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace cclz::lossless {

KernelPath parseKernelPath(const char* value) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "auto") return KernelPath::Auto;
  if (v == "general") return KernelPath::General;
  if (v == "staged") return KernelPath::Staged;
  CCLZ_FAIL(cclzInvalidArgument, "CCLZ_LOSSLESS_PATH=" + v +
                                     ": expected auto (default: staged for small messages), "
                                     "general or staged");
}

KernelPath kernelPathFromEnvironment() {
  // A static whose initializer throws is initialized again on the next call, so a bad value
  // fails every call, not only the first.
  static const KernelPath path = parseKernelPath(std::getenv("CCLZ_LOSSLESS_PATH"));
  return path;
}

int parseEncodeWarps(const char* value) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "auto") return 0;
  if (v == "2") return 2;
  if (v == "4") return 4;
  CCLZ_FAIL(cclzInvalidArgument, "CCLZ_LOSSLESS_ENCODE_WARPS=" + v +
                                     ": expected auto (the default), 2 or 4 (warps per chunk in "
                                     "the staged encoder)");
}

int encodeWarpsFromEnvironment() {
  static const int warps = parseEncodeWarps(std::getenv("CCLZ_LOSSLESS_ENCODE_WARPS"));
  return warps;
}

}  // namespace cclz::lossless
