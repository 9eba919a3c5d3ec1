// The codec interface: what the C API (src/api/codec_api.cpp) and, later, the collectives need
// from a codec. One implementation per cclzCodecType_t (none/, lossless/, ...), each a thin
// adapter over that codec's CPU reference and kernels. The API layer has checked pointers,
// alignment, device-vs-host memory and capacities before it calls in; a codec checks what only it
// knows (its configuration, its dtypes, its frames).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cclz/cclz.h"
#include "codec/frame.h"
#include "codec/residual.h"
#include "common/error.h"

#ifdef CCLZ_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace cclz {

struct DeviceStatus;
struct ReduceStep;
struct FrameSum;
struct FrameBatch;

// One block of values encoded into a frame of its own (a piece's block for one destination):
// count values at src into dst, the frame's size to *sizeOut where that is not NULL (device
// memory on the device path).
struct EncodeBlock {
  const void* src = nullptr;
  uint64_t count = 0;
  uint8_t* dst = nullptr;
  uint64_t* sizeOut = nullptr;
};

// Thrown by a host encode that met a NaN or Inf after it wrote its complete frame (and residual):
// the call fails, yet its outputs are valid (docs/formats.md, qgrad, "NaN and Inf"), so the API
// still reports the frame's size.
class NonFiniteInput : public Error {
 public:
  NonFiniteInput(const std::string& message, uint64_t frameBytes)
      : Error(cclzInvalidArgument, message), frameBytes_(frameBytes) {}
  uint64_t frameBytes() const { return frameBytes_; }

 private:
  uint64_t frameBytes_;
};

// Device memory a codec handle lends to one call: the status word (encoded size, decode error)
// and `scratchBytes` (as asked for by encodeScratchBytes) of scratch.
// scratchEpoch 0: the scratch's contents are undefined (the collective engine's scratch, which
// every codec of a communicator shares, or a call captured in a CUDA graph). 1..kMaxScratchEpoch:
// the scratch is the handle's own, it was zeroed when allocated and again whenever the epoch came
// back to 1, and this is the handle's call number modulo kMaxScratchEpoch: a codec may leave
// state in it across calls that carries its epoch (the lossless encoder's look-back states), if
// it leaves the rest zero, after epoch 0 calls too (which may come between them).
constexpr uint32_t kMaxScratchEpoch = (1u << 14) - 1;
struct DeviceWorkspace {
  DeviceStatus* status;
  uint8_t* scratch;
  uint64_t scratchBytes;
  uint32_t scratchEpoch = 0;
};

class Codec {
 public:
  virtual ~Codec() = default;

  virtual const char* name() const = 0;

  // Throws cclz::Error(cclzInvalidArgument) if the configuration is not one this codec accepts,
  // for any message size.
  virtual void validateConfig(const cclzCodecConfig_t& config) const = 0;

  // Throws cclz::Error(cclzNotSupported) naming the dtype if the codec does not take it.
  virtual void checkDtype(int dtype) const = 0;

  // The largest frame count elements of dtype can produce under this configuration.
  virtual uint64_t maxEncodedBytes(const cclzCodecConfig_t& config, int dtype,
                                   uint64_t count) const = 0;

  // True when every frame of (config, dtype, count) is exactly maxEncodedBytes long, so that a
  // receiver knows a frame's size before it arrives (the collectives then exchange no sizes).
  virtual bool fixedFrameSize() const { return false; }

  // The elements a frame codes as one unit, with scales of their own (the fp8 codec's rows): the
  // collectives cut their pipeline pieces at multiples of it, so that no unit straddles two
  // frames and the result does not depend on the piece size. 1 where the codec has no such unit
  // or chooses it from the data.
  virtual uint64_t pieceAlignment(const cclzCodecConfig_t& config) const {
    (void)config;
    return 1;
  }

  // True when the codec has an error-feedback encode (encodeFeedbackHost / encodeFeedbackDevice).
  virtual bool hasFeedback() const { return false; }

  // Checks the codec's fields of a header that passed checkFrameHeader. Returns a FrameError.
  virtual uint32_t checkHeader(const FrameHeader& header) const = 0;

  // Host memory, through the CPU reference. encodeHost returns the frame's size; decodeHost a
  // FrameError (kFrameOk on success) and never touches memory outside the buffers.
  virtual uint64_t encodeHost(const cclzCodecConfig_t& config, int dtype, const void* src,
                              uint64_t count, uint8_t* dst, uint64_t capacity) const = 0;
  virtual uint32_t decodeHost(const cclzCodecConfig_t& config, const uint8_t* src,
                              uint64_t srcBytes, int dtype, uint64_t count, void* dst) const = 0;

  // acc[i] += decoded element i, in fp32 (what a reduce-scatter does with each peer's frame).
  // The default decodes into a temporary and adds; codecs with a fused path override it.
  virtual uint32_t decodeAccumulateHost(const cclzCodecConfig_t& config, const uint8_t* src,
                                        uint64_t srcBytes, int dtype, uint64_t count,
                                        float* acc) const;

