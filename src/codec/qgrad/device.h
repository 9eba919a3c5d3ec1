// Host-side entry points of the qgrad kernels (kernels.cu; compiled only with CUDA). They queue
// work on the stream and return; the API layer and the adapter have checked the arguments.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstdint>

#include "codec/device.h"
#include "codec/qgrad/format.h"
#include "codec/residual.h"

namespace cclz::qgrad {

// Encodes count elements of src (fp32 or bf16) into dst; residual: none (plain encode) or count
// device values (fp32 or bf16, 16-byte aligned), read and rewritten in the same pass. A NaN or
// Inf sets status->encodeError.
void encodeDevice(const Params& p, int dtype, const void* src, uint64_t count, Residual residual,
                  uint64_t step, uint8_t* dst, uint64_t* encodedBytesOut, DeviceStatus* status,
                  cudaStream_t stream);

// Decodes a frame of p's block size and bit width (others are kFrameMismatch) into dst (16-byte
// aligned), or adds it to acc (16-byte aligned) when accumulate is set. A rejected frame sets
// status->decodeError and writes nothing.
void decodeDevice(const Params& p, int dtype, const uint8_t* src, uint64_t srcBytes, void* dst,
                  uint64_t count, bool accumulate, DeviceStatus* status, cudaStream_t stream);

// One frame's step of a sum over frames (ReduceStep, codec/device.h): acc 32-byte aligned, the
// store (if any) 16-byte aligned.
void decodeReduceDevice(const Params& p, int dtype, const uint8_t* src, uint64_t srcBytes,
                        uint64_t count, const ReduceStep& step, DeviceStatus* status,
                        cudaStream_t stream);

}  // namespace cclz::qgrad

#endif  // CCLZ_HAVE_CUDA
