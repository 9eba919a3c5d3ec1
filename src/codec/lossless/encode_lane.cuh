// The lane-level pieces of the encoder (encode_kernel.cu): a lane's groups loaded
// and split into symbols and raw planes, the costs of its symbols under the 8 static codes, and
// its stream coded into the block. Included by encode_kernel.cu only (anonymous namespace:
// these device functions are that translation unit's).
#pragma once

#include <cstdint>

#include "codec/lossless/cost_bytes.h"
#include "codec/lossless/device.cuh"

namespace cclz::lossless {
namespace {

using namespace device;

// The encode kernel's arguments (launchEncode in encode_kernel.cu).
struct EncodeArgs {
  const void* src;
  uint64_t count;
  uint8_t* dst;
  uint64_t* encodedBytesOut;
  DeviceStatus* status;
  uint32_t* workCounter;
  uint32_t* warpsDone;  // the last warp out zeroes both counters (leaveScratch)
  // Two state words per chunk: its size or end offset (numChunks of them), then the sum of its
  // and its 31 predecessors' sizes (lookBack).
  uint64_t* chunkState;
  uint64_t epochBits;  // the call's scratch epoch in a state's bits 48-61 (0: memset scratch)
  Layout layout;
  uint32_t chunkElems;
  int dtype;
  bool srcAligned16;
};

// Writes a group's raw planes to the frame (whole vectors for a whole group).
template <int D>
__device__ void storePlanes(uint32_t g, uint32_t valid, const uint32_t (&raw)[2],
                            const uint32_t (&rawB)[4], uint8_t* planeA, uint16_t* planeB) {
  if (valid == kGroup) {
    *reinterpret_cast<uint2*>(planeA + g * kGroup) = make_uint2(raw[0], raw[1]);
    if constexpr (D == cclzFloat32)
      *reinterpret_cast<uint4*>(planeB + g * kGroup) =
          make_uint4(rawB[0], rawB[1], rawB[2], rawB[3]);
  } else {
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      if (i >= static_cast<int>(valid)) break;
      planeA[g * kGroup + i] = static_cast<uint8_t>(raw[i / 4] >> (8 * (i % 4)));
      if constexpr (D == cclzFloat32)
        planeB[g * kGroup + i] = static_cast<uint16_t>(rawB[i / 2] >> (16 * (i % 2)));
    }
  }
}

template <int kG>
__device__ inline uint32_t symbolAt(const uint32_t (&sym)[kG][2], int j, int i) {
  return (sym[j][i / 4] >> (8 * (i % 4))) & 0xFFu;
}

// The block-wide copies of the family's code and cost tables (code: encoderEntry below; cost8:
// 8-bit costs, cost_bytes.h).
struct EncodeTables {
  uint4 cost[kMaxOffsets + 1];
  uint2 cost8[kMaxOffsets + 1];
  uint32_t code[kTables][kMaxOffsets + 1];
};

// The bits under all 8 codes of offset index d (packed 16-bit costs, format.h).
__device__ inline void addCosts(const EncodeTables& t, uint32_t d, uint32_t (&packed)[4]) {
  const uint4 c = t.cost[d];
  packed[0] += c.x;
  packed[1] += c.y;
  packed[2] += c.z;
  packed[3] += c.w;
}

// The encoder's code entries in shared memory: the bit-reversed code in bits 0..15 and its
// length in bits 24..31 (kDeviceCodes has the length in bits 16..23). Codes are at most 10 bits.
constexpr uint32_t kEntryLengthShift = 24;
__device__ inline uint32_t encoderEntry(uint32_t e) {
  return (e & 0xFFFFu) | ((e >> 16) << kEntryLengthShift);
}
__device__ inline uint32_t entryCode(uint32_t e) { return e & 0xFFFFu; }
__device__ inline uint32_t entryLength(uint32_t e) { return e >> kEntryLengthShift; }

// Two codes concatenated, the first one's bits first (at most 20 bits). NOTE: the second entry's
// length field lands at bit 25 or above, so one mask clears both length fields; and the sum of
// two entries is the sum of the lengths in bits 24..31 (the codes, under 2^11, carry nothing).
__device__ inline uint32_t pairBits(uint32_t e0, uint32_t e1) {
  return (e0 | (e1 << entryLength(e0))) & 0xFFFFFu;
}
__device__ inline uint32_t pairLength(uint32_t e0, uint32_t e1) {
  return (e0 + e1) >> kEntryLengthShift;
}

// One lane's stream, written into the warp's zeroed stage from bit position bitPos on.
// NOTE: a lane stores a word with a plain store once its own bits reach the word's end, and
// branch-free (a predicated store): two lanes never both reach the end of one word, so whole-word
// stores never collide. The bits of earlier lanes in the lane's first word are stored as zeros
// there; those lanes OR their last, partial word in after a __syncwarp (finish), which also
// covers words no lane completes. v6's stream coder used a shared atomic per word and a
// divergent branch per symbol.
struct LaneWriter {
  uint32_t* word;  // the word being filled
  uint32_t cur;    // its bits so far (zeros below the lane's first bit)
  uint32_t fill;   // bits of the word before the next free one, < 32

