// The fp8 codec behind the codec interface: the API's configuration becomes format parameters
// here (0 = the default for every field), so that encoder and decoder derive them the same way.
#include "codec/codec.h"

#include <string>

#include "codec/device.h"
#include "codec/fp8/ref.h"
#include "common/dtype.h"
#include "common/error.h"

namespace cclz {
namespace {

constexpr int kDefaultHadamard = 64;
constexpr int kDefaultThreshold = 4;

bool isPowerOfTwo(int v) { return v > 0 && (v & (v - 1)) == 0; }

fp8::Params fp8Params(const cclzCodecConfig_t& c) {
  fp8::Params p;
  p.grid = c.fp8Format == cclzFp8E5M2   ? fp8::kE5M2
           : c.fp8Format == cclzFp8Int8 ? fp8::kInt8
                                        : fp8::kE4M3;
  // 0: the encoder chooses the row length from the data (the frame records it).
  p.shape = c.fp8RowElems ? fp8::kShapeCaller : fp8::kShapeAuto;
  p.rowElems = static_cast<uint32_t>(c.fp8RowElems ? c.fp8RowElems : fp8::kAutoFallbackRowElems);
  const int h = c.fp8HadamardSize ? c.fp8HadamardSize : kDefaultHadamard;
  p.log2Hadamard = 0;
  while ((1 << p.log2Hadamard) < h) ++p.log2Hadamard;
  switch (c.fp8Rotation) {
    case cclzFp8RotateNever:
      p.policy = fp8::kRotateNever;
      break;
    case cclzFp8RotateAlways:
      p.policy = fp8::kRotateAlways;
      break;
    case cclzFp8RotateAdaptive:
      p.policy = fp8::kRotateAdaptive;
      break;
    default:  // the int8 grid is meant for rotated blocks; E4M3/E5M2 lose precision to rotation
      p.policy = p.grid == fp8::kInt8 ? fp8::kRotateAlways : fp8::kRotateNever;
  }
  // Per-channel smoothing is the scale of the scale-Hadamard transform: considered (and applied
  // where the data asks) whenever rows may be rotated; never otherwise, where it costs E4M3
  // precision (NMSE 3.79e-4 -> 4.10e-4 on the real tensors; docs/formats.md, fp8 "Why this
  // design").
  p.smoothing = p.policy != fp8::kRotateNever ? 1 : 0;
  p.threshold =
      static_cast<uint32_t>(c.fp8RotateThreshold ? c.fp8RotateThreshold : kDefaultThreshold);
  // The search places the largest values of a block on grid points, which is what E4M3 and
  // E5M2 lack; on the integer grid after rotation it gives more error than no search
  // (docs/formats.md, fp8 "Why this design").
  const int candidates = p.grid == fp8::kInt8 ? 1 : static_cast<int>(fp8::kMaxCandidates);
  p.candidates = static_cast<uint32_t>(c.fp8ScaleCandidates ? c.fp8ScaleCandidates : candidates);
  return p;
}

class Fp8Codec final : public Codec {
 public:
  const char* name() const override { return "fp8"; }

  void validateConfig(const cclzCodecConfig_t& c) const override {
    CCLZ_REQUIRE(c.chunkElems == 0, cclzInvalidArgument,
                 "chunkElems is a lossless parameter; the fp8 codec's row length is fp8RowElems");
    CCLZ_REQUIRE(c.fp8Format >= 0 && c.fp8Format < cclzNumFp8Formats, cclzInvalidArgument,
                 "unknown fp8Format " + std::to_string(c.fp8Format));
    CCLZ_REQUIRE(c.fp8Rotation >= 0 && c.fp8Rotation < cclzNumFp8Rotations, cclzInvalidArgument,
                 "unknown fp8Rotation " + std::to_string(c.fp8Rotation));
    CCLZ_REQUIRE(c.fp8HadamardSize == 0 || (isPowerOfTwo(c.fp8HadamardSize) &&
                                            c.fp8HadamardSize >= 16 && c.fp8HadamardSize <= 256),
                 cclzInvalidArgument, "fp8HadamardSize must be a power of two in [16, 256]");
    CCLZ_REQUIRE(c.fp8RowElems >= 0 && c.fp8RotateThreshold >= 0 && c.fp8ScaleCandidates >= 0,
                 cclzInvalidArgument, "fp8 parameters must not be negative");
    CCLZ_REQUIRE(fp8::validParams(fp8Params(c)), cclzInvalidArgument,
                 "invalid fp8 configuration: fp8RowElems must be a multiple of 64 and of "
                 "fp8HadamardSize, at most 2^24; fp8RotateThreshold in [1, 8]; "
                 "fp8ScaleCandidates in [1, 32]");
  }

