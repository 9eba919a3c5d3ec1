#include "codec/frame.h"

namespace cclz {

const char* frameErrorText(uint32_t error) {
  switch (error) {
    case kFrameOk:
      return "frame is valid";
    case kFrameTruncated:
      return "frame is truncated: it declares more bytes than were given";
    case kFrameBadMagic:
      return "not a cclz frame (bad magic number)";
    case kFrameBadVersion:
      return "frame format version is not supported by this build";
    case kFrameBadChecksum:
      return "frame header checksum does not match (corrupt header)";
    case kFrameBadField:
      return "frame header has a field out of range";
    case kFrameMismatch:
      return "frame does not match the call (codec, dtype, element count or chunking differ)";
    case kFrameBadChunkTable:
      return "frame chunk table is corrupt (offsets out of order or range)";
    case kFrameBadChunk:
      return "a chunk of the frame does not decode (corrupt payload)";
    default:
      return "unknown frame error";
  }
}

}  // namespace cclz
