// The codec entry points of the C API: argument checks, then dispatch to the CPU reference or the
// kernels.
#include <cstring>
#include <memory>
#include <string>

#include "api/feedback.h"
#include "api/guard.h"
#include "codec/codec.h"
#include "codec/device.h"
#include "codec/frame.h"
#include "common/dtype.h"
#include "common/error.h"

struct cclzCodec {
  cclzCodecConfig_t config{};
#ifdef CCLZ_HAVE_CUDA
  void* workspace = nullptr;  // DeviceStatus, then the scratch a call asks for
  uint64_t workspaceBytes = 0;
  cudaEvent_t done = nullptr;  // recorded after each device call
  uint32_t scratchEpoch = 0;   // the last call's (DeviceWorkspace::scratchEpoch)
#endif
};

namespace cclz {
namespace {

void checkCodec(cclzCodec_t codec) { CCLZ_REQUIRE(codec, cclzInvalidArgument, "codec is NULL"); }

const Codec& implOf(cclzCodec_t codec) { return codecFor(codec->config.codec); }

void checkDtype(cclzCodec_t codec, cclzDataType_t dtype) {
  CCLZ_REQUIRE(dtypeSize(dtype) != 0, cclzInvalidArgument, "unknown dtype");
  implOf(codec).checkDtype(dtype);
}

uint64_t maxEncoded(cclzCodec_t codec, size_t count, cclzDataType_t dtype) {
  checkDtype(codec, dtype);
  return implOf(codec).maxEncodedBytes(codec->config, dtype, count);
}

void throwFrameError(uint32_t err) {
  if (err != kFrameOk) CCLZ_FAIL(cclzCorruptFrame, frameErrorText(err));
}

// Feedback state of count elements in `memory`, for an encode.
void checkFeedbackFor(cclzFeedback_t feedback, size_t count, cclzMemoryType_t memory) {
  CCLZ_REQUIRE(feedback, cclzInvalidArgument, "feedback is NULL");
  CCLZ_REQUIRE(feedback->memory == memory, cclzInvalidArgument,
               memory == cclzMemoryHost
                   ? "cclzEncodeFeedbackHost takes host feedback state (cclzMemoryHost)"
                   : "cclzEncodeFeedback takes device feedback state (cclzMemoryDevice)");
  CCLZ_REQUIRE(feedback->count == count, cclzInvalidArgument,
               "the feedback state holds " + std::to_string(feedback->count) +
                   " elements, the gradient " + std::to_string(count));
}

// Runs a host encode; a NaN or Inf still reports the frame it wrote (NonFiniteInput), then fails.
template <typename Encode>
void hostEncode(size_t* encodedBytes, Encode&& encode) {
  try {
    const uint64_t bytes = encode();
    if (encodedBytes) *encodedBytes = bytes;
  } catch (const NonFiniteInput& e) {
    if (encodedBytes) *encodedBytes = e.frameBytes();
    throw;
  }
}

#ifdef CCLZ_HAVE_CUDA
// Makes the workspace at least `bytes`, stream-ordered, keeping the status it holds.
void ensureWorkspace(cclzCodec_t codec, uint64_t bytes, cudaStream_t stream) {
  if (!codec->done) CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(&codec->done, cudaEventDisableTiming));
  if (codec->workspaceBytes >= bytes) return;
  bytes = std::max<uint64_t>(bytes, 2 * codec->workspaceBytes);
  void* fresh = nullptr;
  CCLZ_CUDA_CHECK(cudaMallocAsync(&fresh, bytes, stream));
  // The scratch after the status starts zeroed (DeviceWorkspace::scratchEpoch).
  CCLZ_CUDA_CHECK(cudaMemsetAsync(fresh, 0, bytes, stream));
  if (codec->workspace) {
    CCLZ_CUDA_CHECK(cudaMemcpyAsync(fresh, codec->workspace, sizeof(DeviceStatus),
                                    cudaMemcpyDeviceToDevice, stream));
    CCLZ_CUDA_CHECK(cudaFreeAsync(codec->workspace, stream));
  }
  codec->workspace = fresh;
  codec->workspaceBytes = bytes;
  codec->scratchEpoch = 0;  // the next call takes epoch 1 on zeroed scratch
}

DeviceStatus* deviceStatus(cclzCodec_t codec) {
  return static_cast<DeviceStatus*>(codec->workspace);
}

// Whether work queued on `stream` now goes into a CUDA graph being captured (an error in the
// query counts as yes: the caller then takes the path that assumes nothing of the scratch).
bool streamIsCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    (void)cudaGetLastError();
    return true;
  }
  return status != cudaStreamCaptureStatusNone;
}

