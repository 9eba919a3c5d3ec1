// CPU reference of the lossless codec: the definition of its bytes (docs/formats.md, "Lossless
// payload"). The kernels produce exactly these bytes.
#include "codec/lossless/ref.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "common/error.h"

namespace cclz::lossless {
namespace {

constexpr Codes kCodes = makeCodes();

// ORs values into a zeroed byte buffer at any bit position, least significant bit first.
void putBits(uint8_t* out, uint64_t bitPos, uint32_t value, uint32_t bits) {
  for (uint32_t i = 0; i < bits; ++i, ++bitPos)
    out[bitPos / 8] |= static_cast<uint8_t>(((value >> i) & 1u) << (bitPos % 8));
}

// 24 bits of the block from bitPos on; bytes past the block read as zero.
uint32_t peekBits(const uint8_t* block, uint64_t blockBytes, uint64_t bitPos) {
  uint32_t v = 0;
  for (uint64_t b = 0; b < 3; ++b) {
    const uint64_t byte = bitPos / 8 + b;
    if (byte < blockBytes) v |= static_cast<uint32_t>(block[byte]) << (8 * b);
  }
  return v >> (bitPos % 8);
}

// Calls f(i) for the chunk elements of lane `lane`, in stream order.
template <typename F>
void forEachInLane(uint32_t n, uint32_t lane, F&& f) {
  for (uint32_t g = lane; g * kGroup < n; g += kLanes)
    for (uint32_t i = g * kGroup; i < std::min<uint32_t>(n, g * kGroup + kGroup); ++i) f(i);
}

uint32_t costOf(int fam, uint32_t index, uint32_t table) {
  return (kCodes.cost[fam][index][table / 2] >> (16 * (table % 2))) & 0xFFFFu;
}

// Writes one chunk's block at out (capacity maxBlockBytes(n), zeroed); returns its padded size.
uint32_t encodeChunkBlock(const uint8_t* symbols, uint32_t n, int dtype, uint8_t* out) {
  const int fam = family(dtype);
  const uint32_t offsets = familyOffsets(dtype);
  uint32_t top = 0, bottom = 255;
  for (uint32_t i = 0; i < n; ++i) {
    top = std::max<uint32_t>(top, symbols[i]);
    bottom = std::min<uint32_t>(bottom, symbols[i]);
  }
  if (top == bottom) {  // one symbol (zeros, for instance): the block names it
    out[0] = kModeConstant;
    out[1] = static_cast<uint8_t>(top);
    return kBlockAlign;
  }
  auto indexOf = [&](uint8_t s) { return std::min<uint32_t>(top - s, offsets); };

  // The bits of every lane under every code; the chunk takes the cheapest code (lowest on ties).
  uint32_t laneBits[kTables][kLanes] = {};
  bool escapes = false;
  for (uint32_t lane = 0; lane < kLanes; ++lane)
    forEachInLane(n, lane, [&](uint32_t i) {
      const uint32_t index = indexOf(symbols[i]);
      escapes |= index == offsets;
      for (uint32_t t = 0; t < kTables; ++t) laneBits[t][lane] += costOf(fam, index, t);
    });
  uint32_t table = 0;
  uint64_t best = UINT64_MAX;
  for (uint32_t t = 0; t < kTables; ++t) {
    uint64_t total = 0;
    for (uint32_t lane = 0; lane < kLanes; ++lane) total += laneBits[t][lane];
    if (total < best) best = total, table = t;
  }
  const uint32_t* bits = laneBits[table];
  const uint32_t base = *std::min_element(bits, bits + kLanes);
  const uint32_t width = bitWidth(*std::max_element(bits, bits + kLanes) - base);
  const uint64_t coded = streamsOffset(width) + (best + 7) / 8;
  if (coded >= kBlockHeaderBytes + n) {  // the code would not save anything: store
    out[0] = kModeStored;
    std::memcpy(out + kBlockHeaderBytes, symbols, n);
    return static_cast<uint32_t>(alignUp(kBlockHeaderBytes + n, kBlockAlign));
  }
  out[0] = kModeHuffman;
  out[1] = static_cast<uint8_t>(table | (escapes ? kEscapeFlag : 0));
  out[2] = static_cast<uint8_t>(top);
  out[3] = static_cast<uint8_t>(width);
  out[4] = static_cast<uint8_t>(base);
  out[5] = static_cast<uint8_t>(base >> 8);
  for (uint32_t lane = 0; lane < kLanes; ++lane)
    putBits(out, 8 * kHeaderBytes + lane * width, bits[lane] - base, width);
  uint64_t pos = 8ull * streamsOffset(width);
  for (uint32_t lane = 0; lane < kLanes; ++lane)
    forEachInLane(n, lane, [&](uint32_t i) {
      const uint32_t index = indexOf(symbols[i]);
      const uint32_t code = kCodes.code[fam][table][index];
      const uint32_t len = code >> 16;
      putBits(out, pos, code & 0xFFFFu, len);
      pos += len;
      if (index == offsets) {
        putBits(out, pos, symbols[i], kEscapeBits);
        pos += kEscapeBits;
      }
    });
  return static_cast<uint32_t>(alignUp(coded, kBlockAlign));
}

// Decodes one chunk block into symbols[n]. Returns kFrameOk or kFrameBadChunk.
uint32_t decodeChunkBlock(const uint8_t* block, uint64_t blockBytes, uint32_t n, int dtype,
                          uint8_t* symbols) {
  if (blockBytes < kBlockHeaderBytes) return kFrameBadChunk;
  if (block[0] == kModeStored) {
    if (blockBytes < kBlockHeaderBytes + n) return kFrameBadChunk;
    std::memcpy(symbols, block + kBlockHeaderBytes, n);
    return kFrameOk;
  }
  if (block[0] == kModeConstant) {
    if (blockBytes != kBlockAlign || block[2] || block[3]) return kFrameBadChunk;
    std::memset(symbols, block[1], n);
    return kFrameOk;
  }
  if (block[0] != kModeHuffman || blockBytes < kHeaderBytes) return kFrameBadChunk;
  const uint32_t table = block[1] & 0x7u, top = block[2], width = block[3];
  const bool escapes = (block[1] & kEscapeFlag) != 0;
  if ((block[1] & 0x78u) || width > kMaxWidth || block[6] || block[7]) return kFrameBadChunk;
  if (streamsOffset(width) > blockBytes) return kFrameBadChunk;
  const uint32_t base = block[4] | (block[5] << 8);
  uint32_t bits[kLanes];
  uint64_t total = 0;
  for (uint32_t lane = 0; lane < kLanes; ++lane) {
    const uint32_t field =
        width ? peekBits(block, blockBytes, 8 * kHeaderBytes + lane * width) & ((1u << width) - 1)
              : 0;
    bits[lane] = base + field;
    total += bits[lane];
  }
  if (alignUp(streamsOffset(width) + (total + 7) / 8, kBlockAlign) != blockBytes)
    return kFrameBadChunk;

  const int fam = family(dtype);
  const uint16_t* decode = kCodes.decode[fam][table];
  uint64_t pos = 8ull * streamsOffset(width);
  for (uint32_t lane = 0; lane < kLanes; ++lane) {
    const uint64_t start = pos;
    bool ok = true;
    forEachInLane(n, lane, [&](uint32_t i) {
      const uint32_t peek = peekBits(block, blockBytes, pos);
      const uint32_t e = decode[peek & ((1u << kCodeBits) - 1)];
      if (entryIsEscape(e)) {
        ok &= escapes;  // the header promised none
        symbols[i] = static_cast<uint8_t>(peek >> (entryBits(e) - kEscapeBits));
      } else {
        ok &= entryOffset(e) <= top;  // no symbol lies below zero
        symbols[i] = static_cast<uint8_t>(top - entryOffset(e));
      }
      pos += entryBits(e);
    });
    if (!ok || pos - start != bits[lane]) return kFrameBadChunk;
  }
  return kFrameOk;
}

template <int D>
void splitChunk(const void* src, uint64_t first, uint32_t n, uint8_t* symbols, uint8_t* planeA,
                uint8_t* planeB) {
  using E = Elements<D>;
  const auto* in = static_cast<const typename E::Word*>(src) + first;
  for (uint32_t i = 0; i < n; ++i) {
    symbols[i] = static_cast<uint8_t>(E::symbol(in[i]));
    planeA[first + i] = static_cast<uint8_t>(E::planeA(in[i]));
    if constexpr (E::kHasPlaneB) {
      const uint32_t b = E::planeB(in[i]);
      planeB[2 * (first + i)] = static_cast<uint8_t>(b);
      planeB[2 * (first + i) + 1] = static_cast<uint8_t>(b >> 8);
    }
  }
}

template <int D>
void joinChunk(const uint8_t* symbols, const uint8_t* planeA, const uint8_t* planeB, uint64_t first,
               uint32_t n, void* dst) {
  using E = Elements<D>;
  auto* out = static_cast<typename E::Word*>(dst) + first;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t b = 0;
    if constexpr (E::kHasPlaneB) b = planeB[2 * (first + i)] | (planeB[2 * (first + i) + 1] << 8);
    out[i] = E::join(symbols[i], planeA[first + i], b);
  }
}

void split(int dtype, const void* src, uint64_t first, uint32_t n, uint8_t* symbols,
           uint8_t* planeA, uint8_t* planeB) {
  if (dtype == cclzBfloat16) splitChunk<cclzBfloat16>(src, first, n, symbols, planeA, planeB);
  if (dtype == cclzFloat16) splitChunk<cclzFloat16>(src, first, n, symbols, planeA, planeB);
  if (dtype == cclzFloat32) splitChunk<cclzFloat32>(src, first, n, symbols, planeA, planeB);
}

void join(int dtype, const uint8_t* symbols, const uint8_t* planeA, const uint8_t* planeB,
          uint64_t first, uint32_t n, void* dst) {
  if (dtype == cclzBfloat16) joinChunk<cclzBfloat16>(symbols, planeA, planeB, first, n, dst);
  if (dtype == cclzFloat16) joinChunk<cclzFloat16>(symbols, planeA, planeB, first, n, dst);
  if (dtype == cclzFloat32) joinChunk<cclzFloat32>(symbols, planeA, planeB, first, n, dst);
}

// The frame's blocks, chunk table, planes and header, once encodeRef has checked the arguments.
uint64_t encodeFrame(const Params& p, int dtype, const void* src, uint64_t count, uint8_t* dst) {
  const Layout l = frameLayout(dtype, count, p.chunkElems);
  std::memset(dst, 0, l.blocksOffset);  // header, table and plane padding
  std::vector<uint8_t> symbols(p.chunkElems);
  uint64_t blocksEnd = 0;
  for (uint64_t k = 0; k < l.numChunks; ++k) {
    const uint64_t first = k * p.chunkElems;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(p.chunkElems, count - first));
    split(dtype, src, first, n, symbols.data(), dst + l.planeAOffset, dst + l.planeBOffset);
    uint8_t* block = dst + l.blocksOffset + blocksEnd;
    std::memset(block, 0, maxBlockBytes(n));
    blocksEnd += encodeChunkBlock(symbols.data(), n, dtype, block);
    std::memcpy(dst + l.tableOffset + 8 * k, &blocksEnd, 8);
  }
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kLosslessFrameVersion;
  h.codec = cclzCodecLossless;
  h.dtype = static_cast<uint8_t>(dtype);
  h.count = count;
  h.frameBytes = l.blocksOffset + blocksEnd;
  h.chunkElems = p.chunkElems;
  h.numChunks = static_cast<uint32_t>(l.numChunks);
  h.checksum = headerChecksum(h);
  std::memcpy(dst, &h, sizeof h);
  return h.frameBytes;
}

