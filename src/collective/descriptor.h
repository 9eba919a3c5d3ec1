// The 64-byte descriptor every rank sends its peers before a collective's data (docs/
// collectives.md, "Checking the call"): what each rank was asked to do. Ranks compare all
// descriptors and reach the same verdict, so a rank passing a different codec, count or dtype
// than its peers makes the call fail on every rank instead of hanging or exchanging garbage.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cclz/cclz.h"

namespace cclz {

enum class CollOp : uint8_t {
  AllGather = 1,
  ReduceScatter,
  AllReduce,
  AllToAll,
  Send,
  Recv,
  AllGatherMatmul,      // src/overlap
  MatmulReduceScatter,  // src/overlap
};
const char* collOpName(CollOp op);

struct CallDescriptor {
  uint32_t magic;      // kDescriptorMagic
  uint8_t version;     // kDescriptorVersion
  uint8_t op;          // CollOp
  uint8_t dtype;       // cclzDataType_t
  uint8_t redOp;       // cclzRedOp_t + 1; 0 where the op does not reduce
  uint8_t codec;       // cclzCodecType_t
  uint8_t feedback;    // 1 with error feedback
  uint8_t rejected;    // 1: this rank rejected its own arguments (it reports why)
  uint8_t memory;      // MemoryKind of the transport
  int32_t peer;        // send: the destination; recv: the source; collectives: -1
  int32_t ranks;       // the communicator's size as this rank sees it
  uint64_t count;      // as passed (per rank for all-gather/reduce-scatter/all-to-all)
  uint64_t pieceElems; // the pipeline's piece size
  uint64_t configHash; // the codec configuration's fields that must agree (configHash())
  uint64_t gemmCols;   // the overlapped GEMMs' n; 0 for the collectives
  uint32_t gemmInner;  // their k
  uint32_t gemmTransB; // their transB (0 or 1)
};
static_assert(sizeof(CallDescriptor) == 64, "the descriptor is 64 bytes");

constexpr uint32_t kDescriptorMagic = 0x44435a43u;  // "CZCD"
constexpr uint8_t kDescriptorVersion = 1;

// FNV-1a over the configuration fields that sender and receiver must share. The qgrad rounding
// seed is left out: ranks may draw independent rounding noise.
uint64_t configHash(const cclzCodecConfig_t& config);

// The verdict on the descriptors of `ranks` (index = rank; for send/recv the two peers). Returns
// an empty string when they agree, else a message naming the field and the ranks; every rank that
// sees the same descriptors gets the same message.
std::string compareDescriptors(const std::vector<CallDescriptor>& all,
                               const std::vector<int>& ranks);

}  // namespace cclz
