#include "codec/lossless/kernel_path.h"

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace cclz::lossless::v2 {

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

bool parseWindowLoop(const char* value) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "on") return true;
  if (v == "off") return false;
  CCLZ_FAIL(cclzInvalidArgument, "CCLZ_LOSSLESS_WINDOW=" + v +
                                     ": expected on (default: the staged decoder's pair-window "
                                     "loop) or off (its lane loop)");
}

bool windowLoopFromEnvironment() {
  static const bool window = parseWindowLoop(std::getenv("CCLZ_LOSSLESS_WINDOW"));
  return window;
}

int parseEncodeWarps(const char* value) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "auto") return 0;
  if (v == "1") return 1;
  if (v == "2") return 2;
  if (v == "4") return 4;
  CCLZ_FAIL(cclzInvalidArgument, "CCLZ_LOSSLESS_ENCODE_WARPS=" + v +
                                     ": expected auto (the default), 1 (one warp per chunk in the "
                                     "staged encoder), 2 or 4");
}

int encodeWarpsFromEnvironment() {
  static const int warps = parseEncodeWarps(std::getenv("CCLZ_LOSSLESS_ENCODE_WARPS"));
  return warps;
}

}  // namespace cclz::lossless::v2
