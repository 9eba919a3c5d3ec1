#include "collective/descriptor.h"

#include <cstring>

#include "common/dtype.h"

namespace cclz {
namespace {

void mix(uint64_t& h, int64_t v) {
  for (int i = 0; i < 8; ++i) h = (h ^ static_cast<uint8_t>(v >> (8 * i))) * 1099511628211ull;
}

const char* codecName(int codec) {
  switch (codec) {
    case cclzCodecNone:
      return "none";
    case cclzCodecLossless:
      return "lossless";
    case cclzCodecFp8:
      return "fp8";
    case cclzCodecQgrad:
      return "qgrad";
    default:
      return "unknown";
  }
}

// The descriptor stores op + 1, so that 0 means "does not reduce".
std::string redOpName(int stored) {
  return stored == cclzSum + 1 ? "sum" : stored == cclzAvg + 1 ? "avg" : "none";
}

// The first field in which b differs from a, as "field: A at rank x, B at rank y", or "".
std::string firstDifference(const CallDescriptor& a, int ra, const CallDescriptor& b, int rb,
                            bool compareOp) {
  auto at = [&](const std::string& field, const std::string& va, const std::string& vb) {
    return field + " differs: " + va + " on rank " + std::to_string(ra) + ", " + vb +
           " on rank " + std::to_string(rb);
  };
  if (a.magic != b.magic || a.version != b.version)
    return at("cclz version", std::to_string(a.version), std::to_string(b.version));
  if (compareOp && a.op != b.op)
    return at("collective", collOpName(static_cast<CollOp>(a.op)),
              collOpName(static_cast<CollOp>(b.op)));
  if (a.ranks != b.ranks)
    return at("communicator size", std::to_string(a.ranks), std::to_string(b.ranks));
  if (a.memory != b.memory) return at("transport memory", "host/device", "device/host");
  if (a.count != b.count) return at("count", std::to_string(a.count), std::to_string(b.count));
  if (a.dtype != b.dtype)
    return at("dtype", dtypeName(static_cast<cclzDataType_t>(a.dtype)),
              dtypeName(static_cast<cclzDataType_t>(b.dtype)));
  if (a.redOp != b.redOp) return at("reduction", redOpName(a.redOp), redOpName(b.redOp));
  if (a.codec != b.codec) return at("codec", codecName(a.codec), codecName(b.codec));
  if (a.configHash != b.configHash)
    return at("codec configuration (cclzCodecConfig_t fields)", "one", "another");
  if (a.feedback != b.feedback)
    return at("error feedback", a.feedback ? "on" : "off", b.feedback ? "on" : "off");
  if (a.gemmCols != b.gemmCols || a.gemmInner != b.gemmInner || a.gemmTransB != b.gemmTransB)
    return at("matrix shape (n, k, transB)",
              std::to_string(a.gemmCols) + ", " + std::to_string(a.gemmInner) + ", " +
                  std::to_string(a.gemmTransB),
              std::to_string(b.gemmCols) + ", " + std::to_string(b.gemmInner) + ", " +
                  std::to_string(b.gemmTransB));
  if (a.pieceElems != b.pieceElems)
    return at("pipeline piece (CCLZ_PIECE_BYTES)", std::to_string(a.pieceElems),
              std::to_string(b.pieceElems));
  return {};
}

}  // namespace

const char* collOpName(CollOp op) {
  switch (op) {
    case CollOp::AllGather:
      return "all-gather";
    case CollOp::ReduceScatter:
      return "reduce-scatter";
    case CollOp::AllReduce:
      return "all-reduce";
    case CollOp::AllToAll:
      return "all-to-all";
    case CollOp::Send:
      return "send";
    case CollOp::Recv:
      return "recv";
    case CollOp::AllGatherMatmul:
      return "all-gather + matmul";
    case CollOp::MatmulReduceScatter:
      return "matmul + reduce-scatter";
  }
  return "unknown";
}

uint64_t configHash(const cclzCodecConfig_t& c) {
  // Every call's descriptor carries it, and a thread's calls mostly repeat one configuration:
  // the last one's hash is kept (the whole struct compared, so a new seed hashes again, alike).
  thread_local cclzCodecConfig_t last{};
  thread_local uint64_t lastHash = 0;
  thread_local bool hashed = false;
  if (hashed && std::memcmp(&last, &c, sizeof c) == 0) return lastHash;
  uint64_t h = 14695981039346656037ull;
  for (int64_t v : {int64_t{c.codec}, int64_t{c.chunkElems}, int64_t{c.bits},
                    int64_t{c.blockElems}, int64_t{c.rounding}, int64_t{c.fp8Format},
                    int64_t{c.fp8RowElems}, int64_t{c.fp8HadamardSize}, int64_t{c.fp8Rotation},
                    int64_t{c.fp8RotateThreshold}, int64_t{c.fp8ScaleCandidates}})
    mix(h, v);
  last = c, lastHash = h, hashed = true;
  return h;
}

std::string compareDescriptors(const std::vector<CallDescriptor>& all,
                               const std::vector<int>& ranks) {
  for (int r : ranks)
    if (all[r].magic != kDescriptorMagic)
      return "rank " + std::to_string(r) + " sent no valid call descriptor (a different cclz?)";
  for (int r : ranks)
    if (all[r].rejected)
      return "rank " + std::to_string(r) + " rejected its arguments (its own error says why)";
  const int first = ranks[0];
  const CallDescriptor& a = all[first];
  const bool pointToPoint = a.op == static_cast<uint8_t>(CollOp::Send) ||
                            a.op == static_cast<uint8_t>(CollOp::Recv);
  if (!pointToPoint) {
    for (int r : ranks) {
      const std::string d = firstDifference(a, first, all[r], r, true);
      if (!d.empty()) return d;
    }
    return {};
  }
  // Send/recv: one side sends, the other receives, each naming the other.
  const int other = ranks[1];
  const CallDescriptor& b = all[other];
  const bool paired = (a.op == static_cast<uint8_t>(CollOp::Send) &&
                       b.op == static_cast<uint8_t>(CollOp::Recv)) ||
                      (a.op == static_cast<uint8_t>(CollOp::Recv) &&
                       b.op == static_cast<uint8_t>(CollOp::Send));
  if (!paired)
    return "rank " + std::to_string(first) + " called " +
           collOpName(static_cast<CollOp>(a.op)) + " and rank " + std::to_string(other) + " " +
           collOpName(static_cast<CollOp>(b.op)) + ": a send must meet a recv";
  if (a.peer != other || b.peer != first)
    return "rank " + std::to_string(first) + " names peer " + std::to_string(a.peer) +
           " and rank " + std::to_string(other) + " names peer " + std::to_string(b.peer);
  return firstDifference(a, first, b, other, false);
}

}  // namespace cclz
