#include "settings.h"

#include <cstdlib>
#include <cstring>

namespace cclz::interpose {
namespace {

// A 0/1 switch; an unset or empty variable keeps the default. A value it does not know is an
// error, never a guess (docs/env.md): the caller then turns the interposer off.
bool flag(const char* (*getenv)(const char*), const char* name, bool fallback, std::string* error) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  if (std::strcmp(v, "1") == 0) return true;
  if (std::strcmp(v, "0") == 0) return false;
  if (error->empty())
    *error = std::string(name) + "=" + v + " is neither 0 nor 1: every NCCL call goes to NCCL";
  return fallback;
}

const char* processGetenv(const char* name) { return std::getenv(name); }

}  // namespace

Settings Settings::parse(const char* (*getenv)(const char*)) {
  Settings s;
  s.enabled = flag(getenv, "CCLZ_INTERPOSE", true, &s.error);
  s.reduce = flag(getenv, "CCLZ_INTERPOSE_REDUCE", false, &s.error);
  s.force = flag(getenv, "CCLZ_INTERPOSE_FORCE", false, &s.error);
  s.debug = flag(getenv, "CCLZ_INTERPOSE_DEBUG", false, &s.error);
  if (!s.error.empty()) s.enabled = false;
  return s;
}

const Settings& Settings::get() {
  static const Settings settings = parse(processGetenv);
  return settings;
}

}  // namespace cclz::interpose