// The workspace for a call that needs scratchBytes of scratch after the status word.
// Each call takes the next epoch; when the epochs come round to 1 again, the scratch is zeroed
// (a state left with epoch e must not be read as a later call's).
// NOTE: a call captured in a CUDA graph takes epoch 0 (scratch of undefined contents): each
// replay runs with its capture's arguments, so an epoch in them would be the same on every
// replay, and a replay would read the states the one before it left as its own.
DeviceWorkspace workspaceFor(cclzCodec_t codec, uint64_t scratchBytes, cudaStream_t stream) {
  ensureWorkspace(codec, sizeof(DeviceStatus) + scratchBytes, stream);
  uint8_t* scratch = static_cast<uint8_t*>(codec->workspace) + sizeof(DeviceStatus);
  if (streamIsCapturing(stream))
    return DeviceWorkspace{deviceStatus(codec), scratch, scratchBytes, 0};
  const bool wraps = codec->scratchEpoch == kMaxScratchEpoch;
  codec->scratchEpoch = codec->scratchEpoch % kMaxScratchEpoch + 1;
  if (wraps)
    CCLZ_CUDA_CHECK(
        cudaMemsetAsync(scratch, 0, codec->workspaceBytes - sizeof(DeviceStatus), stream));
  return DeviceWorkspace{deviceStatus(codec), scratch, scratchBytes, codec->scratchEpoch};
}

bool isDevicePointer(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}
#endif

#ifndef CCLZ_HAVE_CUDA
void requireCuda() {
  CCLZ_FAIL(cclzInvalidUsage, "this build of cclz has no CUDA support: use the *Host calls");
}
#endif

}  // namespace
}  // namespace cclz

using namespace cclz;

extern "C" {

cclzResult_t cclzCodecCreate(cclzCodec_t* codec, const cclzCodecConfig_t* config) {
  return guarded(__func__, [&] {
    CCLZ_REQUIRE(codec && config, cclzInvalidArgument, "codec or config is NULL");
    *codec = nullptr;
    CCLZ_REQUIRE(config->magic == CCLZ_CONFIG_MAGIC && config->size == sizeof(cclzCodecConfig_t),
                 cclzInvalidArgument,
                 "config was not initialized with CCLZ_CODEC_CONFIG_INITIALIZER");
    CCLZ_REQUIRE(config->version / 100 == CCLZ_VERSION_CODE / 100, cclzInvalidArgument,
                 "config was built against an incompatible cclz.h");
    auto c = std::make_unique<cclzCodec>();
    c->config = *config;
    const Codec& impl = codecFor(config->codec);
    impl.validateConfig(*config);  // first: its messages name the codec's own fields
    rejectForeignFields(*config);
    *codec = c.release();
  });
}

cclzResult_t cclzCodecDestroy(cclzCodec_t codec) {
  return guarded(__func__, [&] {
    if (!codec) return;
    std::unique_ptr<cclzCodec> owned(codec);
#ifdef CCLZ_HAVE_CUDA
    if (codec->done) {
      CCLZ_CUDA_CHECK(cudaEventSynchronize(codec->done));
      CCLZ_CUDA_CHECK(cudaEventDestroy(codec->done));
    }
    if (codec->workspace) CCLZ_CUDA_CHECK(cudaFree(codec->workspace));
#endif
  });
}

cclzResult_t cclzCodecMaxEncodedSize(cclzCodec_t codec, size_t count, cclzDataType_t dtype,
                                     size_t* bytes) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    CCLZ_REQUIRE(bytes, cclzInvalidArgument, "bytes is NULL");
    *bytes = maxEncoded(codec, count, dtype);
  });
}