  __device__ LaneWriter(uint32_t* words, uint32_t bitPos)
      : word(words + bitPos / 32), cur(0), fill(bitPos % 32) {}

  // Appends the len low bits of value (value < 2^len, len <= 32).
  __device__ __forceinline__ void put(uint32_t value, uint32_t len) {
    const uint32_t lo = cur | (value << fill);
    const uint32_t hi = __funnelshift_l(value, 0u, fill);  // value >> (32 - fill), 0 for fill 0
    fill += len;
    const bool complete = fill >= 32;
    if (complete) *word = lo;
    cur = complete ? hi : lo;
    word += complete ? 1 : 0;
    fill &= 31u;
  }
  // After a __syncwarp that follows every lane's last put.
  __device__ void finish() {
    if (cur) atomicOr(word, cur);
  }
};

// Byte b of a word: one instruction each. (A byte offset into a table when the word holds the
// offsets times the entry size: codeLane, laneCostsNoEscapes.)
__device__ inline uint32_t byteOffset(uint32_t w4, int b) {
  return b == 0 ? (w4 & 0xFFu) : b == 3 ? (w4 >> 24) : __byte_perm(w4, 0, 0x4440 + b);
}
__device__ inline uint32_t entryAt(const uint32_t* table, uint32_t byteOffset) {
  return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(table) + byteOffset);
}

// Loads, splits and writes the raw planes of a lane's groups; symbols to sym (zeros past the
// chunk's end), the lane's largest and smallest symbol to top and bottom. kFull: a whole chunk
// of kMaxChunkElems from a 16-byte aligned source. kStaged (with kFull): `in` is the chunk in
// the warp's shared memory. kG: the lane's groups this thread takes, 16; the split encoder's
// parts (encode_split.h) take 8 or 4 consecutive ones of the lane's (whole chunks only), with
// `in`, planeA and planeB pointing at the part's first group. laneCosts and codeLane alike.
template <int D, bool kFull, bool kStaged = false, int kG = kMaxGroupsPerLane>
__device__ __forceinline__ void splitLane(const EncodeArgs& a, const uint8_t* in, uint32_t n,
                                          uint32_t lane, uint32_t groupsPerLane, uint8_t* planeA,
                                          uint16_t* planeB, uint32_t (&sym)[kG][2], uint32_t& top,
                                          uint32_t& bottom) {
  constexpr int kSplit = D == cclzFloat16 ? cclzBfloat16 : D;
  using Split = lossless::device::Splitter<kSplit>;
  using Word = typename Elements<D>::Word;
  // Groups loaded before any is split: 64 bytes per lane (fp32: 2 groups, to spare registers).
  constexpr int kBatch = sizeof(Word) == 4 ? 2 : 4;
  constexpr int kVectors = Split::kWords / 4;  // 16-byte vectors per group
  // Whole chunks: the largest and smallest symbol over pairs of 16-bit fields (3-input DPX
  // min/max: half an instruction per symbol).
  uint32_t top2 = 0, bottom2 = 0x00FF00FFu;
  top = 0;
  bottom = 255;
  // Whole chunks: lane-based pointers, so that every group is an immediate offset.
  const uint4* in4 = reinterpret_cast<const uint4*>(in) + lane * kVectors;
  uint2* planeA2 = reinterpret_cast<uint2*>(planeA) + lane;
  uint4* planeB4 = reinterpret_cast<uint4*>(planeB) + lane;
#pragma unroll
  for (int j0 = 0; j0 < kG; j0 += kBatch) {
    uint32_t x[kBatch][Split::kWords];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const uint32_t g = lane + kLanes * (j0 + b);
      if constexpr (kFull) {
#pragma unroll
        for (int v = 0; v < kVectors; ++v) {
          const uint4* from = in4 + (j0 + b) * kLanes * kVectors + v;
          const uint4 q = kStaged ? *from : __ldg(from);
          x[b][4 * v] = q.x;
          x[b][4 * v + 1] = q.y;
          x[b][4 * v + 2] = q.z;
          x[b][4 * v + 3] = q.w;
        }
      } else {
        const uint32_t valid = groupValid(n, g);
        if (j0 + b < static_cast<int>(groupsPerLane) && valid)
          lossless::device::loadGroupWords<D>(in + g * kGroup * sizeof(Word), valid, a.srcAligned16,
                                              x[b]);
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int j = j0 + b;
      const uint32_t g = lane + kLanes * j;
      uint32_t raw[2], rawB[4];
      if constexpr (kFull) {
        Split::split(x[b], sym[j], raw, rawB);
        planeA2[kLanes * j] = make_uint2(raw[0], raw[1]);
        if constexpr (D == cclzFloat32)
          planeB4[kLanes * j] = make_uint4(rawB[0], rawB[1], rawB[2], rawB[3]);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint32_t even = __byte_perm(sym[j][h], 0, 0x4240);
          const uint32_t odd = __byte_perm(sym[j][h], 0, 0x4341);
          top2 = __vimax3_u16x2(top2, even, odd);
          bottom2 = __vimin3_u16x2(bottom2, even, odd);
        }
      } else {
        const uint32_t valid = groupValid(n, g);
        sym[j][0] = sym[j][1] = 0;
        if (j >= static_cast<int>(groupsPerLane) || !valid) continue;
        Split::split(x[b], sym[j], raw, rawB);
        storePlanes<D>(g, valid, raw, rawB, planeA, planeB);
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          if (i >= static_cast<int>(valid)) break;
          top = max(top, symbolAt(sym, j, i));
          bottom = min(bottom, symbolAt(sym, j, i));
        }
      }
    }
    // NOTE: top2's fields are bytes, so this adds 0; but the next batch's loads now depend on
    // this one's symbols, and ptxas cannot hoist them all to the top (it did, and spilled at
    // the 64-register bound).
    if constexpr (kFull)
      in4 += top2 >> 31;
    else
      in += (top >> 8) * sizeof(Word);  // top is a byte, so 0 again
  }
  if constexpr (kFull) {
    top = max(top2 & 0xFFFFu, top2 >> 16);
    bottom = min(bottom2 & 0xFFFFu, bottom2 >> 16);
  }
}