  void checkDtype(int dtype) const override {
    CCLZ_REQUIRE(fp8::isSupportedDtype(dtype), cclzNotSupported,
                 std::string("the fp8 codec takes bf16, fp16 or fp32, not ") +
                     dtypeName(static_cast<cclzDataType_t>(dtype)));
  }

  uint64_t maxEncodedBytes(const cclzCodecConfig_t& c, int, uint64_t count) const override {
    const fp8::Params p = fp8Params(c);
    CCLZ_REQUIRE(count <= fp8::kMaxCount && fp8::frameLayout(count, p).rowSlots <= 0xFFFFFFFFull,
                 cclzInvalidArgument, "element count too large");
    return fp8::maxEncodedBytes(p, count);
  }

  // The caller's rows: each has its own coarse scale, rotation and fine scales. Rows chosen from
  // the data (fp8RowElems 0) are not known on the host.
  uint64_t pieceAlignment(const cclzCodecConfig_t& c) const override {
    return c.fp8RowElems > 0 ? static_cast<uint64_t>(c.fp8RowElems) : 1u;
  }

  // The frame's size is its layout's (docs/formats.md, "fp8"): the collectives need no size
  // exchange.
  bool fixedFrameSize() const override { return true; }

  uint32_t checkHeader(const FrameHeader& h) const override {
    return fp8::checkFp8Header(h, nullptr);
  }

  uint64_t encodeHost(const cclzCodecConfig_t& c, int dtype, const void* src, uint64_t count,
                      uint8_t* dst, uint64_t capacity) const override {
    return fp8::encodeRef(fp8Params(c), dtype, src, count, dst, capacity);
  }

  // Frames are self-describing: the host decoder takes whatever parameters the frame declares.
  uint32_t decodeHost(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes, int dtype,
                      uint64_t count, void* dst) const override {
    return fp8::decodeRef(src, srcBytes, dtype, count, dst);
  }

  uint32_t decodeAccumulateHost(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes,
                                int dtype, uint64_t count, float* acc) const override {
    return fp8::decodeAccumulateRef(src, srcBytes, dtype, count, acc);
  }

#ifdef CCLZ_HAVE_CUDA
  uint64_t encodeScratchBytes(const cclzCodecConfig_t& c, int, uint64_t count) const override {
    return fp8::encodeScratchBytes(fp8Params(c), count);
  }

  void encodeDevice(const cclzCodecConfig_t& c, int dtype, const void* src, uint64_t count,
                    uint8_t* dst, uint64_t* encodedBytesOut, const DeviceWorkspace& ws,
                    cudaStream_t stream) const override {
    fp8::encodeDevice(fp8Params(c), dtype, src, count, dst, encodedBytesOut, ws.status, ws.scratch,
                      stream);
  }

  uint64_t encodeBatchScratchBytes(const cclzCodecConfig_t& c, int, uint64_t count,
                                   int n) const override {
    return fp8::encodeBatchScratchBytes(fp8Params(c), count, n);
  }

  void encodeBatchDevice(const cclzCodecConfig_t& c, int dtype, const FrameBatch& batch,
                         uint64_t count, const DeviceWorkspace& ws,
                         cudaStream_t stream) const override {
    fp8::encodeBatchDevice(fp8Params(c), dtype, batch, count, ws.status, ws.scratch, stream);
  }

  void decodeDevice(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes, int dtype,
                    uint64_t count, void* dst, const DeviceWorkspace& ws,
                    cudaStream_t stream) const override {
    fp8::decodeDevice(src, srcBytes, dtype, count, dst, nullptr, ws.status, stream);
  }

  void decodeAccumulateDevice(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes,
                              int dtype, uint64_t count, float* acc, const DeviceWorkspace& ws,
                              cudaStream_t stream) const override {
    const ReduceStep step{acc};
    fp8::decodeDevice(src, srcBytes, dtype, count, nullptr, &step, ws.status, stream);
  }

  void decodeReduceDevice(const cclzCodecConfig_t&, const uint8_t* src, uint64_t srcBytes,
                          int dtype, uint64_t count, const ReduceStep& step,
                          const DeviceWorkspace& ws, cudaStream_t stream) const override {
    fp8::decodeDevice(src, srcBytes, dtype, count, nullptr, &step, ws.status, stream);
  }

  // Plain frames only: a configuration that never rotates makes no other (fp8Params).
  bool sumsInOnePass(const cclzCodecConfig_t& c, int n) const override {
    return fp8Params(c).policy == fp8::kRotateNever && n >= 1 && n <= kMaxSumFrames;
  }

  void decodeSumDevice(const cclzCodecConfig_t&, const FrameSum& sum, int dtype, uint64_t count,
                       const DeviceWorkspace& ws, cudaStream_t stream) const override {
    fp8::sumDevice(sum, dtype, count, ws.status, stream);
  }
#endif
};

}  // namespace

const Codec& fp8Codec() {
  static const Fp8Codec codec;
  return codec;
}

}  // namespace cclz
