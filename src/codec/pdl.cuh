// Programmatic dependent launch (sm_90), shared by the codecs' kernels: a kernel waits for the one
// before it in its stream, memory included, before it touches global memory, and lets the next
// one start (its blocks are scheduled and wait) before it ends. For calls in a row (a pipeline's
// pieces) the launch of one then overlaps the run of the one before. Without the launch attribute
// (or before sm_90) the wait returns at once: the stream already ordered the two. CCLZ_PDL
// (launch_env.h) turns it off.
// NOTE: a kernel that more kernels like it may follow (a queue of calls) lets the next one start
// after its own wait, never before. Otherwise a queue of such kernels cascades (each waiting
// kernel's blocks let the next one's be scheduled too, filling the SMs with blocks that wait): a
// 4 MiB lossless decode, 2000 calls back to back, takes 12.8 us per call against 7.9 without PDL
// (docs/kernels/lossless.md, "Small messages and programmatic dependent launch"). The fp8
// sampling kernels let the next start first: their chain is bounded, since each call's first
// kernel is launched plain.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <utility>

#include "codec/device.h"
#include "codec/launch_env.h"

namespace cclz {

__device__ __forceinline__ void letNextKernelStart() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void waitForPreviousKernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Whether launches may be programmatic: CCLZ_PDL allows it and the calling thread's device has
// it (sm_90 and later). The answer per device is kept (0: not asked yet, 1: no, 2: yes): the
// runtime's attribute query costs a few hundred ns of host time per launch.
inline bool programmaticLaunchSupported() {
  if (!programmaticLaunchFromEnvironment()) return false;
  constexpr int kKeptDevices = 64;
  static std::atomic<uint8_t> known[kKeptDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const bool kept = device >= 0 && device < kKeptDevices;
  if (kept) {
    const uint8_t answer = known[device].load(std::memory_order_relaxed);
    if (answer != 0) return answer == 2;
  }
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  if (kept) known[device].store(major >= 9 ? 2 : 1, std::memory_order_relaxed);
  return major >= 9;
}

// kernel<<<grid, threads, sharedBytes, stream>>>(args...), programmatic where `programmatic`
// says so: the kernel must then call waitForPreviousKernel before it reads or writes global
// memory.
template <typename... Params, typename... Args>
void launchKernel(void (*kernel)(Params...), dim3 grid, unsigned threads, size_t sharedBytes,
                  cudaStream_t stream, bool programmatic, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = sharedBytes;
  config.stream = stream;
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  if (programmatic) config.attrs = &early, config.numAttrs = 1;
  CCLZ_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace cclz
