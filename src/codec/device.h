// Host-side entry points of the codec kernels (compiled only with CUDA). They validate nothing
// the API layer has already checked; they queue work on the stream and return.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "codec/fp8/format.h"
#include "common/error.h"

namespace cclz {

// The codec handle's device workspace begins with this; per-chunk state follows it.
struct DeviceStatus {
  uint64_t encodedBytes;  // size of the last encoded frame
  uint32_t decodeError;   // first FrameError a decode met since the last check (0 = none)
  uint32_t encodeError;   // non-zero: an encode met a NaN or Inf since the last check (qgrad)
};
static_assert(sizeof(DeviceStatus) == 16, "layout is fixed");

// One frame's step of a sum over frames (a reduce-scatter's decode stage): acc (fp32, one value
// per element) += the decoded frame. fromZero: acc is taken as zeros and not read (the first
// frame). store, if not NULL (the last frame): round(sum / divisor) goes there in the frame's
// dtype, and acc is not written. The bits are those of zeroing acc, adding each frame and storing
// (collective/reduce.h) one kernel at a time; the fused steps save the accumulator's memset, a
// read, and a write and read of it per call. acc and store: 16-byte aligned.
struct ReduceStep {
  float* acc = nullptr;
  bool fromZero = false;
  void* store = nullptr;
  float divisor = 1.0f;
};

// A whole sum over frames in one pass (a reduce-scatter's decode stage once all its frames are
// in: Codec::decodeSumDevice): store = round((frame 0 + frame 1 + ... + frame n-1) / divisor) in
// the frames' dtype, the frames added in that order in fp32 from zero. The bits of the n steps of
// ReduceStep (first from zero, last stored), with no accumulator: per value the frames' codes
// are read and the dtype written once, where the steps also write and read 4 bytes of fp32 per
// frame but the last. frames[r]: frameBytes each (device memory); store: 16-byte aligned.
constexpr int kMaxSumFrames = 8;  // a node's GPUs, the NVLink domain the fused paths span
struct FrameSum {
  const uint8_t* frames[kMaxSumFrames] = {};
  int n = 0;
  uint64_t frameBytes = 0;
  void* store = nullptr;
  float divisor = 1.0f;
};

// Frames of one count encoded together (Codec::encodeBatchDevice): a reduce-scatter's piece, one
// block per destination. Frame f is src[f]'s count values encoded into dst[f] (capacity >=
// maxEncodedBytes), its size written to encodedBytesOut[f] where that is not NULL (device
// memory). The bytes are those of n encodeDevice calls; a codec that can runs the n encodes'
// kernels as one launch each, so that their fixed costs (the fp8 encode's sampling kernels) are
// paid once, not n times.
constexpr int kMaxBatchFrames = kMaxSumFrames;
struct FrameBatch {
  const void* src[kMaxBatchFrames] = {};
  uint8_t* dst[kMaxBatchFrames] = {};
  uint64_t* encodedBytesOut[kMaxBatchFrames] = {};
  int n = 0;
};

// Throws cclz::Error(cclzUnhandledCudaError) with the call and CUDA's message.
#define CCLZ_CUDA_CHECK(call)                                               \
  do {                                                                      \
    cudaError_t err_ = (call);                                              \
    if (err_ != cudaSuccess)                                                \
      CCLZ_FAIL(cclzUnhandledCudaError,                                     \
                std::string(#call " failed: ") + cudaGetErrorString(err_)); \
  } while (0)

// Multiprocessors of the device, read once per process (launch shapes only: a process whose
// devices differ gets the first one's count, which costs speed, not correctness).
inline int multiprocessorCount() {
  static std::atomic<int> multiprocessors{0};
  int sms = multiprocessors.load(std::memory_order_relaxed);
  if (sms == 0) {
    int device = 0;
    CCLZ_CUDA_CHECK(cudaGetDevice(&device));
    CCLZ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    multiprocessors.store(sms, std::memory_order_relaxed);
  }
  return sms;
}

namespace lossless {

// Device scratch an encode of numChunks chunks needs: a work counter (the next chunk to take), a
// count of the warps done and two state words per chunk (the decoupled look-back: the chunk's
// size or end offset, and the sum of 32 chunks' sizes); zeroed by encodeDevice unless the
// scratch carries an epoch.
inline uint64_t encodeScratchBytes(uint64_t numChunks) { return 8 + 16 * numChunks; }

// Encodes into dst (capacity >= maxEncodedBytes, encode_kernel.cu); scratch holds
// encodeScratchBytes. scratchEpoch (DeviceWorkspace): 0, the scratch is zeroed first; otherwise
// it is the handle's, and the chunk states carry the epoch instead (no memset, no second launch).
void encodeDevice(uint32_t chunkElems, int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, uint8_t* scratch,
                  uint32_t scratchEpoch, cudaStream_t stream);
// Decodes a frame of the given chunk size (decode_kernel.cu).
void decodeDevice(uint32_t chunkElems, int dtype, const uint8_t* src, uint64_t srcBytes, void* dst,
                  uint64_t count, DeviceStatus* status, cudaStream_t stream);

}  // namespace lossless

namespace none {
void encodeDevice(int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, cudaStream_t stream);
void decodeDevice(int dtype, const uint8_t* src, uint64_t srcBytes, void* dst, uint64_t count,
                  DeviceStatus* status, cudaStream_t stream);
}  // namespace none

namespace fp8 {
// Device scratch an encode of count values needs to decide from the data (the row length where
// p.shape is kShapeAuto, the smoothing where the frame may be smoothed); 0 when it decides nothing.
uint64_t encodeScratchBytes(const Params& p, uint64_t count);
// Encodes count values into dst (capacity >= maxEncodedBytes): one pass over the input, after
// the small sampling kernels of the decisions (scratch: encodeScratchBytes, 16-byte aligned, any
// contents: the kernels zero what they need).
void encodeDevice(const Params& p, int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, uint8_t* scratch,
                  cudaStream_t stream);
// The scratch a batch of n frames of count values needs: each frame's encodeScratchBytes, 16-byte
// aligned, one after another.
uint64_t encodeBatchScratchBytes(const Params& p, uint64_t count, int n);
// The batch's frames (FrameBatch, 1 to kMaxBatchFrames), each the bytes encodeDevice writes, with
// one launch of each of the encode's kernels for all of them (the frame is a kernel's blockIdx.y).
void encodeBatchDevice(const Params& p, int dtype, const FrameBatch& batch, uint64_t count,
                       DeviceStatus* status, uint8_t* scratch, cudaStream_t stream);
// Decodes into dst (dtype), or, when reduce is not NULL, takes that step of a sum: one pass.
void decodeDevice(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst,
                  const ReduceStep* reduce, DeviceStatus* status, cudaStream_t stream);
// The sum of plain frames (not rotated, not smoothed: policy kRotateNever, every E4M3/E5M2 frame
// by default) in one pass (sum_kernel.cu). A frame that is not plain, or whose grid differs from
// the first's, is rejected (kFrameMismatch) and nothing is stored.
void sumDevice(const FrameSum& sum, int dtype, uint64_t count, DeviceStatus* status,
               cudaStream_t stream);
}  // namespace fp8

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
