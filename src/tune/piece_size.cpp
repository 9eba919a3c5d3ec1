#include "tune/piece_size.h"

#include <algorithm>

namespace cclz {

uint64_t defaultPieceBytes(uint64_t chunkBytes, int ranks) {
  constexpr uint64_t kMiB = uint64_t{1} << 20, kSmallest = 4 * kMiB, kScratchBudget = 64 * kMiB;
  const uint64_t largest =
      std::max(kSmallest, kScratchBudget / std::max(ranks, 1) / kMiB * kMiB);  // whole MiB
  const uint64_t quarter = ((chunkBytes + 3) / 4 + kMiB - 1) / kMiB * kMiB;
  return std::clamp(quarter, kSmallest, largest);
}

uint64_t pieceBytesFor(uint64_t settingBytes, uint64_t chunkBytes, int ranks) {
  return settingBytes ? settingBytes : defaultPieceBytes(chunkBytes, ranks);
}

uint64_t fusedPieceBytes(uint64_t settingBytes, uint64_t chunkBytes) {
  return settingBytes ? settingBytes : std::clamp<uint64_t>(chunkBytes, 1, kFusedPieceCap);
}

}  // namespace cclz
