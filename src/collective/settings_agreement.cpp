// The exchange every communicator makes at creation: each rank's library version, the settings
// that every rank must share, and its node key (node_layout.h). A setting that differs across
// ranks (a CCLZ_* variable set in one rank's environment only, or a different cclzCommConfig_t)
// would make the ranks run different protocols and wait for each other forever; here every rank
// sees every rank's record and fails alike, naming the setting and the ranks.
#include <cstring>
#include <string>
#include <vector>

#include "collective/communicator.h"
#include "collective/deferred_checks.h"
#include "collective/plan.h"
#include "common/error.h"
#include "common/trace.h"

namespace cclz {
namespace {

// One rank's record as it travels (host byte order: the ranks share an architecture).
struct SharedSettings {
  uint32_t magic;
  uint32_t version;      // CCLZ_VERSION_CODE of the library this rank loaded
  uint64_t nodeKey;
  uint64_t pieceBytes;   // CCLZ_PIECE_BYTES (frames must cut at the same places)
  uint8_t checkCalls;    // CCLZ_CHECK_CALLS (which calls exchange descriptors)
  uint8_t async;         // cclzCommConfig_t.asyncCalls (whether checks run on a thread)
  uint8_t adaptive;      // the adaptive trials run on every rank or on none
  uint8_t transportFrames;     // CCLZ_NCCL_WINDOWS: window registration is collective
  uint8_t fused;               // CCLZ_FUSED (0, 1, 2 for ce, 3 for direct): made collectively
  uint8_t overlapMergedGather; // CCLZ_OVERLAP_GATHER: the transfers' order
  uint8_t overlapCopy;         // CCLZ_OVERLAP_COPY: NCCL transfers, copies with flags, either
  uint8_t twoLevel;            // CCLZ_TWO_LEVEL: which ranks exchange with which
};
static_assert(sizeof(SharedSettings) <= CheckExchange::kBlockBytes,
              "the record travels in one control block");

constexpr uint32_t kSettingsMagic = 0x53435a43u;  // "CZCS"

SharedSettings recordOf(const CommSettings& s) {
  SharedSettings r;
  std::memset(&r, 0, sizeof r);
  r.magic = kSettingsMagic;
  r.version = CCLZ_VERSION_CODE;
  r.nodeKey = nodeKey(s.nodeName);
  r.pieceBytes = s.pieceBytes;
  r.checkCalls = static_cast<uint8_t>(s.checkCalls);
  r.async = s.async;
  r.adaptive = s.adaptive;
  r.transportFrames = s.transportFrames;
  r.fused = s.fused ? (s.fusedCopyEngines ? 2 : s.fusedDirect ? 3 : 1) : 0;
  r.overlapMergedGather = s.overlapMergedGather;
  r.overlapCopy = static_cast<uint8_t>(s.overlapCopy);
  r.twoLevel = s.twoLevel;
  return r;
}

struct Field {
  const char* name;
  uint64_t (*value)(const SharedSettings&);
};

// Every field but the node key, named as a user sets it.
const Field kFields[] = {
    {"the cclz library version", [](const SharedSettings& r) -> uint64_t { return r.version; }},
    {"CCLZ_PIECE_BYTES", [](const SharedSettings& r) -> uint64_t { return r.pieceBytes; }},
    {"CCLZ_CHECK_CALLS (0 every call, 1 first, 2 deferred)",
     [](const SharedSettings& r) -> uint64_t { return r.checkCalls; }},
    {"asyncCalls of cclzCommConfig_t", [](const SharedSettings& r) -> uint64_t { return r.async; }},
    {"adaptive (cclzCommConfig_t.adaptive, else CCLZ_ADAPTIVE)",
     [](const SharedSettings& r) -> uint64_t { return r.adaptive; }},
    {"CCLZ_NCCL_WINDOWS", [](const SharedSettings& r) -> uint64_t { return r.transportFrames; }},
    {"CCLZ_FUSED (0, 1, 2 ce, 3 direct)",
     [](const SharedSettings& r) -> uint64_t { return r.fused; }},
    {"CCLZ_OVERLAP_GATHER (0 ring, 1 merged)",
     [](const SharedSettings& r) -> uint64_t { return r.overlapMergedGather; }},
    {"CCLZ_OVERLAP_COPY (0 nccl, 1 ce, 2 auto)",
     [](const SharedSettings& r) -> uint64_t { return r.overlapCopy; }},
    {"CCLZ_TWO_LEVEL", [](const SharedSettings& r) -> uint64_t { return r.twoLevel; }},
};

}  // namespace

void Communicator::agreeWithPeers() {
  const int n = transport_->size(), me = transport_->rank();
  const SharedSettings mine = recordOf(settings_);
  std::vector<int> peers;
  for (int r = 0; r < n; ++r)
    if (r != me) peers.push_back(r);
  // On this thread whatever the settings: a rank whose checks would run on a thread and one
  // whose would not still post and take this first block alike. A host transport without a
  // control mesh moves it itself.
  const std::vector<uint8_t> bytes = transport_->controlMesh()
                                         ? exchangeOnCaller(&mine, sizeof mine, peers)
                                         : exchangeWithPeers(*this, &mine, sizeof mine, peers);
  std::vector<SharedSettings> all(n);
  std::vector<uint64_t> keys(n);
  for (int r = 0; r < n; ++r) {
    std::memcpy(&all[r], bytes.data() + r * sizeof mine, sizeof mine);
    CCLZ_REQUIRE(all[r].magic == kSettingsMagic, cclzInvalidUsage,
                 "rank " + std::to_string(r) +
                     "'s first control block is not its settings: is it another program, or "
                     "another version of cclz?");
    keys[r] = all[r].nodeKey;
  }
  for (const Field& f : kFields) {
    const uint64_t here = f.value(mine);
    for (int r = 0; r < n; ++r) {
      const uint64_t there = f.value(all[r]);
      CCLZ_REQUIRE(there == here, cclzInvalidUsage,
                   std::string(f.name) + " differs across ranks: " + std::to_string(here) +
                       " on rank " + std::to_string(me) + ", " + std::to_string(there) +
                       " on rank " + std::to_string(r) +
                       " (every rank must be given the same settings)");
    }
  }
  nodes_ = nodeLayoutFromKeys(keys);
  if (settings_.twoLevel)
    CCLZ_TRACE("two-level calls: %d nodes of %d ranks%s", nodes_.nodes, nodes_.perNode,
               nodes_.twoLevel() ? ""
                                 : " (not used: they need 2 or more nodes of 2 or more ranks, "
                                   "the same number on each)");
}

}  // namespace cclz
