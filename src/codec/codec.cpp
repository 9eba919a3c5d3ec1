// The codec registry and the interface's default implementations.
#include "codec/codec.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/error.h"
#include "common/float_bits.h"
#include "common/float_rn.h"

#ifdef CCLZ_HAVE_CUDA
#include "codec/device.h"
#endif

namespace cclz {

const Codec* findCodec(int type) {
  switch (type) {
    case cclzCodecNone:
      return &noneCodec();
    case cclzCodecLossless:
      return &losslessCodec();
    case cclzCodecFp8:
      return &fp8Codec();
    case cclzCodecQgrad:
      return &qgradCodec();
    default:
      return nullptr;
  }
}

const Codec& codecFor(int type) {
  const Codec* codec = findCodec(type);
  if (!codec) CCLZ_FAIL(cclzInvalidArgument, "unknown codec type " + std::to_string(type));
  return *codec;
}

void rejectForeignFields(const cclzCodecConfig_t& c) {
  // Each field group belongs to one codec; a non-zero field of another codec is most likely a
  // caller who meant that codec, so it is rejected rather than ignored.
  struct Field {
    const char* name;
    int owner;
    bool set;
  };
  const Field fields[] = {
      {"chunkElems", cclzCodecLossless, c.chunkElems != 0},
      {"bits", cclzCodecQgrad, c.bits != 0},
      {"blockElems", cclzCodecQgrad, c.blockElems != 0},
      {"rounding", cclzCodecQgrad, c.rounding != cclzRoundNearest},
      {"seed", cclzCodecQgrad, c.seed != 0},
      {"fp8Format", cclzCodecFp8, c.fp8Format != cclzFp8Default},
      {"fp8RowElems", cclzCodecFp8, c.fp8RowElems != 0},
      {"fp8HadamardSize", cclzCodecFp8, c.fp8HadamardSize != 0},
      {"fp8Rotation", cclzCodecFp8, c.fp8Rotation != cclzFp8RotateDefault},
      {"fp8RotateThreshold", cclzCodecFp8, c.fp8RotateThreshold != 0},
      {"fp8ScaleCandidates", cclzCodecFp8, c.fp8ScaleCandidates != 0},
  };
  for (const Field& f : fields) {
    CCLZ_REQUIRE(!f.set || f.owner == c.codec, cclzInvalidArgument,
                 std::string(f.name) + " is a parameter of the " + codecFor(f.owner).name() +
                     " codec and must be 0 (its default) for the " + codecFor(c.codec).name() +
                     " codec");
  }
}

uint64_t Codec::encodeFeedbackHost(const cclzCodecConfig_t&, int, const void*, uint64_t, Residual,
                                   uint64_t, uint8_t*, uint64_t) const {
  CCLZ_FAIL(cclzNotSupported,
            std::string("the ") + name() + " codec has no error feedback (only qgrad has)");
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
  for (uint64_t i = 0; i < count; ++i)
    acc[i] = accumulateRn(acc[i], loadAsFloat(decoded.data(), dtype, i));
  return kFrameOk;
}

#ifdef CCLZ_HAVE_CUDA
void Codec::decodeAccumulateDevice(const cclzCodecConfig_t&, const uint8_t*, uint64_t, int,
                                   uint64_t, float*, const DeviceWorkspace&, cudaStream_t) const {
  CCLZ_FAIL(cclzNotSupported,
            std::string("the ") + name() + " codec has no device decode-and-accumulate yet");
}

void Codec::decodeReduceDevice(const cclzCodecConfig_t& config, const uint8_t* src,
                               uint64_t srcBytes, int dtype, uint64_t count,
                               const ReduceStep& step, const DeviceWorkspace& ws,
                               cudaStream_t stream) const {
  CCLZ_REQUIRE(!step.fromZero && !step.store, cclzNotSupported,
               std::string("the ") + name() + " codec has no fused first or last reduce step");
  decodeAccumulateDevice(config, src, srcBytes, dtype, count, step.acc, ws, stream);
}

void Codec::encodeBatchDevice(const cclzCodecConfig_t& config, int dtype, const FrameBatch& batch,
                              uint64_t count, const DeviceWorkspace& ws,
                              cudaStream_t stream) const {
  CCLZ_REQUIRE(batch.n >= 0 && batch.n <= kMaxBatchFrames, cclzInvalidArgument,
               "an encode batch holds at most " + std::to_string(kMaxBatchFrames) + " frames");
  for (int f = 0; f < batch.n; ++f)
    encodeDevice(config, dtype, batch.src[f], count, batch.dst[f], batch.encodedBytesOut[f], ws,
                 stream);
}

void Codec::encodeBlocksDevice(const cclzCodecConfig_t& config, int dtype,
                               const EncodeBlock* blocks, size_t n, const DeviceWorkspace& ws,
                               cudaStream_t stream) const {
  FrameBatch batch;
  uint64_t count = 0;
  bool oneBatch = n <= static_cast<size_t>(kMaxBatchFrames);
  for (size_t f = 0; f < n && oneBatch; ++f) {
    const EncodeBlock& b = blocks[f];
    if (!b.count) continue;
    oneBatch = batch.n == 0 || b.count == count;
    count = b.count;
    batch.src[batch.n] = b.src, batch.dst[batch.n] = b.dst,
    batch.encodedBytesOut[batch.n] = b.sizeOut;
    ++batch.n;
  }
  if (oneBatch) {
    if (batch.n) encodeBatchDevice(config, dtype, batch, count, ws, stream);
    return;
  }
  for (size_t f = 0; f < n; ++f)
    if (blocks[f].count)
      encodeDevice(config, dtype, blocks[f].src, blocks[f].count, blocks[f].dst, blocks[f].sizeOut,
                   ws, stream);
}

uint64_t Codec::encodeBlocksScratchBytes(const cclzCodecConfig_t& config, int dtype, uint64_t count,
                                         size_t n) const {
  const int frames = static_cast<int>(std::min<size_t>(n, kMaxBatchFrames));
  return encodeBatchScratchBytes(config, dtype, count, std::max(frames, 1));
}

void Codec::decodeSumDevice(const cclzCodecConfig_t&, const FrameSum&, int, uint64_t,
                            const DeviceWorkspace&, cudaStream_t) const {
  CCLZ_FAIL(cclzNotSupported, std::string("the ") + name() + " codec has no one-pass sum");
}

void Codec::encodeFeedbackDevice(const cclzCodecConfig_t&, int, const void*, uint64_t, Residual,
                                 uint64_t, uint8_t*, uint64_t*, const DeviceWorkspace&,
                                 cudaStream_t) const {
  CCLZ_FAIL(cclzNotSupported,
            std::string("the ") + name() + " codec has no error feedback (only qgrad has)");
}

cclzResult_t takeDeviceError(DeviceStatus* status, const char* decoder, const char* encoder,
                             std::string* message) {
  DeviceStatus got{};
  CCLZ_CUDA_CHECK(cudaMemcpy(&got, status, sizeof got, cudaMemcpyDeviceToHost));
  if (got.decodeError == kFrameOk && got.encodeError == 0) return cclzSuccess;
  CCLZ_CUDA_CHECK(cudaMemset(&status->decodeError, 0, 2 * sizeof(uint32_t)));
  if (got.decodeError != kFrameOk) {
    *message = std::string(decoder) + " rejected a frame: " + frameErrorText(got.decodeError);
    return cclzCorruptFrame;
  }
  *message = std::string(encoder) + " met a NaN or Inf (those blocks were sent as NaN)";
  return cclzInvalidArgument;
}

cclzResult_t takeDecodeError(DeviceStatus* status, const char* who, std::string* message) {
  DeviceStatus got{};
  CCLZ_CUDA_CHECK(cudaMemcpy(&got, status, sizeof got, cudaMemcpyDeviceToHost));
  if (got.decodeError == kFrameOk) return cclzSuccess;
  CCLZ_CUDA_CHECK(cudaMemset(&status->decodeError, 0, sizeof(uint32_t)));
  *message = std::string(who) + " rejected a frame: " + frameErrorText(got.decodeError);
  return cclzCorruptFrame;
}
#endif

}  // namespace cclz
