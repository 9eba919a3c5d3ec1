// The "none" codec on the device: a header and a copy.
#include <cuda_runtime.h>

#include "codec/device.h"
#include "codec/none/ref.h"
#include "common/dtype.h"

namespace cclz::none {
namespace {

__global__ void writeHeaderKernel(FrameHeader h, uint8_t* dst, uint64_t* encodedBytesOut,
                                  DeviceStatus* status) {
  *reinterpret_cast<FrameHeader*>(dst) = h;
  if (encodedBytesOut) *encodedBytesOut = h.frameBytes;
  status->encodedBytes = h.frameBytes;
}

// Every block checks the header before it copies, so a bad frame writes nothing.
__global__ void decodeKernel(const uint8_t* src, uint64_t srcBytes, uint8_t* dst, uint64_t bytes,
                             int dtype, uint64_t count, DeviceStatus* status) {
  __shared__ uint32_t error;
  if (threadIdx.x == 0) {
    uint32_t err = kFrameTruncated;
    if (srcBytes >= kFrameHeaderBytes) {
      const FrameHeader h = *reinterpret_cast<const FrameHeader*>(src);
      err = checkFrameHeader(h, srcBytes);
      if (err == kFrameOk) err = checkFrameMatches(h, cclzCodecNone, dtype, count);
      if (err == kFrameOk &&
          (h.frameBytes != kFrameHeaderBytes + bytes || h.chunkElems != 0 || h.numChunks != 0))
        err = kFrameBadField;
    }
    error = err;
    if (err != kFrameOk && blockIdx.x == 0) atomicCAS(&status->decodeError, 0u, err);
  }
  __syncthreads();
  if (error != kFrameOk) return;
  const uint8_t* payload = src + kFrameHeaderBytes;
  const uint64_t vectors = bytes / 16;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < vectors; i += stride)
    reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(payload)[i];
  for (uint64_t i = vectors * 16 + blockIdx.x * blockDim.x + threadIdx.x; i < bytes; i += stride)
    dst[i] = payload[i];
}

}  // namespace

void encodeDevice(int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, cudaStream_t stream) {
  const uint64_t bytes = count * dtypeSize(static_cast<cclzDataType_t>(dtype));
  FrameHeader h;
  writeHeader(dtype, count, reinterpret_cast<uint8_t*>(&h));
  if (bytes)
    CCLZ_CUDA_CHECK(
        cudaMemcpyAsync(dst + kFrameHeaderBytes, src, bytes, cudaMemcpyDeviceToDevice, stream));
  writeHeaderKernel<<<1, 1, 0, stream>>>(h, dst, encodedBytesOut, status);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void decodeDevice(int dtype, const uint8_t* src, uint64_t srcBytes, void* dst, uint64_t count,
                  DeviceStatus* status, cudaStream_t stream) {
  const uint64_t bytes = count * dtypeSize(static_cast<cclzDataType_t>(dtype));
  const uint64_t blocks = std::min<uint64_t>(std::max<uint64_t>(bytes / (256 * 16 * 4), 1), 4096);
  decodeKernel<<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
      src, srcBytes, static_cast<uint8_t*>(dst), bytes, dtype, count, status);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cclz::none
