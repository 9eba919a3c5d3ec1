// The none codec behind the codec interface.
#include "codec/codec.h"
#include "codec/device.h"
#include "codec/none/ref.h"
#include "common/dtype.h"
#include "common/error.h"

namespace cclz {
namespace {

class NoneCodec final : public Codec {
 public:
  const char* name() const override { return "none"; }
  void validateConfig(const cclzCodecConfig_t&) const override {}
  void checkDtype(int dtype) const override {
    CCLZ_REQUIRE(dtypeSize(static_cast<cclzDataType_t>(dtype)) != 0, cclzInvalidArgument,
                 "unknown dtype");
  }
  uint64_t maxEncodedBytes(const cclzCodecConfig_t&, int dtype, uint64_t count) const override {
    return none::maxEncodedBytes(dtype, count);
  }
  bool fixedFrameSize() const override { return true; }
  uint32_t checkHeader(const FrameHeader& h) const override { return none::checkHeader(h); }
  uint64_t encodeHost(const cclzCodecConfig_t&, int dtype, const void* src, uint64_t count,
                      uint8_t* dst, uint64_t capacity) const override {
    return none::encodeRef(dtype, src, count, dst, capacity);
  }
  uint32_t decodeHost(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes, int dtype,
                      uint64_t count, void* dst) const override {
    return none::decodeRef(src, srcBytes, dtype, count, dst);
  }
#ifdef CCLZ_HAVE_CUDA
  void encodeDevice(const cclzCodecConfig_t&, int dtype, const void* src, uint64_t count,
                    uint8_t* dst, uint64_t* encodedBytesOut, const DeviceWorkspace& ws,
                    cudaStream_t stream) const override {
    none::encodeDevice(dtype, src, count, dst, encodedBytesOut, ws.status, stream);
  }
  void decodeDevice(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes, int dtype,
                    uint64_t count, void* dst, const DeviceWorkspace& ws,
                    cudaStream_t stream) const override {
    none::decodeDevice(dtype, src, srcBytes, dst, count, ws.status, stream);
  }
#endif
};

}  // namespace

const Codec& noneCodec() {
  static const NoneCodec codec;
  return codec;
}

}  // namespace cclz
