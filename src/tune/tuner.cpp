#include "tune/tuner.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "common/error.h"

namespace cclz {

uint32_t Tuner::sizeClass(uint64_t bytes) { return static_cast<uint32_t>(std::bit_width(bytes)); }

Tuner::Call Tuner::next(const TuneKey& key, int trialPairs) {
  CCLZ_REQUIRE(trialPairs >= 2, cclzInternalError, "tuner: fewer than two pairs of trials");
  Call settled;
  if (nextSettled(key, &settled)) return settled;
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    if (entries_.size() >= kMaxKeys) return Call{Path::Compressed, false, false, true};
    it = entries_.emplace(key, Entry{}).first;
    it->second.pairs = trialPairs;
  }
  Entry& e = it->second;
  if (e.decided) e = Entry{e.pairs};  // its settled calls are over: on trial again, from the start
  if (e.calls == 2 * e.pairs) return Call{Path::Compressed, false, true, false};
  const int i = e.calls++;
  return Call{i % 2 == 0 ? Path::Compressed : Path::Plain, i >= 2, false, false};
}

bool Tuner::nextSettled(const TuneKey& key, Call* call) {
  auto it = entries_.find(key);
  if (it == entries_.end() || !it->second.decided || it->second.settledCalls >= kRetrialCalls)
    return false;
  ++it->second.settledCalls;
  *call = Call{it->second.path, false, false, true};
  return true;
}

Path Tuner::settledOr(const TuneKey& key) const {
  auto it = entries_.find(key);
  return it != entries_.end() && it->second.decided ? it->second.path : Path::Compressed;
}

void Tuner::record(const TuneKey& key, Path path, std::unique_ptr<Stopwatch> watch) {
  auto it = entries_.find(key);
  CCLZ_REQUIRE(it != entries_.end() && !it->second.decided, cclzInternalError,
               "tuner: a trial recorded for a key that is not on trial");
  it->second.trials.emplace_back(path, std::move(watch));
}

TrialTimes Tuner::measured(const TuneKey& key) {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  TrialTimes t{kNone, kNone};
  auto it = entries_.find(key);
  if (it == entries_.end()) return t;
  for (auto& [path, watch] : it->second.trials) {
    double& best = path == Path::Compressed ? t.compressed : t.plain;
    best = std::min(best, watch->seconds());
  }
  return t;
}

Path Tuner::verdict(const std::vector<TrialTimes>& ranks) {
  // The slowest rank's time per path; a time that is not a number counts as never measured.
  auto slowest = [](double sofar, double t) {
    return std::isnan(t) ? std::numeric_limits<double>::infinity() : std::max(sofar, t);
  };
  double compressed = 0, plain = 0;
  for (const TrialTimes& r : ranks) {
    compressed = slowest(compressed, r.compressed);
    plain = slowest(plain, r.plain);
  }
  // A path never measured (infinite) loses.
  return compressed < plain * (1.0 - kMargin) ? Path::Compressed : Path::Plain;
}

void Tuner::settle(const TuneKey& key, const std::vector<TrialTimes>& ranks) {
  auto it = entries_.find(key);
  CCLZ_REQUIRE(it != entries_.end(), cclzInternalError, "tuner: settling a key never tried");
  Entry& e = it->second;
  e.path = verdict(ranks);
  e.decided = true;
  e.trials.clear();
}

}  // namespace cclz
