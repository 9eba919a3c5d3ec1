// The qgrad codec behind the codec interface: the API's configuration becomes format parameters
// here, and a non-finite input becomes an error that still reports the frame it wrote.
#include <cmath>
#include <cstdio>
#include <string>

#include "codec/codec.h"
#include "codec/qgrad/device.h"
#include "codec/qgrad/ref.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/float_bits.h"

namespace cclz {
namespace {

constexpr int kDefaultBits = 4;
constexpr int kDefaultBlockElems = 64;  // int4: 0.266 of bf16 with a 2-byte scale per block

qgrad::Params qgradParams(const cclzCodecConfig_t& c) {
  return qgrad::Params{static_cast<uint32_t>(c.blockElems ? c.blockElems : kDefaultBlockElems),
                       static_cast<uint32_t>(c.bits ? c.bits : kDefaultBits),
                       static_cast<uint32_t>(c.rounding), c.seed};
}

std::string valueText(float v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", static_cast<double>(v));
  return text;
}

// Names the first element whose encoded value (gradient, plus residual with feedback) is not
// finite. The residual of a non-finite block is left as it was, so it can still be read here.
[[noreturn]] void throwNonFinite(const qgrad::EncodeResult& r, int dtype, const void* src,
                                 Residual residual) {
  const uint64_t i = r.firstNonFinite;
  const float g = loadAsFloat(src, dtype, i);
  std::string message = "element " + std::to_string(i) + " of the gradient is " + valueText(g);
  if (residual)
    message = "element " + std::to_string(i) + ": gradient + residual is not finite (gradient " +
              valueText(g) + ", residual " + valueText(residual.load(i)) + ")";
  throw NonFiniteInput(message + "; its block was encoded as NaN and kept its residual (the frame "
                                 "is complete)",
                       r.frameBytes);
}

class QgradCodec final : public Codec {
 public:
  const char* name() const override { return "qgrad"; }

  void validateConfig(const cclzCodecConfig_t& c) const override {
    CCLZ_REQUIRE(c.chunkElems == 0, cclzInvalidArgument,
                 "qgrad takes no chunkElems (it must be 0); its block size is blockElems");
    CCLZ_REQUIRE(c.bits == 0 || qgrad::validBits(static_cast<uint32_t>(c.bits)),
                 cclzInvalidArgument, "qgrad bits must be 8, 4 or 2 (0: 4)");
    CCLZ_REQUIRE(c.blockElems == 0 || qgrad::validBlockElems(static_cast<uint32_t>(c.blockElems)),
                 cclzInvalidArgument, "qgrad blockElems must be 32, 64, 128 or 256 (0: 64)");
    CCLZ_REQUIRE(c.rounding == cclzRoundNearest || c.rounding == cclzRoundStochastic,
                 cclzInvalidArgument, "qgrad rounding must be cclzRoundNearest or "
                                      "cclzRoundStochastic");
  }

  void checkDtype(int dtype) const override {
    CCLZ_REQUIRE(qgrad::isSupportedDtype(dtype), cclzNotSupported,
                 std::string("the qgrad codec takes fp32 or bf16, not ") +
                     dtypeName(static_cast<cclzDataType_t>(dtype)));
  }

  uint64_t maxEncodedBytes(const cclzCodecConfig_t& c, int, uint64_t count) const override {
    CCLZ_REQUIRE(count <= qgrad::kMaxCount, cclzInvalidArgument,
                 "element count too large (qgrad takes at most 2^36)");
    return qgrad::maxEncodedBytes(qgradParams(c), count);
  }

  bool fixedFrameSize() const override { return true; }
  bool hasFeedback() const override { return true; }

  uint32_t checkHeader(const FrameHeader& h) const override { return qgrad::checkQgradHeader(h); }

  uint64_t encodeHost(const cclzCodecConfig_t& c, int dtype, const void* src, uint64_t count,
                      uint8_t* dst, uint64_t capacity) const override {
    const qgrad::EncodeResult r =
        qgrad::encodeRef(qgradParams(c), dtype, src, count, Residual{}, 0, dst, capacity);
    if (r.firstNonFinite != qgrad::kNoNonFinite) throwNonFinite(r, dtype, src, Residual{});
    return r.frameBytes;
  }

  uint64_t encodeFeedbackHost(const cclzCodecConfig_t& c, int dtype, const void* src,
                              uint64_t count, Residual residual, uint64_t step, uint8_t* dst,
                              uint64_t capacity) const override {
    CCLZ_REQUIRE(count == 0 || residual, cclzInvalidArgument, "residual is NULL");
    const qgrad::EncodeResult r =
        qgrad::encodeRef(qgradParams(c), dtype, src, count, residual, step, dst, capacity);
    if (r.firstNonFinite != qgrad::kNoNonFinite) throwNonFinite(r, dtype, src, residual);
    return r.frameBytes;
  }

  // The host decoder accepts any block size and bit width the frame declares.
  uint32_t decodeHost(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes, int dtype,
                      uint64_t count, void* dst) const override {
    return qgrad::decodeRef(src, srcBytes, dtype, count, dst);
  }

  uint32_t decodeAccumulateHost(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes,
                                int dtype, uint64_t count, float* acc) const override {
    return qgrad::decodeAccumulateRef(src, srcBytes, dtype, count, acc);
  }

#ifdef CCLZ_HAVE_CUDA
  void encodeDevice(const cclzCodecConfig_t& c, int dtype, const void* src, uint64_t count,
                    uint8_t* dst, uint64_t* encodedBytesOut, const DeviceWorkspace& ws,
                    cudaStream_t stream) const override {
    qgrad::encodeDevice(qgradParams(c), dtype, src, count, Residual{}, 0, dst, encodedBytesOut,
                        ws.status, stream);
  }

  void encodeFeedbackDevice(const cclzCodecConfig_t& c, int dtype, const void* src, uint64_t count,
                            Residual residual, uint64_t step, uint8_t* dst,
                            uint64_t* encodedBytesOut, const DeviceWorkspace& ws,
                            cudaStream_t stream) const override {
    qgrad::encodeDevice(qgradParams(c), dtype, src, count, residual, step, dst, encodedBytesOut,
                        ws.status, stream);
  }

  void decodeDevice(const cclzCodecConfig_t& c, const uint8_t* src, uint64_t srcBytes, int dtype,
                    uint64_t count, void* dst, const DeviceWorkspace& ws,
                    cudaStream_t stream) const override {
    qgrad::decodeDevice(qgradParams(c), dtype, src, srcBytes, dst, count, false, ws.status,
                        stream);
  }

  void decodeAccumulateDevice(const cclzCodecConfig_t& c, const uint8_t* src, uint64_t srcBytes,
                              int dtype, uint64_t count, float* acc, const DeviceWorkspace& ws,
                              cudaStream_t stream) const override {
    qgrad::decodeDevice(qgradParams(c), dtype, src, srcBytes, acc, count, true, ws.status, stream);
  }

  void decodeReduceDevice(const cclzCodecConfig_t& c, const uint8_t* src, uint64_t srcBytes,
                          int dtype, uint64_t count, const ReduceStep& step,
                          const DeviceWorkspace& ws, cudaStream_t stream) const override {
    qgrad::decodeReduceDevice(qgradParams(c), dtype, src, srcBytes, count, step, ws.status,
                              stream);
  }
#endif
};

}  // namespace

const Codec& qgradCodec() {
  static const QgradCodec codec;
  return codec;
}

}  // namespace cclz
