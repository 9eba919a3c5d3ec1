// The lossless format (docs/formats.md, "Lossless payload"), written once for the CPU reference
// (ref.cpp) and the kernels (kernels.cu): element splitting, frame layout, the code construction
// and the chunk-block header. Nothing here allocates or throws.
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "codec/frame.h"
#include "common/hd.h"

namespace cclz::lossless {

constexpr int kGroup = 8;  // symbols of consecutive elements that go to one stream
constexpr int kMaxSymbols = 256;
constexpr int kMinCodeLength = 8;  // 256 symbols must fit
constexpr int kMaxCodeLength = 12;
constexpr int kModeStored = 0;  // chunk block carries the symbol bytes as they are
constexpr int kModeHuffman = 1;
constexpr uint32_t kBlockAlign = 16;  // chunk blocks start and end 16-byte aligned
constexpr uint32_t kBlockHeaderBytes = 4;

struct Params {
  uint32_t chunkElems;     // power of two
  uint32_t log2Streams;    // version 1: streams per chunk = 1 << log2Streams; version 2: 0
  uint32_t maxCodeLength;  // version 1: 8..12; version 2: 0 (its codes are static)
  uint32_t version = 1;    // payload version, the header's version byte: 1 or 2
};

// ---- Elements: each value is split into an 8-bit symbol (entropy coded) and raw bits. ----
// bf16: symbol = exponent; plane A = sign<<7 | mantissa[6:0].
// fp16: symbol = high byte (sign, exponent, mantissa[9:8]); plane A = mantissa[7:0].
//       Its 5-bit exponent is not byte aligned; coding the whole high byte costs nothing extra,
//       since sign and top mantissa bits are near-uniform and the code adapts per chunk.
// fp32: symbol = exponent; plane A = sign<<7 | mantissa[22:16]; plane B = mantissa[15:0].

CCLZ_HD uint32_t bf16Symbol(uint16_t v) { return (v >> 7) & 0xFFu; }
CCLZ_HD uint32_t bf16PlaneA(uint16_t v) { return ((v >> 8) & 0x80u) | (v & 0x7Fu); }
CCLZ_HD uint16_t bf16Join(uint32_t sym, uint32_t a) {
  return static_cast<uint16_t>(((a & 0x80u) << 8) | (sym << 7) | (a & 0x7Fu));
}
CCLZ_HD uint32_t fp16Symbol(uint16_t v) { return v >> 8; }
CCLZ_HD uint32_t fp16PlaneA(uint16_t v) { return v & 0xFFu; }
CCLZ_HD uint16_t fp16Join(uint32_t sym, uint32_t a) {
  return static_cast<uint16_t>((sym << 8) | a);
}
CCLZ_HD uint32_t fp32Symbol(uint32_t v) { return (v >> 23) & 0xFFu; }
CCLZ_HD uint32_t fp32PlaneA(uint32_t v) { return ((v >> 24) & 0x80u) | ((v >> 16) & 0x7Fu); }
CCLZ_HD uint32_t fp32PlaneB(uint32_t v) { return v & 0xFFFFu; }
CCLZ_HD uint32_t fp32Join(uint32_t sym, uint32_t a, uint32_t b) {
  return ((a & 0x80u) << 24) | (sym << 23) | ((a & 0x7Fu) << 16) | b;
}

CCLZ_HD bool isSupportedDtype(int dtype) {
  return dtype == cclzBfloat16 || dtype == cclzFloat16 || dtype == cclzFloat32;
}

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

constexpr uint32_t kMinChunkElems = 1024;
constexpr uint32_t kMaxChunkElems = 1u << 16;  // a chunk and its block fit in shared memory
constexpr uint32_t kMinStreamSymbols = 64;
constexpr uint32_t kMaxStreamSymbols = 4096;
constexpr uint64_t kMaxCount = 1ull << 48;  // keeps every offset computation far from overflow

CCLZ_HD bool isPowerOfTwo(uint64_t x) { return x && !(x & (x - 1)); }

// True if the parameters are ones the format allows (docs/formats.md). Version 2 has only its
// chunk size (a power of two in [1024, 4096]); its header params bytes are all 0.
CCLZ_HD bool validParams(const Params& p) {
  if (p.version == 2)
    return isPowerOfTwo(p.chunkElems) && p.chunkElems >= kMinChunkElems && p.chunkElems <= 4096 &&
           p.log2Streams == 0 && p.maxCodeLength == 0;
  if (p.version != 1) return false;
  if (!isPowerOfTwo(p.chunkElems) || p.chunkElems < kMinChunkElems || p.chunkElems > kMaxChunkElems)
    return false;
  if (p.log2Streams > 16) return false;
  const uint32_t perStream = p.chunkElems >> p.log2Streams;
  if (perStream < kMinStreamSymbols || perStream > kMaxStreamSymbols) return false;
  return p.maxCodeLength >= kMinCodeLength && p.maxCodeLength <= kMaxCodeLength;
}

CCLZ_HD Params headerParams(const FrameHeader& h) {
  return Params{h.chunkElems, h.params[0], h.params[1], h.version};
}

// Checks the lossless fields of a header that passed checkFrameHeader.
CCLZ_HD uint32_t checkLosslessHeader(const FrameHeader& h) {
  if (h.codec != cclzCodecLossless || !isSupportedDtype(h.dtype) || h.flags != 0)
    return kFrameBadField;
  if (h.count > kMaxCount || !validParams(headerParams(h))) return kFrameBadField;
  for (int i = 2; i < 8; ++i)
    if (h.params[i] != 0) return kFrameBadField;
  const Layout l = frameLayout(h.dtype, h.count, h.chunkElems);
  if (h.numChunks != l.numChunks) return kFrameBadField;
  if (h.frameBytes < l.blocksOffset + kBlockAlign * l.numChunks) return kFrameTruncated;
  return kFrameOk;
}

// ---- Streams: group g (elements [8g, 8g+8) of the chunk) goes to stream g mod S. ----
CCLZ_HD uint32_t streamSymbols(uint32_t n, uint32_t streams, uint32_t s) {
  const uint32_t groups = (n + kGroup - 1) / kGroup;
  if (s >= groups) return 0;
  const uint32_t mine = (groups - s + streams - 1) / streams;
  uint32_t symbols = mine * kGroup;
  if ((groups - 1) % streams == s) symbols -= groups * kGroup - n;  // the last group is short
  return symbols;
}

// ---- Chunk block header (Huffman mode). ----
// [0] mode, [1] first symbol, [2] last - first, [3] 0, then one 4-bit code length per symbol in
// [first, last] (low nibble first; 0 = absent), then uint16 stream sizes at a 2-byte boundary.
CCLZ_HD uint32_t lengthTableBytes(uint32_t span) { return (span + 2) / 2; }  // span+1 nibbles
CCLZ_HD uint32_t streamSizesOffset(uint32_t span) {
  return static_cast<uint32_t>(alignUp(kBlockHeaderBytes + lengthTableBytes(span), 2));
}
CCLZ_HD uint32_t streamDataOffset(uint32_t span, uint32_t streams) {
  return streamSizesOffset(span) + 2 * streams;
}

// ---- Code construction. ----
// Order used to rank symbols: by count, then by symbol value (a total order, so any sorting
// algorithm, serial on the CPU or by parallel ranking on the GPU, yields the same sequence).
CCLZ_HD bool rankBefore(uint32_t countA, uint32_t symA, uint32_t countB, uint32_t symB) {
  return countA < countB || (countA == countB && symA < symB);
}

// Optimal code lengths for weights sorted ascending, computed in place (Moffat and Katajainen's
// three-pass method: parent links, internal depths, leaf depths). On return w[i] is the length of
// the i-th lightest symbol; lengths do not increase with i. Requires n >= 2.
CCLZ_HD void huffmanLengthsInPlace(uint32_t* w, int n) {
  // Pass 1: build the tree left to right. Internal node `next` takes the two lightest of the
  // remaining leaves (from `leaf`) and internal nodes (from `root`); a consumed internal node
  // stores its parent's index.
  w[0] += w[1];
  int root = 0, leaf = 2;
  for (int next = 1; next < n - 1; ++next) {
    for (int pick = 0; pick < 2; ++pick) {
      const bool takeInternal = leaf >= n || (root < next && w[root] < w[leaf]);
      uint32_t weight;
      if (takeInternal) {
        weight = w[root];
        w[root++] = static_cast<uint32_t>(next);
      } else {
        weight = w[leaf++];
      }
      w[next] = pick == 0 ? weight : w[next] + weight;
    }
  }
  // Pass 2: depth of each internal node from its parent, right to left (the root is n-2).
  w[n - 2] = 0;
  for (int i = n - 3; i >= 0; --i) w[i] = w[w[i]] + 1;
  // Pass 3: leaf depths. At each depth, `avail` slots exist; internal nodes take `used` of them
  // and leaves the rest, assigned from the heaviest leaf (index n-1) down.
  int avail = 1, used = 0, depth = 0, next = n - 1;
  root = n - 2;
  while (avail > 0) {
    while (root >= 0 && static_cast<int>(w[root]) == depth) {
      ++used;
      --root;
    }
    while (avail > used) {
      w[next--] = static_cast<uint32_t>(depth);
      --avail;
    }
    avail = 2 * used;
    ++depth;
    used = 0;
  }
}

// Bounds code lengths to maxLen keeping a prefix code: lengths past the bound are cut to it, then
// while the Kraft sum exceeds one, one code of the longest length is removed and a shorter leaf
// is split in two (each step lowers the sum by one unit of 2^-maxLen). countOfLength[1..maxLen]
// is updated in place; entries past maxLen are folded in first.
CCLZ_HD void limitLengths(uint32_t* countOfLength, int longest, int maxLen) {
  for (int len = maxLen + 1; len <= longest; ++len) {
    countOfLength[maxLen] += countOfLength[len];
    countOfLength[len] = 0;
  }
  uint64_t kraft = 0;
  for (int len = 1; len <= maxLen; ++len)
    kraft += static_cast<uint64_t>(countOfLength[len]) << (maxLen - len);
  while (kraft > (1ull << maxLen)) {
    --countOfLength[maxLen];
    for (int len = maxLen - 1; len >= 1; --len) {
      if (countOfLength[len] > 0) {
        --countOfLength[len];
        countOfLength[len + 1] += 2;
        break;
      }
    }
    --kraft;
  }
}

// Code lengths for the n symbols present, given in rank order (ascending count, see rankBefore):
// optimal lengths, then bounded to maxLen. weights is scratch for n values. Writes length[sym]
// for the listed symbols only. A lone symbol gets length 1.
CCLZ_HD void codeLengthsFromRanked(const uint8_t* ranked, const uint32_t* histogram, int n,
                                   int maxLen, uint32_t* weights, uint8_t* length) {
  if (n == 1) {
    length[ranked[0]] = 1;
    return;
  }
  for (int i = 0; i < n; ++i) weights[i] = histogram[ranked[i]];
  huffmanLengthsInPlace(weights, n);
  // Lengths past maxLen are only counted, in one slot: limitLengths cuts them to maxLen anyway.
  uint32_t countOfLength[kMaxCodeLength + 2] = {};
  for (int i = 0; i < n; ++i)
    ++countOfLength[weights[i] > static_cast<uint32_t>(maxLen) ? maxLen + 1 : weights[i]];
  limitLengths(countOfLength, maxLen + 1, maxLen);
  // The lightest symbols take the longest codes.
  int i = 0;
  for (int len = maxLen; len >= 1; --len)
    for (uint32_t k = 0; k < countOfLength[len]; ++k)
      length[ranked[i++]] = static_cast<uint8_t>(len);
}

// Canonical code of each symbol in [first, first+span] given its length (0 = absent): codes are
// numbered by (length, symbol) as in DEFLATE and stored bit-reversed, because streams are
// written and read least-significant bit first.
CCLZ_HD uint32_t reverseBits(uint32_t v, int bits) {
#if defined(__CUDA_ARCH__)
  return __brev(v) >> (32 - bits);
#endif
  uint32_t r = 0;
  for (int i = 0; i < bits; ++i) r |= ((v >> i) & 1u) << (bits - 1 - i);
  return r;
}

CCLZ_HD void canonicalCodes(const uint8_t* length, int first, int span, uint16_t* code) {
  uint32_t countOfLength[kMaxCodeLength + 1] = {};
  for (int s = first; s <= first + span; ++s) ++countOfLength[length[s]];
  countOfLength[0] = 0;
  uint32_t nextCode[kMaxCodeLength + 2] = {};
  uint32_t c = 0;
  for (int len = 1; len <= kMaxCodeLength; ++len) {
    c = (c + countOfLength[len - 1]) << 1;
    nextCode[len] = c;
  }
  for (int s = first; s <= first + span; ++s) {
    const int len = length[s];
    code[s] = len ? static_cast<uint16_t>(reverseBits(nextCode[len]++, len)) : 0;
  }
}

// Fills a decode table of 2^maxLen entries: entry = length << 8 | symbol, 0 where no code
// begins with those bits. Returns false if the lengths do not form a prefix code.
CCLZ_HD bool buildDecodeTable(const uint8_t* length, int first, int span, int maxLen,
                              uint16_t* table) {
  uint16_t code[kMaxSymbols];
  uint64_t kraft = 0;
  for (int s = first; s <= first + span; ++s)
    if (length[s]) kraft += 1ull << (maxLen - length[s]);
  if (kraft == 0 || kraft > (1ull << maxLen)) return false;
  canonicalCodes(length, first, span, code);
  for (uint32_t i = 0; i < (1u << maxLen); ++i) table[i] = 0;
  for (int s = first; s <= first + span; ++s) {
    const int len = length[s];
    if (!len) continue;
    for (uint32_t i = code[s]; i < (1u << maxLen); i += 1u << len)
      table[i] = static_cast<uint16_t>((len << 8) | s);
  }
  return true;
}

}  // namespace cclz::lossless
