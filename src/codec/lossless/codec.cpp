// The lossless codec behind the codec interface: the API's configuration becomes format
// parameters here, so that encoder and decoder derive them the same way.
#include <algorithm>
#include <string>

#include "codec/codec.h"
#include "codec/device.h"
#include "codec/lossless/ref.h"
#include "common/dtype.h"
#include "common/error.h"

namespace cclz {
namespace {

constexpr uint32_t kDefaultMaxChunkElems = 16384;
constexpr uint32_t kDefaultMinChunkElems = 4096;
constexpr uint32_t kDefaultTargetChunks = 512;  // enough blocks to fill a GPU several times over
constexpr uint32_t kDefaultStreamSymbols = 256;
constexpr int kDefaultMaxCodeLength = 10;  // decode +15% over 11 on the H200 for -0.05% ratio

// The default chunk size depends on the message: the largest power of two up to 16384 that still
// cuts it into ~512 chunks, but no less than 4096. Large messages get the best ratio, small ones
// the parallelism a GPU needs. Encoder and decoder derive it from the count alone, so they agree.
uint32_t defaultChunkElems(uint64_t count) {
  uint32_t chunk = kDefaultMaxChunkElems;
  while (chunk > kDefaultMinChunkElems && count / chunk < kDefaultTargetChunks) chunk /= 2;
  return chunk;
}

constexpr uint32_t kDefaultV2ChunkElems = 4096;
// Version 2 is the default since it ran faster than version 1 on every measure of the H200
// (bench/results/2026-11-22-codec-speed-h200) at 0.4% less ratio.
constexpr int kDefaultFormatVersion = 2;

int formatVersion(const cclzCodecConfig_t& c) {
  return c.formatVersion ? c.formatVersion : kDefaultFormatVersion;
}

lossless::Params losslessParams(const cclzCodecConfig_t& c, uint64_t count) {
  if (formatVersion(c) == 2)  // static codes: the chunk size is its only parameter
    return lossless::Params{c.chunkElems ? static_cast<uint32_t>(c.chunkElems)
                                         : kDefaultV2ChunkElems,
                            0, 0, 2};
  const uint32_t chunk =
      c.chunkElems ? static_cast<uint32_t>(c.chunkElems) : defaultChunkElems(count);
  const uint32_t streams = c.streamsPerChunk ? static_cast<uint32_t>(c.streamsPerChunk)
                                             : std::max<uint32_t>(chunk / kDefaultStreamSymbols, 1);
  const int maxLen = c.maxCodeLength ? c.maxCodeLength : kDefaultMaxCodeLength;
  lossless::Params p{chunk, 0, static_cast<uint32_t>(maxLen)};
  while ((1u << p.log2Streams) < streams) ++p.log2Streams;
  return p;
}

class LosslessCodec final : public Codec {
 public:
  const char* name() const override { return "lossless"; }

  // Checked once, at creation, for every message size the handle may meet.
  void validateConfig(const cclzCodecConfig_t& c) const override {
    CCLZ_REQUIRE(c.chunkElems >= 0 && c.streamsPerChunk >= 0 && c.maxCodeLength >= 0,
                 cclzInvalidArgument, "codec parameters must not be negative");
    CCLZ_REQUIRE(c.formatVersion >= 0 && c.formatVersion <= 2, cclzInvalidArgument,
                 "lossless formatVersion must be 1, 2 or 0 (the default, 2)");
    if (formatVersion(c) == 2) {
      CCLZ_REQUIRE(c.streamsPerChunk == 0 && c.maxCodeLength == 0, cclzInvalidArgument,
                   "lossless format version 2 (the default) has static codes and one stream per "
                   "warp lane: streamsPerChunk and maxCodeLength are version 1's (formatVersion "
                   "= 1) and must be 0");
      CCLZ_REQUIRE(lossless::validParams(losslessParams(c, 0)), cclzInvalidArgument,
                   "lossless format version 2 takes chunkElems 1024, 2048 or 4096 (or 0)");
      return;
    }
    CCLZ_REQUIRE(c.streamsPerChunk == 0 || lossless::isPowerOfTwo(c.streamsPerChunk),
                 cclzInvalidArgument, "streamsPerChunk must be a power of two");
    for (uint64_t count : {uint64_t{0}, uint64_t{1} << 40}) {  // smallest and largest chunk
      CCLZ_REQUIRE(lossless::validParams(losslessParams(c, count)), cclzInvalidArgument,
                   "invalid lossless configuration: chunkElems must be a power of two in [1024, "
                   "65536], chunkElems/streamsPerChunk in [64, 4096], maxCodeLength in [8, 12]");
    }
  }

  void checkDtype(int dtype) const override {
    CCLZ_REQUIRE(lossless::isSupportedDtype(dtype), cclzNotSupported,
                 std::string("the lossless codec takes bf16, fp16 or fp32, not ") +
                     dtypeName(static_cast<cclzDataType_t>(dtype)));
  }

  uint64_t maxEncodedBytes(const cclzCodecConfig_t& c, int dtype, uint64_t count) const override {
    CCLZ_REQUIRE(count <= lossless::kMaxCount, cclzInvalidArgument, "element count too large");
    return lossless::maxEncodedBytes(losslessParams(c, count), dtype, count);
  }

  uint32_t checkHeader(const FrameHeader& h) const override {
    return lossless::checkLosslessHeader(h);
  }

  uint64_t encodeHost(const cclzCodecConfig_t& c, int dtype, const void* src, uint64_t count,
                      uint8_t* dst, uint64_t capacity) const override {
    return lossless::encodeRef(losslessParams(c, count), dtype, src, count, dst, capacity);
  }

  // The host decoder accepts any chunking the frame declares.
  uint32_t decodeHost(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes, int dtype,
                      uint64_t count, void* dst) const override {
    return lossless::decodeRef(src, srcBytes, dtype, count, dst);
  }

#ifdef CCLZ_HAVE_CUDA
  uint64_t encodeScratchBytes(const cclzCodecConfig_t& c, int dtype,
                              uint64_t count) const override {
    const lossless::Params p = losslessParams(c, count);
    return lossless::encodeScratchBytes(lossless::frameLayout(dtype, count, p.chunkElems).numChunks);
  }

  void encodeDevice(const cclzCodecConfig_t& c, int dtype, const void* src, uint64_t count,
                    uint8_t* dst, uint64_t* encodedBytesOut, const DeviceWorkspace& ws,
                    cudaStream_t stream) const override {
    const lossless::Params p = losslessParams(c, count);
    if (p.version == 2)
      lossless::v2::encodeDevice(p.chunkElems, dtype, src, count, dst, encodedBytesOut, ws.status,
                                 ws.scratch, ws.scratchEpoch, stream);
    else
      lossless::encodeDevice(p, dtype, src, count, dst, encodedBytesOut, ws.status, ws.scratch,
                             stream);
  }

  void decodeDevice(const cclzCodecConfig_t& c, const uint8_t* src, uint64_t srcBytes, int dtype,
                    uint64_t count, void* dst, const DeviceWorkspace& ws,
                    cudaStream_t stream) const override {
    const lossless::Params p = losslessParams(c, count);
    if (p.version == 2)
      lossless::v2::decodeDevice(p.chunkElems, dtype, src, srcBytes, dst, count, ws.status, stream);
    else
      lossless::decodeDevice(p, dtype, src, srcBytes, dst, count, ws.status, stream);
  }
#endif
};

}  // namespace

const Codec& losslessCodec() {
  static const LosslessCodec codec;
  return codec;
}

}  // namespace cclz