// The frame's chunks, once decodeRef has checked the header.
uint32_t decodeFrame(const FrameHeader& h, const uint8_t* src, int dtype, uint64_t count,
                     void* dst) {
  const Layout l = frameLayout(dtype, count, h.chunkElems);
  const uint64_t blocksBytes = h.frameBytes - l.blocksOffset;
  std::vector<uint8_t> symbols(h.chunkElems);
  uint64_t begin = 0;
  for (uint64_t k = 0; k < l.numChunks; ++k) {
    uint64_t end;
    std::memcpy(&end, src + l.tableOffset + 8 * k, 8);
    if (end < begin || end > blocksBytes || (end - begin) % kBlockAlign != 0)
      return kFrameBadChunkTable;
    if (k + 1 == l.numChunks && end != blocksBytes) return kFrameBadChunkTable;
    const uint64_t first = k * h.chunkElems;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(h.chunkElems, count - first));
    if (end - begin > maxBlockBytes(n)) return kFrameBadChunkTable;
    const uint32_t err =
        decodeChunkBlock(src + l.blocksOffset + begin, end - begin, n, dtype, symbols.data());
    if (err != kFrameOk) return err;
    join(dtype, symbols.data(), src + l.planeAOffset, src + l.planeBOffset, first, n, dst);
    begin = end;
  }
  return kFrameOk;
}

}  // namespace

