// Reads a frame's fields at the byte offsets docs/formats.md gives, without src/'s structs, so
// that the tests pin the format rather than whatever the code happens to do.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "cclz/cclz.h"

namespace cclz::test {

template <typename T>
T readLE(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);  // little-endian hosts only
  return v;
}

template <typename T>
void writeLE(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

inline uint32_t fnv1a32(const uint8_t* p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

inline uint64_t align16(uint64_t x) { return (x + 15) / 16 * 16; }

// Header byte offsets.
enum HeaderOffset : size_t {
  kOffMagic = 0,
  kOffVersion = 4,
  kOffCodec = 5,
  kOffDtype = 6,
  kOffFlags = 7,
  kOffCount = 8,
  kOffFrameBytes = 16,
  kOffChunkElems = 24,
  kOffNumChunks = 28,
  kOffParams = 32,
  kOffReserved = 40,
  kOffChecksum = 60,
  kHeaderBytes = 64
};

// Recomputes the checksum after a test edits the header.
inline void fixChecksum(uint8_t* frame) {
  writeLE<uint32_t>(frame + kOffChecksum, fnv1a32(frame, kOffChecksum));
}

struct FrameView {
  uint8_t version, codec, dtype, flags;
  uint64_t count, frameBytes;
  uint32_t chunkElems, numChunks, checksum;
  uint8_t params[8];
  // Lossless sections.
  uint64_t planeAOffset, planeBOffset, blocksOffset;
  std::vector<uint64_t> chunkEnds;  // end of each chunk block, relative to blocksOffset
};

inline FrameView viewFrame(const uint8_t* f) {
  FrameView v{};
  v.version = f[kOffVersion];
  v.codec = f[kOffCodec];
  v.dtype = f[kOffDtype];
  v.flags = f[kOffFlags];
  v.count = readLE<uint64_t>(f + kOffCount);
  v.frameBytes = readLE<uint64_t>(f + kOffFrameBytes);
  v.chunkElems = readLE<uint32_t>(f + kOffChunkElems);
  v.numChunks = readLE<uint32_t>(f + kOffNumChunks);
  std::memcpy(v.params, f + kOffParams, 8);
  v.checksum = readLE<uint32_t>(f + kOffChecksum);
  if (v.codec == cclzCodecLossless) {
    v.planeAOffset = align16(kHeaderBytes + 8ull * v.numChunks);
    v.planeBOffset = align16(v.planeAOffset + v.count);
    v.blocksOffset = align16(v.planeBOffset + (v.dtype == cclzFloat32 ? 2 * v.count : 0));
    for (uint32_t k = 0; k < v.numChunks; ++k)
      v.chunkEnds.push_back(readLE<uint64_t>(f + kHeaderBytes + 8ull * k));
  }
  return v;
}

// One lossless chunk block: its mode (0 stored; 1 Huffman in payload version 1, coded in version
// 2; 2 constant in version 2) and, for a version 1 Huffman block, its code lengths.
struct BlockView {
  uint8_t mode;
  uint64_t offset, bytes;  // in the frame
  int first = 0, span = 0;
  uint8_t length[256] = {};
  int symbolsCoded() const {
    int n = 0;
    for (int s = 0; s < 256; ++s) n += length[s] != 0;
    return n;
  }
  int longest() const {
    int m = 0;
    for (int s = 0; s < 256; ++s) m = length[s] > m ? length[s] : m;
    return m;
  }
};

inline BlockView viewBlock(const uint8_t* f, const FrameView& v, uint32_t k) {
  BlockView b;
  const uint64_t begin = k ? v.chunkEnds[k - 1] : 0;
  b.offset = v.blocksOffset + begin;
  b.bytes = v.chunkEnds[k] - begin;
  const uint8_t* p = f + b.offset;
  b.mode = p[0];
  // NOTE: version 2's coded blocks hold other fields at bytes 1..2 (code, top), and a corrupt
  // version 1 block may claim symbols past 255: only the lengths of symbols 0..255 are read.
  if (b.mode == 1 && v.version == 1) {
    b.first = p[1];
    b.span = p[2];
    for (int j = 0; j <= b.span && b.first + j < 256; ++j)
      b.length[b.first + j] = (p[4 + j / 2] >> (4 * (j % 2))) & 0xF;
  }
  return b;
}

}  // namespace cclz::test
