// The lossless payload (docs/formats.md, "Lossless payload"), written once for the CPU reference
// (ref.cpp) and the kernels (*_kernel.cu): the frame layout, the static codes, the
// chunk-block header and the lane layout. Nothing here allocates or throws.
//
// Each value is split into an 8-bit symbol and raw bits (elements.h). A chunk's symbols are coded
// as their offset d = top - symbol below the chunk's largest symbol `top`, with one of 8 static
// canonical codes per dtype family (tables.h); offsets of D or more take an escape code and
// the 8-bit symbol. The 32 lanes of a chunk (lane l: groups l, l+32, ...) are bit-concatenated
// streams whose sizes are given as deltas from the smallest.
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "codec/frame.h"
#include "codec/lossless/elements.h"
#include "codec/lossless/tables.h"
#include "common/hd.h"

namespace cclz::lossless {

constexpr int kGroup = 8;              // consecutive elements that go to one lane's stream together
constexpr int kModeStored = 0;         // chunk block: the symbol bytes as they are
constexpr int kModeHuffman = 1;        // chunk block: the static code
constexpr uint32_t kModeConstant = 2;  // chunk block of one symbol: [2, symbol, 0, 0], 16 bytes
constexpr uint32_t kBlockAlign = 16;   // chunk blocks start and end 16-byte aligned
constexpr uint32_t kBlockHeaderBytes = 4;  // a stored block's header: mode, 0, 0, 0
constexpr uint32_t kMinChunkElems = 1024;
constexpr uint32_t kMaxChunkElems = 4096;   // a lane's 16 groups stay in an encoder's registers
constexpr uint64_t kMaxCount = 1ull << 48;  // keeps every offset computation far from overflow

// The format's one parameter.
struct Params {
  uint32_t chunkElems;  // 1024, 2048 or 4096
};

CCLZ_HD bool isSupportedDtype(int dtype) {
  return dtype == cclzBfloat16 || dtype == cclzFloat16 || dtype == cclzFloat32;
}

CCLZ_HD bool isPowerOfTwo(uint64_t x) { return x && !(x & (x - 1)); }

// True if chunkElems is one the format allows.
CCLZ_HD bool validChunkElems(uint32_t chunkElems) {
  return isPowerOfTwo(chunkElems) && chunkElems >= kMinChunkElems && chunkElems <= kMaxChunkElems;
}
CCLZ_HD bool validParams(const Params& p) { return validChunkElems(p.chunkElems); }

// ---- Frame layout. ----
struct Layout {
  uint64_t numChunks;
  uint64_t tableOffset;   // numChunks x uint64: end of each chunk block, relative to blocksOffset
  uint64_t planeAOffset;  // count bytes
  uint64_t planeBOffset;  // fp32 only: count x uint16
  uint64_t blocksOffset;  // chunk blocks, back to back
};

CCLZ_HD Layout frameLayout(int dtype, uint64_t count, uint32_t chunkElems) {
  Layout l;
  l.numChunks = (count + chunkElems - 1) / chunkElems;
  l.tableOffset = kFrameHeaderBytes;
  l.planeAOffset = alignUp(l.tableOffset + 8 * l.numChunks, 16);
  l.planeBOffset = alignUp(l.planeAOffset + count, 16);
  const uint64_t planeB = dtype == cclzFloat32 ? 2 * count : 0;
  l.blocksOffset = alignUp(l.planeBOffset + planeB, 16);
  return l;
}

// Largest chunk block: stored mode, padded.
CCLZ_HD uint64_t maxBlockBytes(uint64_t n) { return alignUp(kBlockHeaderBytes + n, kBlockAlign); }

// Checks the lossless fields of a header that passed checkFrameHeader: the version byte is the
// lossless format's (kLosslessFrameVersion), every codec parameter byte is 0.
CCLZ_HD uint32_t checkLosslessHeader(const FrameHeader& h) {
  if (h.version != kLosslessFrameVersion) return kFrameBadVersion;
  if (h.codec != cclzCodecLossless || !isSupportedDtype(h.dtype) || h.flags != 0)
    return kFrameBadField;
  if (h.count > kMaxCount || !validChunkElems(h.chunkElems)) return kFrameBadField;
  for (int i = 0; i < 8; ++i)
    if (h.params[i] != 0) return kFrameBadField;
  const Layout l = frameLayout(h.dtype, h.count, h.chunkElems);
  if (h.numChunks != l.numChunks) return kFrameBadField;
  if (h.frameBytes < l.blocksOffset + kBlockAlign * l.numChunks) return kFrameTruncated;
  return kFrameOk;
}

}  // namespace cclz::lossless

