// The codec registry and the interface's default implementations.
#include "codec/codec.h"

#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "common/float_bits.h"

namespace cclz {

const Codec& codecFor(int type) {
  switch (type) {
    case cclzCodecNone:
      return noneCodec();
    case cclzCodecLossless:
      return losslessCodec();
    case cclzCodecFp8:
      return fp8Codec();
    default:
      CCLZ_FAIL(cclzInvalidArgument, "unknown codec type " + std::to_string(type));
  }
}

uint32_t Codec::decodeAccumulateHost(const cclzCodecConfig_t& config, const uint8_t* src,
                                     uint64_t srcBytes, int dtype, uint64_t count,
                                     float* acc) const {
  CCLZ_REQUIRE(dtype == cclzBfloat16 || dtype == cclzFloat16 || dtype == cclzFloat32,
               cclzNotSupported,
               std::string("accumulating takes bf16, fp16 or fp32 frames, not ") +
                   dtypeName(static_cast<cclzDataType_t>(dtype)));
  std::vector<uint8_t> decoded(count * dtypeSize(static_cast<cclzDataType_t>(dtype)));
  const uint32_t err = decodeHost(config, src, srcBytes, dtype, count, decoded.data());
  if (err != kFrameOk) return err;  // acc untouched: a corrupt frame loses nothing
  for (uint64_t i = 0; i < count; ++i) acc[i] += loadAsFloat(decoded.data(), dtype, i);
  return kFrameOk;
}

#ifdef CCLZ_HAVE_CUDA
void Codec::decodeAccumulateDevice(const cclzCodecConfig_t&, const uint8_t*, uint64_t, int,
                                   uint64_t, float*, const DeviceWorkspace&, cudaStream_t) const {
  CCLZ_FAIL(cclzNotSupported,
            std::string("the ") + name() + " codec has no device decode-and-accumulate yet");
}
#endif

}  // namespace cclz
