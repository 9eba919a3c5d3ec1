#include "codec/none/ref.h"

#include <cstring>

#include "codec/frame.h"
#include "common/dtype.h"
#include "common/error.h"

namespace cclz::none {

uint64_t maxEncodedBytes(int dtype, uint64_t count) {
  return kFrameHeaderBytes + count * dtypeSize(static_cast<cclzDataType_t>(dtype));
}

void writeHeader(int dtype, uint64_t count, uint8_t* dst) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kFrameVersion;
  h.codec = cclzCodecNone;
  h.dtype = static_cast<uint8_t>(dtype);
  h.count = count;
  h.frameBytes = maxEncodedBytes(dtype, count);
  h.checksum = headerChecksum(h);
  std::memcpy(dst, &h, sizeof h);
}

uint64_t encodeRef(int dtype, const void* src, uint64_t count, uint8_t* dst, uint64_t capacity) {
  const size_t esize = dtypeSize(static_cast<cclzDataType_t>(dtype));
  CCLZ_REQUIRE(esize != 0, cclzInvalidArgument, "unknown dtype");
  CCLZ_REQUIRE(count == 0 || src, cclzInvalidArgument, "source is NULL");
  CCLZ_REQUIRE(dst, cclzInvalidArgument, "destination is NULL");
  CCLZ_REQUIRE(capacity >= maxEncodedBytes(dtype, count), cclzBufferTooSmall,
               "destination capacity is below the maximum encoded size");
  writeHeader(dtype, count, dst);
  if (count) std::memcpy(dst + kFrameHeaderBytes, src, count * esize);
  return maxEncodedBytes(dtype, count);
}

uint32_t checkHeader(const FrameHeader& h) {
  if (h.codec != cclzCodecNone || dtypeSize(static_cast<cclzDataType_t>(h.dtype)) == 0 ||
      h.flags != 0 || h.count > (1ull << 48) || h.chunkElems != 0 || h.numChunks != 0)
    return kFrameBadField;
  for (uint8_t p : h.params)
    if (p != 0) return kFrameBadField;
  return h.frameBytes == maxEncodedBytes(h.dtype, h.count) ? kFrameOk : kFrameBadField;
}

uint32_t decodeRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst) {
  if (!src || srcBytes < kFrameHeaderBytes) return kFrameTruncated;
  FrameHeader h;
  std::memcpy(&h, src, sizeof h);
  uint32_t err = checkFrameHeader(h, srcBytes);
  if (err == kFrameOk) err = checkFrameMatches(h, cclzCodecNone, dtype, count);
  if (err == kFrameOk) err = checkHeader(h);
  if (err != kFrameOk) return err;
  if (count) std::memcpy(dst, src + kFrameHeaderBytes, h.frameBytes - kFrameHeaderBytes);
  return kFrameOk;
}

}  // namespace cclz::none
