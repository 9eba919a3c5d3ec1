#include "codec/lossless/kernel_path.h"

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace cclz::lossless::v2 {

KernelPath parseKernelPath(const char* value) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "general") return KernelPath::General;
  if (v == "staged") return KernelPath::Staged;
  if (v == "auto") return KernelPath::Auto;
  CCLZ_FAIL(cclzInvalidArgument, "CCLZ_LOSSLESS_PATH=" + v +
                                     ": expected general (default), staged or auto "
                                     "(staged for small messages)");
}

KernelPath kernelPathFromEnvironment() {
  // A static whose initializer throws is initialized again on the next call, so a bad value
  // fails every call, not only the first.
  static const KernelPath path = parseKernelPath(std::getenv("CCLZ_LOSSLESS_PATH"));
  return path;
}

}  // namespace cclz::lossless::v2