cclzResult_t cclzEncodeHost(cclzCodec_t codec, const void* src, size_t count, cclzDataType_t dtype,
                            void* dst, size_t dstCapacity, size_t* encodedBytes) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    checkDtype(codec, dtype);
    hostEncode(encodedBytes, [&] {
      return implOf(codec).encodeHost(codec->config, dtype, src, count, static_cast<uint8_t*>(dst),
                                      dstCapacity);
    });
  });
}

cclzResult_t cclzEncodeFeedbackHost(cclzCodec_t codec, cclzFeedback_t feedback, const void* grad,
                                    size_t count, cclzDataType_t dtype, void* dst,
                                    size_t dstCapacity, size_t* encodedBytes) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    checkDtype(codec, dtype);
    checkFeedbackFor(feedback, count, cclzMemoryHost);
    CCLZ_REQUIRE(count == 0 || grad, cclzInvalidArgument, "gradient is NULL");
    CCLZ_REQUIRE(dst, cclzInvalidArgument, "destination is NULL");
    CCLZ_REQUIRE(dstCapacity >= maxEncoded(codec, count, dtype), cclzBufferTooSmall,
                 "destination capacity is below cclzCodecMaxEncodedSize");
    hostEncode(encodedBytes, [&] {
      uint64_t bytes = 0;
      try {
        bytes = implOf(codec).encodeFeedbackHost(codec->config, dtype, grad, count,
                                                 feedback->residual, feedback->step,
                                                 static_cast<uint8_t*>(dst), dstCapacity);
      } catch (const NonFiniteInput&) {
        ++feedback->step;  // the frame and residual were written: this step happened
        throw;
      }
      ++feedback->step;
      return bytes;
    });
  });
}

cclzResult_t cclzDecodeHost(cclzCodec_t codec, const void* src, size_t srcBytes, void* dst,
                            size_t count, cclzDataType_t dtype) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    checkDtype(codec, dtype);
    CCLZ_REQUIRE(src, cclzInvalidArgument, "source is NULL");
    CCLZ_REQUIRE(count == 0 || dst, cclzInvalidArgument, "destination is NULL");
    throwFrameError(implOf(codec).decodeHost(codec->config, static_cast<const uint8_t*>(src),
                                             srcBytes, dtype, count, dst));
  });
}

cclzResult_t cclzDecodeAccumulateHost(cclzCodec_t codec, const void* src, size_t srcBytes,
                                      float* acc, size_t count, cclzDataType_t dtype) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    checkDtype(codec, dtype);
    CCLZ_REQUIRE(src, cclzInvalidArgument, "source is NULL");
    CCLZ_REQUIRE(count == 0 || acc, cclzInvalidArgument, "accumulator is NULL");
    throwFrameError(implOf(codec).decodeAccumulateHost(
        codec->config, static_cast<const uint8_t*>(src), srcBytes, dtype, count, acc));
  });
}

cclzResult_t cclzFrameGetInfo(const void* frame, size_t bytes, cclzFrameInfo_t* info) {
  return guarded(__func__, [&] {
    CCLZ_REQUIRE(frame && info, cclzInvalidArgument, "frame or info is NULL");
    CCLZ_REQUIRE(info->size == sizeof(cclzFrameInfo_t), cclzInvalidArgument,
                 "info->size must be sizeof(cclzFrameInfo_t)");
    CCLZ_REQUIRE(bytes >= kFrameHeaderBytes, cclzCorruptFrame, frameErrorText(kFrameTruncated));
    FrameHeader h;
    std::memcpy(&h, frame, sizeof h);
    // Only the header is given, so a frame may be longer than `bytes`.
    throwFrameError(checkFrameHeader(h, UINT64_MAX));
    const Codec* codec = findCodec(h.codec);
    if (!codec) throwFrameError(kFrameBadField);
    throwFrameError(codec->checkHeader(h));
    info->codec = static_cast<cclzCodecType_t>(h.codec);
    info->dtype = static_cast<cclzDataType_t>(h.dtype);
    info->count = h.count;
    info->frameBytes = h.frameBytes;
    info->chunkElems = h.chunkElems;
    info->numChunks = h.numChunks;
  });
}

#ifdef CCLZ_HAVE_CUDA