namespace cclz::lossless {

constexpr uint32_t kLanes = 32;         // streams per chunk: one per lane of a warp
constexpr uint32_t kTables = 8;         // static codes per dtype family
constexpr uint32_t kCodeBits = 10;      // longest code: the decode table has 2^10 entries
constexpr uint32_t kEscapeBits = 8;     // the escaped symbol follows its escape code
constexpr uint32_t kMaxEscapeCode = 8;  // so a symbol never takes more than 16 bits
constexpr uint32_t kMaxOffsets = 64;    // the widest family's D
constexpr uint32_t kHeaderBytes = 8;    // coded block: mode, table, top, width, base (uint16), 0, 0
constexpr uint32_t kMaxWidth = 16;      // size deltas are at most 16 bits wide
constexpr uint32_t kEscapeFlag = 0x80;  // block byte 1: the chunk has escapes

// The offsets D a family codes directly (index D of its code is the escape).
CCLZ_HD uint32_t familyOffsets(int dtype) { return dtype == cclzFloat16 ? 64u : 32u; }

// bf16 and fp32 code the 8-bit exponent; fp16 codes bits 14..7 (5 exponent bits and the top 3
// mantissa bits), so that its sign goes to plane A and offsets below the top are meaningful.
CCLZ_HD int family(int dtype) { return dtype == cclzFloat16 ? 1 : 0; }

// The code lengths of both families, one list each (tables.h).
struct Lengths {
  uint8_t exp8[kTables][33];
  uint8_t fp16[kTables][65];
};

// Everything the coders need, derived from the lengths at compile time (host constants and
// __device__ arrays alike), indexed [family][table][offset index].
struct alignas(16) Codes {  // 16-byte aligned: decode tables are copied as vectors
  // Encoder: bit-reversed canonical code in bits 0..15, its length in bits 16..23.
  uint32_t code[2][kTables][kMaxOffsets + 1];
  // Encoder's table choice: the bits each index costs under all 8 codes (the escape's 8 symbol
  // bits included), four 32-bit words of two 16-bit fields: word w holds codes 2w and 2w+1.
  uint32_t cost[2][kMaxOffsets + 1][4];
  // Decoder, indexed by the next 10 stream bits (first bit least significant):
  //   bits 0..4 the bits consumed (code length, +8 for an escape), bits 8..13 the offset d,
  //   bit 15 set for the escape (then bits 8..13 are 0 and the symbol follows the code).
  uint16_t decode[2][kTables][1u << kCodeBits];
};

constexpr uint32_t kEntryEscape = 0x8000u;
CCLZ_HD uint32_t entryBits(uint32_t e) { return e & 0x1Fu; }
CCLZ_HD uint32_t entryOffset(uint32_t e) { return (e >> 8) & 0x3Fu; }
CCLZ_HD bool entryIsEscape(uint32_t e) { return (e & kEntryEscape) != 0; }

CCLZ_HD constexpr uint32_t reverseBitsConst(uint32_t v, uint32_t bits) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < bits; ++i) r |= ((v >> i) & 1u) << (bits - 1 - i);
  return r;
}

// Canonical codes of one static code (DEFLATE's numbering by (length, index)), bit-reversed
// because streams are written least significant bit first.
CCLZ_HD constexpr void fillCode(const uint8_t* lengths, uint32_t offsets, int fam, int t,
                                Codes& c) {
  const uint32_t symbols = offsets + 1;
  uint32_t count[kCodeBits + 1] = {};
  for (uint32_t s = 0; s < symbols; ++s) ++count[lengths[s]];
  uint32_t next[kCodeBits + 1] = {};
  uint32_t code = 0;
  for (uint32_t len = 1; len <= kCodeBits; ++len) {
    code = (code + (len > 1 ? count[len - 1] : 0)) << 1;
    next[len] = code;
  }
  for (uint32_t s = 0; s < symbols; ++s) {
    const uint32_t len = lengths[s];
    const uint32_t rev = reverseBitsConst(next[len]++, len);
    c.code[fam][t][s] = rev | (len << 16);
    const bool escape = s == offsets;
    const uint32_t cost = len + (escape ? kEscapeBits : 0);
    c.cost[fam][s][t / 2] |= cost << (16 * (t % 2));
    const uint32_t entry = escape ? (kEntryEscape | cost) : ((s << 8) | cost);
    for (uint32_t i = rev; i < (1u << kCodeBits); i += 1u << len)
      c.decode[fam][t][i] = static_cast<uint16_t>(entry);
  }
}

CCLZ_HD constexpr Codes makeCodes() {
  constexpr Lengths lengths{CCLZ_LOSSLESS_EXP8_LENGTHS, CCLZ_LOSSLESS_FP16_LENGTHS};
  Codes c{};
  for (int t = 0; t < static_cast<int>(kTables); ++t) {
    fillCode(lengths.exp8[t], 32, 0, t, c);
    fillCode(lengths.fp16[t], 64, 1, t, c);
  }
  return c;
}

// ---- Chunk block, coded mode (docs/formats.md). ----
// [0] mode 1, [1] table (bits 0..2) | kEscapeFlag, [2] top, [3] width w of the size deltas,
// [4..5] base: the smallest lane size in bits, [6..7] 0, then 32 deltas of w bits (4w bytes),
// then the lane streams, bit-concatenated from lane 0.
CCLZ_HD uint32_t streamsOffset(uint32_t width) { return kHeaderBytes + 4 * width; }

// Bits needed to write v (0 for 0).
CCLZ_HD uint32_t bitWidth(uint32_t v) {
  uint32_t w = 0;
  while (v >> w) ++w;
  return w;
}

// Symbols of lane l in a chunk of n elements: its groups are l, l+32, l+64, ...
CCLZ_HD uint32_t laneSymbols(uint32_t n, uint32_t lane) {
  const uint32_t groups = (n + kGroup - 1) / kGroup;
  if (lane >= groups) return 0;
  const uint32_t mine = (groups - lane + kLanes - 1) / kLanes;
  uint32_t symbols = mine * kGroup;
  if ((groups - 1) % kLanes == lane) symbols -= groups * kGroup - n;  // the last group is short
  return symbols;
}

}  // namespace cclz::lossless
