#include "codec/launch_env.h"

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace cclz {

bool parseProgrammaticLaunch(const char* value) {
  const std::string v = value ? value : "";
  if (v.empty() || v == "1") return true;
  if (v == "0") return false;
  CCLZ_FAIL(cclzInvalidArgument, "CCLZ_PDL=" + v + ": expected 1 (default) or 0");
}

bool programmaticLaunchFromEnvironment() {
  // A static whose initializer throws is initialized again on the next call, so a bad value
  // fails every call, not only the first.
  static const bool enabled = parseProgrammaticLaunch(std::getenv("CCLZ_PDL"));
  return enabled;
}

}  // namespace cclz