uint64_t maxEncodedBytes(const Params& params, int dtype, uint64_t count) {
  const Layout l = frameLayout(dtype, count, params.chunkElems);
  // Every chunk block at its stored size: the symbols plus header and padding.
  return l.blocksOffset + count + l.numChunks * (kBlockHeaderBytes + kBlockAlign - 1);
}

uint64_t encodeRef(const Params& p, int dtype, const void* src, uint64_t count, uint8_t* dst,
                   uint64_t capacity) {
  CCLZ_REQUIRE(isSupportedDtype(dtype), cclzNotSupported,
               "the lossless codec takes bf16, fp16 or fp32");
  CCLZ_REQUIRE(validParams(p), cclzInvalidArgument, "invalid lossless codec parameters");
  CCLZ_REQUIRE(count <= kMaxCount, cclzInvalidArgument, "element count too large");
  CCLZ_REQUIRE(count == 0 || src, cclzInvalidArgument, "source is NULL");
  CCLZ_REQUIRE(dst, cclzInvalidArgument, "destination is NULL");
  CCLZ_REQUIRE(capacity >= maxEncodedBytes(p, dtype, count), cclzBufferTooSmall,
               "destination capacity is below the maximum encoded size");
  return encodeFrame(p, dtype, src, count, dst);
}

uint32_t decodeRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst) {
  if (!src || srcBytes < kFrameHeaderBytes) return kFrameTruncated;
  FrameHeader h;
  std::memcpy(&h, src, sizeof h);
  uint32_t err = checkFrameHeader(h, srcBytes);
  if (err == kFrameOk) err = checkFrameMatches(h, cclzCodecLossless, dtype, count);
  if (err == kFrameOk) err = checkLosslessHeader(h);
  if (err != kFrameOk) return err;
  return decodeFrame(h, src, dtype, count, dst);
}

}  // namespace cclz::lossless