cclzResult_t cclzEncode(cclzCodec_t codec, const void* src, size_t count, cclzDataType_t dtype,
                        void* dst, size_t dstCapacity, size_t* encodedBytesDevice,
                        cclzStream_t stream) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    checkDtype(codec, dtype);
    CCLZ_REQUIRE(count == 0 || src, cclzInvalidArgument, "source is NULL");
    CCLZ_REQUIRE(dst, cclzInvalidArgument, "destination is NULL");
    CCLZ_REQUIRE(reinterpret_cast<uintptr_t>(dst) % 16 == 0, cclzInvalidArgument,
                 "destination must be 16-byte aligned");
    CCLZ_REQUIRE(reinterpret_cast<uintptr_t>(src) % dtypeSize(dtype) == 0, cclzInvalidArgument,
                 "source must be aligned to the element size");
    CCLZ_REQUIRE(dstCapacity >= maxEncoded(codec, count, dtype), cclzBufferTooSmall,
                 "destination capacity is below cclzCodecMaxEncodedSize");
    CCLZ_REQUIRE(isDevicePointer(dst) && (count == 0 || isDevicePointer(src)), cclzInvalidArgument,
                 "cclzEncode takes device memory; use cclzEncodeHost for host memory");
    auto* s = reinterpret_cast<cudaStream_t>(stream);
    const Codec& impl = implOf(codec);
    const DeviceWorkspace ws =
        workspaceFor(codec, impl.encodeScratchBytes(codec->config, dtype, count), s);
    impl.encodeDevice(codec->config, dtype, src, count, static_cast<uint8_t*>(dst),
                      reinterpret_cast<uint64_t*>(encodedBytesDevice), ws, s);
    CCLZ_CUDA_CHECK(cudaEventRecord(codec->done, s));
  });
}

cclzResult_t cclzEncodeFeedback(cclzCodec_t codec, cclzFeedback_t feedback, const void* grad,
                                size_t count, cclzDataType_t dtype, void* dst, size_t dstCapacity,
                                size_t* encodedBytesDevice, cclzStream_t stream) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    checkDtype(codec, dtype);
    checkFeedbackFor(feedback, count, cclzMemoryDevice);
    CCLZ_REQUIRE(count == 0 || grad, cclzInvalidArgument, "gradient is NULL");
    CCLZ_REQUIRE(dst, cclzInvalidArgument, "destination is NULL");
    CCLZ_REQUIRE(reinterpret_cast<uintptr_t>(dst) % 16 == 0, cclzInvalidArgument,
                 "destination must be 16-byte aligned");
    CCLZ_REQUIRE(reinterpret_cast<uintptr_t>(grad) % dtypeSize(dtype) == 0, cclzInvalidArgument,
                 "gradient must be aligned to the element size");
    CCLZ_REQUIRE(dstCapacity >= maxEncoded(codec, count, dtype), cclzBufferTooSmall,
                 "destination capacity is below cclzCodecMaxEncodedSize");
    CCLZ_REQUIRE(isDevicePointer(dst) && (count == 0 || isDevicePointer(grad)),
                 cclzInvalidArgument,
                 "cclzEncodeFeedback takes device memory; use cclzEncodeFeedbackHost");
    auto* s = reinterpret_cast<cudaStream_t>(stream);
    const Codec& impl = implOf(codec);
    const DeviceWorkspace ws =
        workspaceFor(codec, impl.encodeScratchBytes(codec->config, dtype, count), s);
    impl.encodeFeedbackDevice(codec->config, dtype, grad, count, feedback->residual, feedback->step,
                              static_cast<uint8_t*>(dst),
                              reinterpret_cast<uint64_t*>(encodedBytesDevice), ws, s);
    ++feedback->step;
    CCLZ_CUDA_CHECK(cudaEventRecord(codec->done, s));
  });
}

cclzResult_t cclzDecode(cclzCodec_t codec, const void* src, size_t srcBytes, void* dst,
                        size_t count, cclzDataType_t dtype, cclzStream_t stream) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    checkDtype(codec, dtype);
    CCLZ_REQUIRE(src, cclzInvalidArgument, "source is NULL");
    CCLZ_REQUIRE(count == 0 || dst, cclzInvalidArgument, "destination is NULL");
    CCLZ_REQUIRE(
        reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(dst) % 16 == 0,
        cclzInvalidArgument, "source and destination must be 16-byte aligned");
    CCLZ_REQUIRE(isDevicePointer(src) && (count == 0 || isDevicePointer(dst)), cclzInvalidArgument,
                 "cclzDecode takes device memory; use cclzDecodeHost for host memory");
    auto* s = reinterpret_cast<cudaStream_t>(stream);
    implOf(codec).decodeDevice(codec->config, static_cast<const uint8_t*>(src), srcBytes, dtype,
                               count, dst, workspaceFor(codec, 0, s), s);
    CCLZ_CUDA_CHECK(cudaEventRecord(codec->done, s));
  });
}