// How many of the 8 values of the lane's group j are in the chunk (all of them in a full chunk;
// none past the lane's groups).
template <bool kFull>
__device__ __forceinline__ uint32_t laneGroupValid(int j, uint32_t groupsPerLane, uint32_t n,
                                                   uint32_t lane) {
  if constexpr (kFull) return kGroup;
  return j < static_cast<int>(groupsPerLane) ? groupValid(n, lane + kLanes * j) : 0;
}

// Adds up the lane's bits under the 8 codes (packed[t / 2], 16-bit field t % 2), one symbol at
// a time, offsets clamped to the escape's index. (Whole chunks without escapes:
// laneCostsNoEscapes.) kBytes: 8-bit costs (cost_bytes.h), spread to the 16-bit fields every
// kSymbolsPerWidenWithEscapes symbols (kFull) or every group; otherwise the 16-bit costs.
// NOTE: kBytes is fp16's (docs/kernels/lossless.md, "Encoder"): its 64 offsets
// leave an escape in nearly every Gaussian chunk, and the bytes took its encode from 770 to 920
// GB/s at 64 MiB (+15-20% from 4 to 256 MiB). bf16 and fp32 chunks rarely escape: the bytes
// gained nothing at 16-256 MiB, lost 3% for fp32 at 4 MiB and 1% on the real bf16 tensors.
template <bool kFull, bool kBytes, int kG = kMaxGroupsPerLane>
__device__ __forceinline__ void laneCosts(const EncodeTables& t, const uint32_t (&sym)[kG][2],
                                          uint32_t top, uint32_t offsets, uint32_t n, uint32_t lane,
                                          uint32_t groupsPerLane, uint32_t (&packed)[4]) {
  packed[0] = packed[1] = packed[2] = packed[3] = 0;
  uint32_t lo = 0, hi = 0;  // kBytes: the byte sums since the last widening
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    const uint32_t valid = laneGroupValid<kFull>(j, groupsPerLane, n, lane);
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      if (!kFull && i >= static_cast<int>(valid)) break;
      const uint32_t d = min(top - symbolAt(sym, j, i), offsets);
      if constexpr (!kBytes) {
        addCosts(t, d, packed);
        continue;
      }
      const uint2 c = t.cost8[d];
      lo += c.x;
      hi += c.y;
      if (kFull && (kGroup * j + i + 1) % costbytes::kSymbolsPerWidenWithEscapes == 0) {
        costbytes::widen(lo, hi, packed);
        lo = hi = 0;
      }
    }
    if (kBytes && !kFull) {  // a group at a time: at most 8 symbols
      costbytes::widen(lo, hi, packed);
      lo = hi = 0;
    }
  }
  if (kBytes && kFull) costbytes::widen(lo, hi, packed);
}

