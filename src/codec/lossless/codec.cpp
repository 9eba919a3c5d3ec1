// The lossless codec behind the codec interface: the API's configuration becomes format
// parameters here, so that encoder and decoder derive them the same way.
#include "codec/codec.h"

#include <string>

#include "codec/device.h"
#include "codec/lossless/ref.h"
#include "common/dtype.h"
#include "common/error.h"

namespace cclz {
namespace {

// The format's largest chunk: the fewest block headers (the best ratio), and the chunk the
// kernels' fast paths take whole (docs/kernels/lossless.md, "Payload and codes").
constexpr uint32_t kDefaultChunkElems = 4096;

lossless::Params losslessParams(const cclzCodecConfig_t& c) {
  return lossless::Params{c.chunkElems ? static_cast<uint32_t>(c.chunkElems) : kDefaultChunkElems};
}

class LosslessCodec final : public Codec {
 public:
  const char* name() const override { return "lossless"; }

  // Checked once, at creation.
  void validateConfig(const cclzCodecConfig_t& c) const override {
    CCLZ_REQUIRE(c.chunkElems >= 0 && lossless::validParams(losslessParams(c)), cclzInvalidArgument,
                 "lossless chunkElems must be 1024, 2048 or 4096 (or 0: 4096)");
  }

  void checkDtype(int dtype) const override {
    CCLZ_REQUIRE(lossless::isSupportedDtype(dtype), cclzNotSupported,
                 std::string("the lossless codec takes bf16, fp16 or fp32, not ") +
                     dtypeName(static_cast<cclzDataType_t>(dtype)));
  }

  uint64_t maxEncodedBytes(const cclzCodecConfig_t& c, int dtype, uint64_t count) const override {
    CCLZ_REQUIRE(count <= lossless::kMaxCount, cclzInvalidArgument, "element count too large");
    return lossless::maxEncodedBytes(losslessParams(c), dtype, count);
  }

  uint32_t checkHeader(const FrameHeader& h) const override {
    return lossless::checkLosslessHeader(h);
  }

  uint64_t encodeHost(const cclzCodecConfig_t& c, int dtype, const void* src, uint64_t count,
                      uint8_t* dst, uint64_t capacity) const override {
    return lossless::encodeRef(losslessParams(c), dtype, src, count, dst, capacity);
  }

  // The host decoder accepts any chunking the frame declares.
  uint32_t decodeHost(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes, int dtype,
                      uint64_t count, void* dst) const override {
    return lossless::decodeRef(src, srcBytes, dtype, count, dst);
  }

#ifdef CCLZ_HAVE_CUDA
  uint64_t encodeScratchBytes(const cclzCodecConfig_t& c, int dtype,
                              uint64_t count) const override {
    const lossless::Params p = losslessParams(c);
    return lossless::encodeScratchBytes(
        lossless::frameLayout(dtype, count, p.chunkElems).numChunks);
  }

  void encodeDevice(const cclzCodecConfig_t& c, int dtype, const void* src, uint64_t count,
                    uint8_t* dst, uint64_t* encodedBytesOut, const DeviceWorkspace& ws,
                    cudaStream_t stream) const override {
    lossless::encodeDevice(losslessParams(c).chunkElems, dtype, src, count, dst, encodedBytesOut,
                           ws.status, ws.scratch, ws.scratchEpoch, stream);
  }

  void decodeDevice(const cclzCodecConfig_t& c, const uint8_t* src, uint64_t srcBytes, int dtype,
                    uint64_t count, void* dst, const DeviceWorkspace& ws,
                    cudaStream_t stream) const override {
    lossless::decodeDevice(losslessParams(c).chunkElems, dtype, src, srcBytes, dst, count,
                           ws.status, stream);
  }
#endif
};

}  // namespace

const Codec& losslessCodec() {
  static const LosslessCodec codec;
  return codec;
}

}  // namespace cclz
