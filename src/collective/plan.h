// What the two halves of a collective call share (internal). plan.cpp validates the call,
// checks it against the peers' and runs its data part; adaptive_path.cpp chooses, on an adaptive
// communicator, whether that data part goes through the codec or as plain data, and times the
// trials.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "collective/collectives.h"
#include "collective/engine.h"
#include "collective/pipeline.h"
#include "tune/tuner.h"

namespace cclz {

// Everything validation learns about a call.
struct Plan {
  CodecUse use{};
  uint64_t elemBytes = 0;
  uint64_t pieceElems = 1;
  uint64_t sendElems = 0;  // elements of the send buffer
  uint64_t recvElems = 0;  // elements of the receive buffer
  std::vector<Span> chunks;  // per rank (see pipeline.h)
};

// Validates a call (what this rank can tell alone) and plans it. Throws cclz::Error.
Plan makePlan(Communicator& comm, const CollArgs& a);

// The codec none's configuration: what a plain call runs with.
cclzCodecConfig_t noneConfig();

// The ranks a call exchanges with: its peer for send/recv, else every other rank.
std::vector<int> peersOf(const CollArgs& a, int n, int me);

// Sends `d` bytes at `mine` to `peers` and receives theirs over the control channel (a device
// communicator's control mesh, else the host transport itself); returns n blocks of d bytes, by
// rank (this rank's and its peers' filled).
std::vector<uint8_t> exchangeWithPeers(Communicator& comm, const void* mine, uint64_t d,
                                       const std::vector<int>& peers);

// Whether `mine` is true on every rank: one exchange of a word with every other rank, so a
// collective (every rank asks at the same point of its calls). Every rank gets the same answer.
bool everyRankCan(Communicator& comm, bool mine);

// The call check: this rank's descriptor against its peers' (a 64-byte exchange). Returns the
// verdict ("" when the call agrees everywhere).
std::string checkWithPeers(Communicator& comm, const CallDescriptor& mine,
                           const std::vector<int>& peers);

// The network's own collective for plain data; false where the transport has none for the call.
bool runNative(Transport& t, const CollArgs& a, const Plan& plan, cclzStream_t stream);

// The pipeline (pipeline.h) for the call, inside an engine begin/end.
void runPlan(Communicator& comm, const CollArgs& a, const Plan& plan, uint64_t stride);

// The bytes of one frame slot.
uint64_t frameStride(const Plan& plan);

// The scratch of a call's data part, per engine area.
void dataBytes(const CollArgs& a, const Plan& plan, int n, int me, MemoryKind memory,
               uint64_t stride, uint64_t* bytes);

// The data part of a checked call: the network's own collective (codec none) or the pipeline
// (startEvent: plan.cpp).
void runData(Communicator& comm, const CollArgs& a, const Plan& plan, uint64_t stride,
             void* startEvent);

// adaptive_path.cpp: the data part on the caller's thread, through the codec or as plain data
// (the tuner's choice on an adaptive communicator), timed when it is one of the trials.
void runChosenPath(Communicator& comm, const CollArgs& a, const Plan& plan);

// The names of a tuned call and of its two paths, for traces.
struct TunedNames {
  const char* what;
  const char* first;   // Path::Compressed
  const char* second;  // Path::Plain
  const char* of(Path p) const { return p == Path::Plain ? second : first; }
};

// adaptive_path.cpp: a call of `key` that an adaptive communicator may run in either of two
// ways of doing the same work, among all its ranks (the overlapped GEMMs: Path::Compressed is
// the call as asked, Path::Plain its serial form; overlap_call.cpp). The tuner's next call of
// the key with `trialPairs` pairs of trials (Tuner::next; settled first where its trials are
// over; its settled path, else Path::Compressed, while `stream` is being captured), run(path)
// aligned and timed where it is a trial. Returns the tuner's call.
Tuner::Call runTuned(Communicator& comm, const TuneKey& key, int trialPairs, cclzStream_t stream,
                     const TunedNames& names, const std::function<void(Path)>& run);

}  // namespace cclz
