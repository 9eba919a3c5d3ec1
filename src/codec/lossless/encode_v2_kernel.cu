// Lossless encode, payload version 2, on the device: one warp per chunk, no block-wide barrier
// after the start.
//
// A warp loads its chunk (lane l: groups l, l+32, ...; the lane's symbols stay in registers),
// writes the raw planes straight to the frame, finds the chunk's top symbol, adds up for every
// lane the bits under all 8 static codes at once (packed 16-bit costs), picks the cheapest code,
// learns where its block goes from its predecessors (a warp-wide decoupled look-back), codes the
// lanes into a warp-private shared-memory copy of the block and copies it out. The bytes equal
// ref_v2.cpp's.
#include <cuda_runtime.h>

#include <algorithm>

#include "codec/lossless/device_v2.cuh"
#include "codec/lossless/kernel_path.h"

namespace cclz::lossless::v2 {
namespace {

using namespace device;

constexpr uint64_t kStateAggregate = 1ull << 62;  // the chunk's block size is known
constexpr uint64_t kStateInclusive = 2ull << 62;  // the end offset of its block is known
constexpr uint64_t kStateValue = (1ull << 62) - 1;
constexpr int kEncodeBlocksPerSM = 8;

struct EncodeArgs {
  const void* src;
  uint64_t count;
  uint8_t* dst;
  uint64_t* encodedBytesOut;
  DeviceStatus* status;
  uint32_t* workCounter;
  uint64_t* chunkState;
  Layout layout;
  uint32_t chunkElems;
  int dtype;
  bool srcAligned16;
};

__device__ void writeHeader(const EncodeArgs& a, uint64_t frameBytes) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kLosslessVersion2;
  h.codec = cclzCodecLossless;
  h.dtype = static_cast<uint8_t>(a.dtype);
  h.count = a.count;
  h.frameBytes = frameBytes;
  h.chunkElems = a.chunkElems;
  h.numChunks = static_cast<uint32_t>(a.layout.numChunks);
  h.checksum = headerChecksum(h);
  *reinterpret_cast<FrameHeader*>(a.dst) = h;
  if (a.encodedBytesOut) *a.encodedBytesOut = frameBytes;
  a.status->encodedBytes = frameBytes;
}

// The whole warp: the offset of chunk k's block. Lane j reads the state of chunk k-1-j (32 at a
// time) until a chunk whose end offset is known, and sums the sizes up to it; then lane 0
// publishes chunk k's end offset. Chunk k's own size was published before (publishSize).
__device__ uint64_t lookBack(uint64_t* state, uint64_t k, uint64_t size, uint32_t lane) {
  uint64_t exclusive = 0;
  int64_t base = static_cast<int64_t>(k) - 1;
  while (base >= 0) {
    const int64_t j = base - static_cast<int64_t>(lane);
    uint64_t v = kStateInclusive;  // before chunk 0: an end offset of zero
    if (j >= 0) v = *reinterpret_cast<volatile uint64_t*>(state + j);
    const uint32_t flag = static_cast<uint32_t>(v >> 62);
    const uint32_t inclusive = __ballot_sync(kFullMask, flag == 2);
    const uint32_t nearest = inclusive ? __ffs(inclusive) - 1 : 32u;
    // A chunk nearer than the nearest end offset has published nothing yet: look again.
    if (__any_sync(kFullMask, flag == 0 && lane <= nearest)) {
      __nanosleep(64);
      continue;
    }
    const uint64_t mine = lane <= nearest ? (v & kStateValue) : 0;
    uint64_t sum = mine;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(kFullMask, sum, d);
    exclusive += sum;
    if (nearest < 32) break;
    base -= 32;
  }
  if (lane == 0)
    atomicExch(reinterpret_cast<unsigned long long*>(state + k),
               kStateInclusive | (exclusive + size));
  return exclusive;
}

// Loads a group as 32-bit words (zeros past a short group's end), 16 bytes at a time when the
// source allows.
template <int D>
__device__ void loadGroupWords(const uint8_t* in, uint32_t valid, bool aligned16,
                               uint32_t (&x)[lossless::device::Splitter<D>::kWords]) {
  constexpr int kWords = lossless::device::Splitter<D>::kWords;
  if (valid == kGroup && aligned16) {
#pragma unroll
    for (int v = 0; v < kWords / 4; ++v) {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(in) + v);
      x[4 * v] = q.x;
      x[4 * v + 1] = q.y;
      x[4 * v + 2] = q.z;
      x[4 * v + 3] = q.w;
    }
  } else {
    using Word = typename Elements<D>::Word;
    const Word* e = reinterpret_cast<const Word*>(in);
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (sizeof(Word) == 2) {
        const uint32_t lo = 2 * i < static_cast<int>(valid) ? e[2 * i] : 0u;
        const uint32_t hi = 2 * i + 1 < static_cast<int>(valid) ? e[2 * i + 1] : 0u;
        x[i] = lo | (hi << 16);
      } else {
        x[i] = i < static_cast<int>(valid) ? e[i] : 0u;
      }
    }
  }
}

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