cclzResult_t cclzDecodeAccumulate(cclzCodec_t codec, const void* src, size_t srcBytes, float* acc,
                                  size_t count, cclzDataType_t dtype, cclzStream_t stream) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    checkDtype(codec, dtype);
    CCLZ_REQUIRE(src, cclzInvalidArgument, "source is NULL");
    CCLZ_REQUIRE(count == 0 || acc, cclzInvalidArgument, "accumulator is NULL");
    CCLZ_REQUIRE(
        reinterpret_cast<uintptr_t>(src) % 16 == 0 && reinterpret_cast<uintptr_t>(acc) % 16 == 0,
        cclzInvalidArgument, "source and accumulator must be 16-byte aligned");
    CCLZ_REQUIRE(isDevicePointer(src) && (count == 0 || isDevicePointer(acc)), cclzInvalidArgument,
                 "cclzDecodeAccumulate takes device memory; use cclzDecodeAccumulateHost");
    auto* s = reinterpret_cast<cudaStream_t>(stream);
    implOf(codec).decodeAccumulateDevice(codec->config, static_cast<const uint8_t*>(src), srcBytes,
                                         dtype, count, acc, workspaceFor(codec, 0, s), s);
    CCLZ_CUDA_CHECK(cudaEventRecord(codec->done, s));
  });
}

#else  // no CUDA in this build: the device calls exist and say so

cclzResult_t cclzEncode(cclzCodec_t codec, const void*, size_t, cclzDataType_t, void*, size_t,
                        size_t*, cclzStream_t) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    requireCuda();
  });
}

cclzResult_t cclzEncodeFeedback(cclzCodec_t codec, cclzFeedback_t, const void*, size_t,
                                cclzDataType_t, void*, size_t, size_t*, cclzStream_t) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    requireCuda();
  });
}

cclzResult_t cclzDecode(cclzCodec_t codec, const void*, size_t, void*, size_t, cclzDataType_t,
                        cclzStream_t) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    requireCuda();
  });
}

cclzResult_t cclzDecodeAccumulate(cclzCodec_t codec, const void*, size_t, float*, size_t,
                                  cclzDataType_t, cclzStream_t) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    requireCuda();
  });
}

#endif  // CCLZ_HAVE_CUDA

cclzResult_t cclzCodecSynchronize(cclzCodec_t codec, size_t* lastEncodedBytes) {
  return guarded(__func__, [&] {
    checkCodec(codec);
    if (lastEncodedBytes) *lastEncodedBytes = 0;
#ifdef CCLZ_HAVE_CUDA
    if (!codec->workspace) return;
    CCLZ_CUDA_CHECK(cudaEventSynchronize(codec->done));
    DeviceStatus status;
    CCLZ_CUDA_CHECK(cudaMemcpy(&status, codec->workspace, sizeof status, cudaMemcpyDeviceToHost));
    if (lastEncodedBytes) *lastEncodedBytes = status.encodedBytes;
    if (status.decodeError == kFrameOk && status.encodeError == 0) return;
    // Both words are cleared together (they are adjacent), and both are reported.
    CCLZ_CUDA_CHECK(cudaMemset(&deviceStatus(codec)->decodeError, 0, 2 * sizeof(uint32_t)));
    const std::string encodeText =
        "a device encode met a NaN or Inf in its input (gradient + residual): those blocks were "
        "encoded as NaN and kept their residual";
    if (status.decodeError != kFrameOk)
      CCLZ_FAIL(cclzCorruptFrame, std::string("a device decode rejected its frame: ") +
                                      frameErrorText(status.decodeError) +
                                      (status.encodeError ? "; and " + encodeText : ""));
    CCLZ_FAIL(cclzInvalidArgument, encodeText);
#endif
  });
}

}  // extern "C"
