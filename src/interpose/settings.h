// The interposer's environment (docs/env.md): read once per process, at its first NCCL call.
#pragma once

#include <string>

namespace cclz::interpose {

struct Settings {
  bool enabled = true;  // CCLZ_INTERPOSE: 1 (the default), or 0: every call goes to NCCL as it is
  bool reduce = false;  // CCLZ_INTERPOSE_REDUCE=1: all-reduce and reduce-scatter through cclz too
  bool force = false;   // CCLZ_INTERPOSE_FORCE=1: the drop-in's cclz communicators not adaptive
  bool debug = false;   // CCLZ_INTERPOSE_DEBUG=1: per-op counts of the calls' paths at exit
  std::string error;    // a value it does not know: then enabled is false, and this says why

  // getenv is a parameter so that the tests can pass their own environment.
  static Settings parse(const char* (*getenv)(const char*));
  // This process's settings (parse(std::getenv), once).
  static const Settings& get();
};

}  // namespace cclz::interpose