  // Error feedback (cclzEncodeFeedbackHost): x = src + residual is encoded, residual becomes
  // x - decoded x (rounded to the residual's dtype), with stochastic-rounding step `step`.
  // Returns the frame's size. The default throws cclzNotSupported (only lossy codecs have a
  // residual).
  virtual uint64_t encodeFeedbackHost(const cclzCodecConfig_t& config, int dtype, const void* src,
                                      uint64_t count, Residual residual, uint64_t step,
                                      uint8_t* dst, uint64_t capacity) const;

#ifdef CCLZ_HAVE_CUDA
  // Device scratch one encode needs beyond the status word.
  virtual uint64_t encodeScratchBytes(const cclzCodecConfig_t& config, int dtype,
                                      uint64_t count) const {
    (void)config, (void)dtype, (void)count;
    return 0;
  }
  // Stream-ordered, no host synchronization. The frame size goes to the header, to
  // ws.status->encodedBytes and, if not NULL, to *encodedBytesOut (device memory).
  virtual void encodeDevice(const cclzCodecConfig_t& config, int dtype, const void* src,
                            uint64_t count, uint8_t* dst, uint64_t* encodedBytesOut,
                            const DeviceWorkspace& ws, cudaStream_t stream) const = 0;
  // Device scratch encodeBatchDevice needs for n frames of count values. The default: one
  // encode's, since its encodes run one after another.
  virtual uint64_t encodeBatchScratchBytes(const cclzCodecConfig_t& config, int dtype,
                                           uint64_t count, int n) const {
    (void)n;
    return encodeScratchBytes(config, dtype, count);
  }
  // n frames of count values each (FrameBatch, codec/device.h), the bytes of n encodeDevice
  // calls. The default makes those calls in order; the fp8 codec launches each of its kernels
  // once for all the frames.
  virtual void encodeBatchDevice(const cclzCodecConfig_t& config, int dtype,
                                 const FrameBatch& batch, uint64_t count, const DeviceWorkspace& ws,
                                 cudaStream_t stream) const;
  // The n blocks of a piece (one per destination), blocks of no values skipped: as one
  // encodeBatchDevice where their counts agree and there are at most kMaxBatchFrames, else one
  // encodeDevice each. The bytes are the same either way. ws.scratch holds
  // encodeBlocksScratchBytes for the largest count.
  void encodeBlocksDevice(const cclzCodecConfig_t& config, int dtype, const EncodeBlock* blocks,
                          size_t n, const DeviceWorkspace& ws, cudaStream_t stream) const;
  uint64_t encodeBlocksScratchBytes(const cclzCodecConfig_t& config, int dtype, uint64_t count,
                                    size_t n) const;
  // A rejected frame sets ws.status->decodeError (the first error since it was cleared).
  virtual void decodeDevice(const cclzCodecConfig_t& config, const uint8_t* src, uint64_t srcBytes,
                            int dtype, uint64_t count, void* dst, const DeviceWorkspace& ws,
                            cudaStream_t stream) const = 0;
  // The default throws cclzNotSupported.
  virtual void decodeAccumulateDevice(const cclzCodecConfig_t& config, const uint8_t* src,
                                      uint64_t srcBytes, int dtype, uint64_t count, float* acc,
                                      const DeviceWorkspace& ws, cudaStream_t stream) const;
  // One frame's step of a sum over frames (ReduceStep, codec/device.h). The default takes the
  // plain step (neither fromZero nor store) through decodeAccumulateDevice and throws
  // cclzNotSupported for the fused ones; the engine then zeroes and stores apart.
  virtual void decodeReduceDevice(const cclzCodecConfig_t& config, const uint8_t* src,
                                  uint64_t srcBytes, int dtype, uint64_t count,
                                  const ReduceStep& step, const DeviceWorkspace& ws,
                                  cudaStream_t stream) const;
  // Whether decodeSumDevice takes a sum of n frames made under config (the default: never; the
  // caller then takes decodeReduceDevice's steps through an fp32 accumulator).
  virtual bool sumsInOnePass(const cclzCodecConfig_t& config, int n) const {
    (void)config, (void)n;
    return false;
  }
  // A whole sum over frames in one pass (FrameSum, codec/device.h): the bits of the n steps of
  // decodeReduceDevice, with no accumulator. Only where sumsInOnePass; the default throws
  // cclzNotSupported.
  virtual void decodeSumDevice(const cclzCodecConfig_t& config, const FrameSum& sum, int dtype,
                               uint64_t count, const DeviceWorkspace& ws,
                               cudaStream_t stream) const;
  // The device error-feedback encode (residual in device memory). A NaN or Inf sets
  // ws.status->encodeError. The default throws cclzNotSupported.
  virtual void encodeFeedbackDevice(const cclzCodecConfig_t& config, int dtype, const void* src,
                                    uint64_t count, Residual residual, uint64_t step,
                                    uint8_t* dst, uint64_t* encodedBytesOut,
                                    const DeviceWorkspace& ws, cudaStream_t stream) const;
#endif
};

#ifdef CCLZ_HAVE_CUDA
// The decode error a status word (device memory) holds, taken: cclzCorruptFrame with *message
// ("<who> rejected a frame: <why>") and the word cleared, else cclzSuccess. A small copy; it
// does not wait for work queued on non-blocking streams.
cclzResult_t takeDecodeError(DeviceStatus* status, const char* who, std::string* message);
// The same for a decode's and an encode's errors: a rejected frame as above ("<decoder> rejected a
// frame: <why>"), else an encode that met a NaN or Inf (error feedback): cclzInvalidArgument
// with "<encoder> met a NaN or Inf (those blocks were sent as NaN)". Both words cleared.
cclzResult_t takeDeviceError(DeviceStatus* status, const char* decoder, const char* encoder,
                             std::string* message);
#endif

// The implementation of a codec type. Throws cclz::Error(cclzInvalidArgument) for an unknown one.
const Codec& codecFor(int type);
// The same, or NULL for a type this build does not know (a frame's codec byte, for instance).
const Codec* findCodec(int type);

// Throws cclzInvalidArgument when a field that belongs to another codec than config.codec is set
// (cclzCodecCreate calls it after the codec's own validateConfig).
void rejectForeignFields(const cclzCodecConfig_t& config);

// Each codec's instance, defined next to its implementation.
const Codec& noneCodec();
const Codec& losslessCodec();
const Codec& qgradCodec();
const Codec& fp8Codec();

}  // namespace cclz