// laneCosts for whole groups whose offsets are all below the family's D (top - bottom < D): no
// clamp, and four offsets come from one subtraction (top - s per byte never borrows, since
// s <= top). 8-bit costs, spread to the 16-bit fields every kSymbolsPerWiden symbols
// (cost_bytes.h).
template <int D, int kG>
__device__ __forceinline__ void laneCostsNoEscapes(const EncodeTables& t,
                                                   const uint32_t (&sym)[kG][2], uint32_t top,
                                                   uint32_t (&packed)[4]) {
  constexpr int kGroupsPerWiden = costbytes::kSymbolsPerWiden / kGroup;
  static_assert(kG % kGroupsPerWiden == 0, "whole widening steps");
  packed[0] = packed[1] = packed[2] = packed[3] = 0;
  const uint32_t top4 = top * 0x01010101u;
  uint32_t lo = 0, hi = 0;
#pragma unroll
  for (int j = 0; j < kG; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        // The byte offset of the symbol's entry in cost8.
        uint32_t at;
        if constexpr (D != cclzFloat16) {  // the bf16/fp32 family
          at = byteOffset(costbytes::offsetsTimes8(top, sym[j][h]), b);
        } else {  // offsets up to 63: 8 times one does not fit a byte
          at = ((top4 - sym[j][h]) >> (8 * b) & 0xFFu) * 8;
        }
        const uint2 c =
            *reinterpret_cast<const uint2*>(reinterpret_cast<const uint8_t*>(t.cost8) + at);
        lo += c.x;
        hi += c.y;
      }
    }
    if ((j + 1) % kGroupsPerWiden == 0) {
      costbytes::widen(lo, hi, packed);
      lo = hi = 0;
    }
  }
}

// Codes the lane's symbols with code table `code` (kNoEscapes as in laneCostsNoEscapes: offsets
// four at a time; two symbols per put, at most 20 bits).
template <bool kFull, bool kNoEscapes, int kG = kMaxGroupsPerLane>
__device__ __forceinline__ void codeLane(const uint32_t* code, const uint32_t (&sym)[kG][2],
                                         uint32_t top, uint32_t offsets, uint32_t n, uint32_t lane,
                                         uint32_t groupsPerLane, LaneWriter& w) {
  const uint32_t top4x4 = top * 0x04040404u;
#pragma unroll
  for (int j = 0; j < kG; ++j) {
    if constexpr (kNoEscapes) {
      static_assert(kFull, "the offset bytes are for whole groups");
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        // 4 (top - s) for the 4 symbols of the word: each offset is below 64, so 4 times it fits
        // its byte, and the 32-bit product equals top4 * 4 - 4 * word modulo 2^32.
        const uint32_t d4x4 = top4x4 - 4 * sym[j][h];
        const uint32_t e0 = entryAt(code, byteOffset(d4x4, 0));
        const uint32_t e1 = entryAt(code, byteOffset(d4x4, 1));
        const uint32_t e2 = entryAt(code, byteOffset(d4x4, 2));
        const uint32_t e3 = entryAt(code, byteOffset(d4x4, 3));
        w.put(pairBits(e0, e1), pairLength(e0, e1));
        w.put(pairBits(e2, e3), pairLength(e2, e3));
      }
    } else {
      const uint32_t valid = laneGroupValid<kFull>(j, groupsPerLane, n, lane);
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {
        if (!kFull && i >= static_cast<int>(valid)) break;
        const uint32_t s = symbolAt(sym, j, i), index = min(top - s, offsets);
        const uint32_t c = code[index], len = entryLength(c);
        const bool escape = index == offsets;  // then the 8 symbol bits follow the code
        w.put(entryCode(c) | (escape ? s << len : 0u), len + (escape ? kEscapeBits : 0u));
      }
    }
  }
}

}  // namespace
}  // namespace cclz::lossless
