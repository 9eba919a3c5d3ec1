// The frame: a 64-byte header, then the codec's payload (docs/formats.md, "Frame").
// Everything here is shared by the CPU reference and the kernels.
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "common/hd.h"

namespace cclz {

constexpr uint32_t kFrameMagic = 0x5A4C4343u;  // "CCLZ" in little-endian byte order
constexpr uint8_t kFrameVersion = 1;
// The lossless codec's frames carry version 2 (docs/formats.md, "Lossless payload"); the other
// codecs' version 1.
constexpr uint8_t kLosslessFrameVersion = 2;

// The newest frame version a codec has; a decoder rejects later ones (kFrameBadVersion).
CCLZ_HD uint8_t newestFrameVersion(uint8_t codec) {
  return codec == cclzCodecLossless ? kLosslessFrameVersion : kFrameVersion;
}
constexpr uint32_t kFrameHeaderBytes = 64;

struct FrameHeader {
  uint32_t magic;
  uint8_t version;
  uint8_t codec;   // cclzCodecType_t
  uint8_t dtype;   // cclzDataType_t
  uint8_t flags;   // 0; reserved
  uint64_t count;  // elements
  uint64_t frameBytes;
  uint32_t chunkElems;  // lossless: power of two; none: 0
  uint32_t numChunks;
  uint8_t params[8];     // codec parameters (lossless: none, all 0)
  uint8_t reserved[20];  // zero
  uint32_t checksum;     // FNV-1a of bytes [0, 60)
};
static_assert(sizeof(FrameHeader) == kFrameHeaderBytes, "frame header is 64 bytes");

CCLZ_HD uint32_t fnv1a32(const uint8_t* p, uint32_t n) {
  uint32_t h = 2166136261u;
  for (uint32_t i = 0; i < n; ++i) h = (h ^ p[i]) * 16777619u;
  return h;
}

CCLZ_HD uint32_t headerChecksum(const FrameHeader& h) {
  return fnv1a32(reinterpret_cast<const uint8_t*>(&h), kFrameHeaderBytes - 4);
}

CCLZ_HD uint64_t alignUp(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

// Why a header was rejected; the host turns these into messages (frameErrorText).
enum FrameError : uint32_t {
  kFrameOk = 0,
  kFrameTruncated,  // fewer bytes than the header or the frame says
  kFrameBadMagic,
  kFrameBadVersion,
  kFrameBadChecksum,
  kFrameBadField,       // a header field out of range
  kFrameMismatch,       // codec/dtype/count/chunking differ from what the caller expects
  kFrameBadChunkTable,  // offsets not increasing or past the end
  kFrameBadChunk,       // a chunk's block does not decode
  kFrameNumErrors
};

// Checks what every frame must satisfy, whatever its codec: magic, version, checksum, and a size
// that fits the bytes available.
// `checksum` is headerChecksum(h), computed by the caller (kernels compute it in registers).
CCLZ_HD uint32_t checkFrameHeaderSum(const FrameHeader& h, uint32_t checksum,
                                     uint64_t availableBytes) {
  if (h.magic != kFrameMagic) return kFrameBadMagic;
  if (h.version < kFrameVersion || h.version > newestFrameVersion(h.codec)) return kFrameBadVersion;
  if (checksum != h.checksum) return kFrameBadChecksum;
  for (int i = 0; i < 20; ++i)
    if (h.reserved[i] != 0) return kFrameBadField;  // a later format, or corruption
  if (h.frameBytes < kFrameHeaderBytes) return kFrameBadField;
  if (h.frameBytes > availableBytes) return kFrameTruncated;
  return kFrameOk;
}

CCLZ_HD uint32_t checkFrameHeader(const FrameHeader& h, uint64_t availableBytes) {
  return checkFrameHeaderSum(h, headerChecksum(h), availableBytes);
}

// Checks that a valid header describes what the caller asked to decode.
CCLZ_HD uint32_t checkFrameMatches(const FrameHeader& h, int codec, int dtype, uint64_t count) {
  if (h.codec != codec || h.dtype != dtype || h.count != count) return kFrameMismatch;
  return kFrameOk;
}

const char* frameErrorText(uint32_t error);

}  // namespace cclz