__device__ inline uint32_t symbolAt(const uint32_t (&sym)[kMaxGroupsPerLane][2], int j, int i) {
  return (sym[j][i / 4] >> (8 * (i % 4))) & 0xFFu;
}

// The block-wide copies of the family's code and cost tables (code: encoderEntry below).
struct EncodeTables {
  uint4 cost[kMaxOffsets + 1];
  uint32_t code[kTables][kMaxOffsets + 1];
};

// The bits under all 8 codes of offset index d (packed 16-bit costs, format_v2.h).
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

// Byte b of a word, times 4, for a word whose bytes are below 64 (a byte offset into a table of
// 32-bit entries): one instruction each.
__device__ inline uint32_t byteOffset(uint32_t w4, int b) {
  return b == 0 ? (w4 & 0xFFu) : b == 3 ? (w4 >> 24) : __byte_perm(w4, 0, 0x4440 + b);
}
__device__ inline uint32_t entryAt(const uint32_t* table, uint32_t byteOffset) {
  return *reinterpret_cast<const uint32_t*>(reinterpret_cast<const uint8_t*>(table) + byteOffset);
}

// Loads, splits and writes the raw planes of a lane's groups; symbols to sym (zeros past the
// chunk's end), the lane's largest and smallest symbol to top and bottom. kFull: a whole chunk
// of kMaxChunkElems from a 16-byte aligned source. kStaged (with kFull): `in` is the chunk in
// the warp's shared memory.
template <int D, bool kFull, bool kStaged = false>
__device__ __forceinline__ void splitLane(const EncodeArgs& a, const uint8_t* in, uint32_t n,
                                          uint32_t lane, uint32_t groupsPerLane, uint8_t* planeA,
                                          uint16_t* planeB, uint32_t (&sym)[kMaxGroupsPerLane][2],
                                          uint32_t& top, uint32_t& bottom) {
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
  for (int j0 = 0; j0 < static_cast<int>(kMaxGroupsPerLane); j0 += kBatch) {
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
          loadGroupWords<D>(in + g * kGroup * sizeof(Word), valid, a.srcAligned16, x[b]);
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

// Adds up the lane's bits under the 8 codes (packed[t / 2], 16-bit field t % 2).
// kNoEscapes: every offset is below the family's D (top - bottom < D), so offsets need no
// clamp, and four come from one subtraction: top - s per byte never borrows, since s <= top.
template <bool kFull, bool kNoEscapes>
__device__ __forceinline__ void laneCosts(const EncodeTables& t,
                                          const uint32_t (&sym)[kMaxGroupsPerLane][2], uint32_t top,
                                          uint32_t offsets, uint32_t n, uint32_t lane,
                                          uint32_t groupsPerLane, uint32_t (&packed)[4]) {
  packed[0] = packed[1] = packed[2] = packed[3] = 0;
  const uint32_t top4 = top * 0x01010101u;
#pragma unroll
  for (int j = 0; j < static_cast<int>(kMaxGroupsPerLane); ++j) {
    if constexpr (kNoEscapes) {
      static_assert(kFull, "the offset bytes are for whole groups");
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t d4 = top4 - sym[j][h];
#pragma unroll
        for (int b = 0; b < 4; ++b) addCosts(t, (d4 >> (8 * b)) & 0xFFu, packed);
      }
    } else {
      const uint32_t valid = laneGroupValid<kFull>(j, groupsPerLane, n, lane);
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {
        if (!kFull && i >= static_cast<int>(valid)) break;
        addCosts(t, min(top - symbolAt(sym, j, i), offsets), packed);
      }
    }
  }
}

// Codes the lane's symbols with code table `code` (kNoEscapes as in laneCosts: two symbols
// per put, at most 20 bits).
template <bool kFull, bool kNoEscapes>
__device__ __forceinline__ void codeLane(const uint32_t* code,
                                         const uint32_t (&sym)[kMaxGroupsPerLane][2], uint32_t top,
                                         uint32_t offsets, uint32_t n, uint32_t lane,
                                         uint32_t groupsPerLane, LaneWriter& w) {
  const uint32_t top4x4 = top * 0x04040404u;
#pragma unroll
  for (int j = 0; j < static_cast<int>(kMaxGroupsPerLane); ++j) {
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

// One chunk, by the whole warp (docs/formats.md; the bytes equal ref_v2.cpp's). kStaged (with
// kFull): the chunk's input is being copied to the stage (stageInput, committed before).
template <int D, bool kFull, bool kStaged = false>
__device__ __forceinline__ void encodeChunk(const EncodeArgs& a, const EncodeTables& tables,
                                            uint8_t* stage, uint64_t k, uint32_t n, uint32_t lane) {
  using Word = typename Elements<D>::Word;
  uint32_t* stageWords = reinterpret_cast<uint32_t*>(stage);
  const uint32_t chunkElems = a.chunkElems;
  const uint32_t groupsPerLane = kFull ? kMaxGroupsPerLane : chunkElems / (kGroup * kLanes);
  const uint32_t offsets = familyOffsets(D);
  const uint64_t first = k * chunkElems;
  const uint8_t* in = kStaged ? stage : static_cast<const uint8_t*>(a.src) + first * sizeof(Word);
  uint8_t* planeA = a.dst + a.layout.planeAOffset + first;
  uint16_t* planeB = reinterpret_cast<uint16_t*>(a.dst + a.layout.planeBOffset) + first;

  // ---- Split: raw planes to the frame, symbols to registers, the top and bottom symbol. ----
  uint32_t sym[kMaxGroupsPerLane][2];
  uint32_t top, bottom;
  if constexpr (kStaged) {
    static_assert(kFull, "only whole chunks are staged");
    lossless::device::copyAsyncWaitAll();
    __syncwarp();
  }
  splitLane<D, kFull, kStaged>(a, in, n, lane, groupsPerLane, planeA, planeB, sym, top, bottom);
  if constexpr (kStaged) __syncwarp();  // every lane has read its input before the block is built
  top = warpMax(top);
  bottom = warpMin(bottom);
  // A symbol escapes when top - symbol >= D: the chunk has escapes when its smallest does.
  const bool escapes = top - bottom >= offsets;

  // ---- The code: every lane's bits under the 8 codes, the cheapest for the chunk. ----
  uint32_t mode = kModeConstant, table = 0, width = 0, base = 0, myBits = 0, prefix = 0;
  uint32_t blockBytes = kBlockAlign;
  if (top != bottom) {
    uint32_t packed[4];  // 16-bit costs of codes 0..7
    if (kFull && !escapes)
      laneCosts<kFull, kFull>(tables, sym, top, offsets, n, lane, groupsPerLane, packed);
    else
      laneCosts<kFull, false>(tables, sym, top, offsets, n, lane, groupsPerLane, packed);
    uint32_t best = 0xffffffffu;
#pragma unroll
    for (uint32_t t = 0; t < kTables; ++t) {
      const uint32_t total = warpSum((packed[t / 2] >> (16 * (t % 2))) & 0xFFFFu);
      if (total < best) best = total, table = t;  // the lowest code on ties, as ref_v2.cpp
    }
#pragma unroll
    for (uint32_t t = 0; t < kTables;
         ++t)  // (a register array indexed at run time is local memory)
      if (t == table) myBits = (packed[t / 2] >> (16 * (t % 2))) & 0xFFFFu;
    base = warpMin(myBits);
    width = bitWidth(warpMax(myBits) - base);
    prefix = warpInclusiveScan(myBits, lane) - myBits;
    const uint32_t coded = streamsOffset(width) + (best + 7) / 8;
    mode = coded < kBlockHeaderBytes + n ? kModeHuffman : kModeStored;
    blockBytes = static_cast<uint32_t>(
        alignUp(mode == kModeHuffman ? coded : kBlockHeaderBytes + n, kBlockAlign));
  }
  if (lane == 0)  // later chunks may count this one while it is still being written
    atomicExch(reinterpret_cast<unsigned long long*>(a.chunkState + k),
               (k == 0 ? kStateInclusive : kStateAggregate) | blockBytes);

  // ---- The block, in the warp's shared memory. ----
  for (uint32_t i = lane * 16; i < blockBytes; i += 32 * 16)
    *reinterpret_cast<uint4*>(stage + i) = make_uint4(0, 0, 0, 0);
  __syncwarp();
  if (mode == kModeConstant) {
    if (lane == 0) stageWords[0] = kModeConstant | (top << 8);
  } else if (mode == kModeStored) {
    if (lane == 0) stage[0] = kModeStored;
#pragma unroll
    for (int j = 0; j < static_cast<int>(kMaxGroupsPerLane); ++j) {
      const uint32_t g = lane + kLanes * j;
      const uint32_t valid =
          kFull ? kGroup : (j < static_cast<int>(groupsPerLane) ? groupValid(n, g) : 0);
      if (valid == kGroup) {  // 4-byte aligned: the block header is 4 bytes
        stageWords[1 + 2 * g] = sym[j][0];
        stageWords[2 + 2 * g] = sym[j][1];
      } else {
        for (uint32_t i = 0; i < valid; ++i)
          stage[kBlockHeaderBytes + g * kGroup + i] = static_cast<uint8_t>(symbolAt(sym, j, i));
      }
    }
  } else {
    if (lane == 0) {
      stageWords[0] =
          kModeHuffman | ((table | (escapes ? kEscapeFlag : 0)) << 8) | (top << 16) | (width << 24);
      stageWords[1] = base;
    }
    if (width) {  // this lane's size delta, w bits at bit 64 + lane * w
      const uint32_t bit = 8 * kHeaderBytes + lane * width, delta = myBits - base;
      atomicOr(&stageWords[bit / 32], delta << (bit % 32));
      if (bit % 32 + width > 32) atomicOr(&stageWords[bit / 32 + 1], delta >> (32 - bit % 32));
    }
    // The lane's stream, from its bit offset (LaneWriter: whole words stored, the last OR-ed).
    LaneWriter w(stageWords, 8 * streamsOffset(width) + prefix);
    const uint32_t* code = tables.code[table];
    if (kFull && !escapes)
      codeLane<kFull, kFull>(code, sym, top, offsets, n, lane, groupsPerLane, w);
    else
      codeLane<kFull, false>(code, sym, top, offsets, n, lane, groupsPerLane, w);
    __syncwarp();
    w.finish();
  }
  __syncwarp();

  // ---- Place the block after its predecessors and copy it out. ----
  const uint64_t start = k == 0 ? 0 : lookBack(a.chunkState, k, blockBytes, lane);
  uint8_t* out = a.dst + a.layout.blocksOffset + start;
  for (uint32_t i = lane * 16; i < blockBytes; i += 32 * 16)
    *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(stage + i);
  if (lane == 0) {
    reinterpret_cast<uint64_t*>(a.dst + a.layout.tableOffset)[k] = start + blockBytes;
    if (k + 1 == a.layout.numChunks) writeHeader(a, a.layout.blocksOffset + start + blockBytes);
  }
  if (k == 0) {  // the alignment gaps of the frame are zero, as in the reference
    const Layout& l = a.layout;
    const uint64_t planeBEnd = l.planeBOffset + (D == cclzFloat32 ? 2 * a.count : 0);
    for (uint64_t i = l.tableOffset + 8 * l.numChunks + lane; i < l.planeAOffset; i += 32)
      a.dst[i] = 0;
    for (uint64_t i = l.planeAOffset + a.count + lane; i < l.planeBOffset; i += 32) a.dst[i] = 0;
    for (uint64_t i = planeBEnd + lane; i < l.blocksOffset; i += 32) a.dst[i] = 0;
  }
  __syncwarp();  // the stage is rewritten by the next chunk
}

// The staged kernel's shared memory per warp: a whole chunk of input, which is also the stage
// its block is built in once the input is split (the block is at most kStageBytes).
template <int D>
constexpr uint32_t stagedEncodeWarpBytes() {
  return std::max<uint32_t>(kStageBytes, kMaxChunkElems * sizeof(typename Elements<D>::Word));
}

// The staged kernel copies chunk k's input to the warp's stage (cp.async, committed) if it is
// a whole chunk from an aligned source (the chunks encodeChunk<D, true> takes); returns whether
// it did.
template <int D>
__device__ bool stageInput(const EncodeArgs& a, uint8_t* stage, uint64_t k, uint32_t lane) {
  using Word = typename Elements<D>::Word;
  const uint64_t first = k * a.chunkElems;
  if (k >= a.layout.numChunks || !a.srcAligned16 || a.chunkElems != kMaxChunkElems ||
      a.count - first < kMaxChunkElems)
    return false;
  const uint8_t* in = static_cast<const uint8_t*>(a.src) + first * sizeof(Word);
  for (uint32_t i = lane * 16; i < kMaxChunkElems * sizeof(Word); i += 32 * 16)
    lossless::device::copyAsync16(stage + i, in + i);
  lossless::device::copyAsyncCommit();
  return true;
}

// NOTE: at most 64 registers (8 blocks, 32 warps per multiprocessor): the encoder is latency
// bound at 16 warps (session 5 profile: 8.3 cycles per issued instruction at 115 registers).
// kStaged false: the general kernel. kStaged true: the staged kernel (kernel_path.h): a warp
// takes its first chunk and starts copying its input to shared memory before the block's code
// tables are filled, and splits it from there; the general kernel loads a lane's 16 groups in
// four dependent batches (to stay within 64 registers), so it waits on DRAM four times per
// chunk (fp32: eight), which at 4 MiB (~4 warps per SM) nothing hides.
template <int D, bool kStaged>
__global__ void __launch_bounds__(kThreads, kEncodeBlocksPerSM) encodeKernel(EncodeArgs a) {
  __shared__ EncodeTables tables;
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint8_t* stage;
  uint64_t next = 0;     // staged: the warp's next chunk, already taken
  bool staged = false;   // staged: its input is on the way to the stage
  if constexpr (kStaged) {
    extern __shared__ __align__(16) uint8_t stagedAll[];  // stagedEncodeWarpBytes<D>() per warp
    stage = stagedAll + warp * stagedEncodeWarpBytes<D>();
    uint32_t taken = 0;
    if (lane == 0) taken = atomicAdd(a.workCounter, 1u);
    next = __shfl_sync(kFullMask, taken, 0);
    staged = stageInput<D>(a, stage, next, lane);
  } else {
    __shared__ __align__(16) uint8_t stageAll[kWarpsPerBlock][kStageBytes];
    stage = stageAll[warp];
  }
  const int fam = family(D);
  const uint32_t offsets = familyOffsets(D);
  for (uint32_t i = threadIdx.x; i <= offsets; i += blockDim.x) {
    const uint32_t* c = kDeviceCodes.cost[fam][i];
    tables.cost[i] = make_uint4(c[0], c[1], c[2], c[3]);
    for (uint32_t t = 0; t < kTables; ++t)
      tables.code[t][i] = encoderEntry(kDeviceCodes.code[fam][t][i]);
  }
  __syncthreads();
  if (a.layout.numChunks == 0) {  // an empty tensor: the header alone
    if (blockIdx.x == 0 && threadIdx.x == 0) writeHeader(a, a.layout.blocksOffset);
    return;
  }
  while (true) {
    // Chunks are taken in order, so a warp only ever waits for chunks already being encoded.
    uint64_t k;
    if constexpr (kStaged) {
      k = next;
    } else {
      uint32_t taken = 0;
      if (lane == 0) taken = atomicAdd(a.workCounter, 1u);
      k = __shfl_sync(kFullMask, taken, 0);
    }
    if (k >= a.layout.numChunks) return;
    const uint64_t first = k * a.chunkElems;
    const uint32_t n =
        static_cast<uint32_t>(min(static_cast<uint64_t>(a.chunkElems), a.count - first));
    // Whole default-size chunks from an aligned source take the branch-free path; the last
    // chunk, other chunk sizes and unaligned sources the general one (same bytes).
    if (kStaged && staged)
      encodeChunk<D, true, kStaged>(a, tables, stage, k, n, lane);
    else if (n == kMaxChunkElems && a.srcAligned16)
      encodeChunk<D, true>(a, tables, stage, k, n, lane);
    else
      encodeChunk<D, false>(a, tables, stage, k, n, lane);
    if constexpr (kStaged) {
      uint32_t taken = 0;
      if (lane == 0) taken = atomicAdd(a.workCounter, 1u);
      next = __shfl_sync(kFullMask, taken, 0);
      staged = stageInput<D>(a, stage, next, lane);
    }
  }
}

template <int D>
void launchEncode(const EncodeArgs& args, cudaStream_t stream) {
  const uint64_t chunks = args.layout.numChunks;
  const uint64_t warps = chunks ? chunks : 1;
  const unsigned blocks = static_cast<unsigned>(
      std::min<uint64_t>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock, 1u << 20));
  if (chunks > 0 && useStagedKernels(kernelPathFromEnvironment(), chunks, multiprocessorCount())) {
    constexpr int kShared = kWarpsPerBlock * stagedEncodeWarpBytes<D>();  // fp32: 64 KiB
    static std::atomic<uint64_t> configured{0};
    lossless::device::ensureSharedMemoryLimit(encodeKernel<D, true>, kShared, configured);
    encodeKernel<D, true><<<blocks, kThreads, kShared, stream>>>(args);
  } else {
    encodeKernel<D, false><<<blocks, kThreads, 0, stream>>>(args);
  }
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void encodeDevice(uint32_t chunkElems, int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, uint8_t* scratch,
                  cudaStream_t stream) {
  EncodeArgs args{src,
                  count,
                  dst,
                  encodedBytesOut,
                  status,
                  reinterpret_cast<uint32_t*>(scratch),
                  reinterpret_cast<uint64_t*>(scratch + 8),
                  frameLayout(dtype, count, chunkElems),
                  chunkElems,
                  dtype,
                  reinterpret_cast<uintptr_t>(src) % 16 == 0};
  CCLZ_REQUIRE(args.layout.numChunks < (1u << 31), cclzInvalidArgument, "too many chunks");
  CCLZ_CUDA_CHECK(cudaMemsetAsync(scratch, 0, encodeScratchBytes(args.layout.numChunks), stream));
  switch (dtype) {
    case cclzBfloat16:
      launchEncode<cclzBfloat16>(args, stream);
      break;
    case cclzFloat16:
      launchEncode<cclzFloat16>(args, stream);
      break;
    case cclzFloat32:
      launchEncode<cclzFloat32>(args, stream);
      break;
    default:
      CCLZ_FAIL(cclzNotSupported, "the lossless codec takes bf16, fp16 or fp32");
  }
}

}  // namespace cclz::lossless::v2
