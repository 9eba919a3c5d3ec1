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

// One lossless chunk block: its mode (0 stored, 1 coded, 2 constant) and where it lies.
struct BlockView {
  uint8_t mode;
  uint64_t offset, bytes;  // in the frame
};

inline BlockView viewBlock(const uint8_t* f, const FrameView& v, uint32_t k) {
  BlockView b;
  const uint64_t begin = k ? v.chunkEnds[k - 1] : 0;
  b.offset = v.blocksOffset + begin;
  b.bytes = v.chunkEnds[k] - begin;
  b.mode = f[b.offset];
  return b;
}

}  // namespace cclz::test
