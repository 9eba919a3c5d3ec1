// The fused NVLink all-gather's kernel (fused_gather.cpp runs it; docs/collectives.md, "Fused
// NVLink paths"): a C++17 CUDA unit apart from the host code (C++20), with nothing of the
// collective layer's headers.
#pragma once

#include "transport/nccl/nccl_symmetric.h"

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

#include <cuda_runtime_api.h>

#include <cstdint>

#include "codec/device.h"

namespace cclz {

// The LSA barriers the device communicator holds: one per CTA of the gather kernel (a barrier
// session is per CTA, and CTA i of every rank meets CTA i of its peers). The kernel takes at most
// this many CTAs.
constexpr int kFusedMaxCtas = 1024;

// Blocks of the gather kernel for frames of `count` values (the same on every rank for the same
// count on the same GPU model).
unsigned fusedGatherGrid(uint64_t count);

// One piece: an LSA barrier; every rank's fp8 frame (frameBytes, count values of dtype) at
// offset 0 of its window, decoded into out + r * rankStride for rank r (16-byte aligned), the
// rank's own first; a closing LSA barrier. Queued on `stream`; status: the decode's error word.
// abortFlag (host-mapped memory, as a device pointer): once the host sets it non-zero, a kernel
// waiting in a barrier gives up and ends (its output is then undefined).
void launchFusedGather(int dtype, unsigned grid, cudaStream_t stream, const ncclDevComm& comm,
                       ncclWindow_t window, uint64_t frameBytes, uint64_t count, uint8_t* out,
                       uint64_t rankStride, DeviceStatus* status,
                       const volatile uint32_t* abortFlag);

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL_DEVICE_API
