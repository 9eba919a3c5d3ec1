#include "stats.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "log.h"
#include "settings.h"

namespace cclz::interpose {
namespace {

constexpr int kOps = static_cast<int>(Op::Count);
constexpr int kReasons = static_cast<int>(Reason::Count);
constexpr int kOutcomes = 3;

struct Counts {
  std::atomic<uint64_t> forwarded[kOps][kReasons] = {};
  std::atomic<uint64_t> outcomes[kOps][kOutcomes] = {};
};

// Never destroyed: cclz's threads and other exit handlers may still run.
Counts& counts() {
  static Counts* c = new Counts;
  return *c;
}

void report() {
  static const char* const outcomeNames[kOutcomes] = {"compressed", "plain", "failed"};
  Counts& c = counts();
  for (int op = 0; op < kOps; ++op) {
    std::string line = std::string("op=") + opName(static_cast<Op>(op));
    std::string reasons;
    uint64_t total = 0, forwarded = 0;
    for (int o = 0; o < kOutcomes; ++o) {
      const uint64_t n = c.outcomes[op][o].load();
      line += std::string(" ") + outcomeNames[o] + "=" + std::to_string(n);
      total += n;
    }
    for (int r = 0; r < kReasons; ++r) {
      const uint64_t n = c.forwarded[op][r].load();
      if (n == 0) continue;
      forwarded += n;
      reasons += std::string(" ") + reasonName(static_cast<Reason>(r)) + "=" + std::to_string(n);
    }
    if (total + forwarded == 0) continue;
    info("%s forwarded=%llu%s", line.c_str(), static_cast<unsigned long long>(forwarded),
         reasons.c_str());
  }
}

bool enable() {
  if (!Settings::get().debug) return false;
  counts();
  std::atexit(report);
  return true;
}

}  // namespace

bool statsEnabled() {
  static const bool enabled = enable();
  return enabled;
}

void countForwarded(Op op, Reason reason) {
  if (!statsEnabled() || reason == Reason::Internal) return;
  counts().forwarded[static_cast<int>(op)][static_cast<int>(reason)].fetch_add(
      1, std::memory_order_relaxed);
}

void countOutcome(Op op, Outcome outcome) {
  if (!statsEnabled()) return;
  counts().outcomes[static_cast<int>(op)][static_cast<int>(outcome)].fetch_add(
      1, std::memory_order_relaxed);
}

}  // namespace cclz::interpose
