// What the overlapped GEMMs' two device paths share (device_overlap.cpp: transfers on the
// transport; device_overlap_ce.cpp: copy-engine transfers).
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstdint>

#include "codec/codec.h"
#include "codec/device.h"
#include "common/dtype.h"
#include "common/error.h"
#include "overlap/device_gemm.h"
#include "overlap/host_overlap.h"

namespace cclz {
class Transport;
}

namespace cclz::overlap {

inline uint64_t elemBytes(const OverlapCall& call) {
  return dtypeSize(static_cast<cclzDataType_t>(call.dtype));
}

// A chunk's bytes on the wire: its frame's capacity (the receiver posts the same count; the
// decoder reads the frame's own size from its header), or its plain rows.
inline uint64_t wireBytes(const OverlapCall& call, uint64_t elements) {
  return call.codec ? (call.codec->maxEncodedBytes(call.config, call.dtype, elements) + 15) / 16 * 16
                    : elements * elemBytes(call);
}

// A transfer on the transport, queued on stream: `out` to rank `to` while `in` comes from `from`
// (device_overlap.cpp).
void exchange(Transport& t, int to, const void* out, int from, void* in, uint64_t bytes,
              cudaStream_t stream);

inline bool isCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CCLZ_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

}  // namespace cclz::overlap

#endif  // CCLZ_HAVE_CUDA
