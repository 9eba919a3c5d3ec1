// The adaptive choice of path (docs/collectives.md, "Adaptive calls"): whether a compressed
// collective runs through its codec or as plain data (the network's own collective), measured on
// the communicator's first calls and agreed by every rank, so that compression is used where it
// pays and does not make a collective slower where it does not.
//
// Calls are grouped by a key (op, peer, dtype, codec and its configuration, the size rounded to
// its octave). The first 2 * trialPairsFor(key) calls of a key alternate the two paths,
// compressed first; the first pair warms up (scratch growth, the transport's first connections)
// and the others are timed. The call after them settles the key: every rank's fastest time per path
// is exchanged, and the key keeps the path that is faster on the slowest rank, compressed only when
// it is faster by more than kMargin (plain data is exact, and costs nothing to encode). After
// kRetrialCalls calls on its path a key is tried again the same way, so that a verdict that trial
// noise or a passing load got wrong (a training step's first calls, peers still arriving) does not
// stay for the whole run, and a network that changes is followed. Every rank
// makes the same calls in the same order, so every rank schedules and settles alike; this class
// holds the schedule and the verdict, the caller (collective/adaptive_path.cpp) runs, times and
// exchanges.
#pragma once

#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "tune/stopwatch.h"

namespace cclz {

enum class Path : uint8_t { Compressed, Plain };

struct TuneKey {
  uint8_t op = 0;      // CollOp
  uint8_t dtype = 0;   // cclzDataType_t
  uint8_t codec = 0;   // cclzCodecType_t
  int32_t peer = -1;   // send, recv: the other rank (each pair has its own schedule)
  uint64_t configHash = 0;
  uint32_t sizeClass = 0;  // bit width of the call's bytes per rank: one octave per class
  bool feedback = false;   // a call with error feedback
  auto operator<=>(const TuneKey&) const = default;
};

// One rank's fastest measured time per path over a key's timed trials, in seconds; what the ranks
// exchange to settle it (16 bytes).
struct TrialTimes {
  double compressed = 0;
  double plain = 0;
};

class Tuner {
 public:
  static constexpr int kTrialPairs = 3;
  // Kinds of calls below 2 MiB a rank (size class 21 and under) take more pairs. One call's time
  // varies most against what the verdict weighs where calls are short, and there trials cost
  // least: over NCCL's socket transport, after two timed trials a path, a 4 KiB reduce-scatter
  // settled on its codec in one of four runs and then ran at 0.64x of plain data
  // (bench/results/collectives-socket-shared-h200). The verdict keeps each path's fastest trial,
  // so five timed trials a path make it unlikely that every plain trial of a rank was slowed.
  static constexpr int kSmallKindTrialPairs = 6;
  static constexpr uint32_t kLargestSmallKindClass = 21;
  static constexpr double kMargin = 0.03;
  // Calls of a key on its settled path before it is tried again: its trials then cost under 0.5%
  // of its calls (at most kSmallKindTrialPairs calls on the slower path, one settling exchange).
  static constexpr int kRetrialCalls = 2048;
  // Keys beyond this many run compressed, untried (so the table stays small when sizes vary).
  static constexpr size_t kMaxKeys = 1024;

  // The pairs of trials a collective's key takes (its size class decides).
  static int trialPairsFor(const TuneKey& key) {
    return key.sizeClass <= kLargestSmallKindClass ? kSmallKindTrialPairs : kTrialPairs;
  }

  struct Call {
    Path path = Path::Compressed;
    bool timed = false;     // a trial to time: pass its stopwatch to record()
    bool settling = false;  // trials are over: settle() first (a collective exchange), then next()
    bool decided = false;   // the key's path is settled
  };

  // What the next call of `key` does. A call with settling set does not count: after settle() the
  // same call asks again. The call after kRetrialCalls settled ones starts the key's trials anew.
  // trialPairs (at least 2: the first pair is not timed): the key's pairs of trials, taken at
  // its first call (every rank passes the same for a key).
  Call next(const TuneKey& key, int trialPairs = kTrialPairs);
  // next() for a key that is settled and not yet due to be tried again (the steady state):
  // then true, with *call filled and the call counted; else false, and nothing changes. It asks
  // nothing else, so the caller can skip what only a trial needs (a capture query).
  bool nextSettled(const TuneKey& key, Call* call);
  // What a call of `key` that must not count as a trial runs (one being captured into a CUDA
  // graph, whose timing events could not be read): the settled path, else compressed.
  Path settledOr(const TuneKey& key) const;
  // A timed trial's stopwatch (started and stopped around the call).
  void record(const TuneKey& key, Path path, std::unique_ptr<Stopwatch> watch);
  // This rank's fastest time per path over key's timed trials (waits for their stopwatches).
  TrialTimes measured(const TuneKey& key);
  // Settles `key` from every rank's measured() (the same vector, in rank order, on every rank).
  void settle(const TuneKey& key, const std::vector<TrialTimes>& ranks);

  // The verdict on the ranks' times: compressed when its slowest rank beats plain's slowest by
  // more than kMargin.
  static Path verdict(const std::vector<TrialTimes>& ranks);
  static uint32_t sizeClass(uint64_t bytes);

 private:
  struct Entry {
    int pairs = kTrialPairs;  // the key's pairs of trials
    int calls = 0;            // calls scheduled so far in the key's trials
    bool decided = false;
    int settledCalls = 0;  // calls on the settled path since the key was settled
    Path path = Path::Compressed;
    std::vector<std::pair<Path, std::unique_ptr<Stopwatch>>> trials;
  };
  std::map<TuneKey, Entry> entries_;
};

}  // namespace cclz
