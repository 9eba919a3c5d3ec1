// The arithmetic of the split staged encoder (encode_kernel.cu, encodeChunkSplit; kernel_path.h,
// CCLZ_LOSSLESS_ENCODE_WARPS), for host and device: the CPU test LosslessEncodeSplit replays it
// against the reference. A chunk's lane l codes groups l, l+32, ..., l+480 (16 groups) as one
// stream (docs/formats.md, "Lossless payload"); with P warps per chunk, warp p's lane
// l takes the lane's groups j = p * 16/P ... (p+1) * 16/P - 1, which are consecutive in the
// lane's stream. So the lane's size is the sum of its P parts' sizes, and part p's first bit in
// the lane's stream is the sum of the sizes of parts 0..p-1 under the chunk's code.
#pragma once

#include <cstdint>

#include "codec/lossless/format.h"
#include "common/hd.h"

namespace cclz::lossless {

constexpr uint32_t kSplitGroupsPerLane = kMaxChunkElems / (kGroup * kLanes);  // 16

// Groups each part codes per lane, with `parts` warps per chunk (1, 2 or 4).
CCLZ_HD constexpr uint32_t splitGroupsPerPart(uint32_t parts) {
  return kSplitGroupsPerLane / parts;
}

// The chunk group that is the j-th group of lane `lane` in part `part`.
CCLZ_HD constexpr uint32_t splitGroup(uint32_t lane, uint32_t part, uint32_t groupsPerPart,
                                      uint32_t j) {
  return lane + kLanes * (part * groupsPerPart + j);
}

// Field t (0..7) of packed 16-bit costs (format.h, Codes::cost): the bits under code t.
CCLZ_HD constexpr uint32_t packedField(const uint32_t (&packed)[4], uint32_t t) {
  return (packed[t / 2] >> (16 * (t % 2))) & 0xFFFFu;
}

// Adds one part's packed costs to a sum. NOTE: the fields never carry: a lane has at most 128
// symbols of at most 16 bits, 2048 < 2^16.
CCLZ_HD constexpr void addPacked(uint32_t (&sum)[4], uint32_t x, uint32_t y, uint32_t z,
                                 uint32_t w) {
  sum[0] += x;
  sum[1] += y;
  sum[2] += z;
  sum[3] += w;
}

// The first bit of a part's codes in the block: the streams' start, the lane's prefix (the
// sizes of lanes 0..l-1) and partOffset, the sizes of the lane's earlier parts.
CCLZ_HD uint32_t splitSegmentBit(uint32_t width, uint32_t lanePrefix, uint32_t partOffset) {
  return 8 * streamsOffset(width) + lanePrefix + partOffset;
}

}  // namespace cclz::lossless
