// The roofline of decode-and-accumulate's traffic (1 B code in, fp32 acc in and out per value)
// measured by the simplest kernels, beside a device copy of the same 9 B/value.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

// One thread per 16 values, full grid.
__global__ void __launch_bounds__(256) accFull(const uint4* __restrict__ codes, float4* __restrict__ acc, uint64_t pieces, float s) {
  uint64_t i = blockIdx.x * 256ull + threadIdx.x;
  if (i >= pieces) return;
  uint4 c = codes[i];
  uint32_t w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float4 a = acc[4 * i + k];
    a.x += float(w[k] & 0xFF) * s; a.y += float((w[k] >> 8) & 0xFF) * s;
    a.z += float((w[k] >> 16) & 0xFF) * s; a.w += float(w[k] >> 24) * s;
    acc[4 * i + k] = a;
  }
}
// Same, each warp takes two pieces per lane (like decodePlain's step), a block of 8 warps.
__global__ void __launch_bounds__(256) accTwo(const uint4* __restrict__ codes, float4* __restrict__ acc, uint64_t pieces, float s) {
  const uint64_t warp = (blockIdx.x * 256ull + threadIdx.x) / 32, warps = gridDim.x * 8ull;
  const uint32_t lane = threadIdx.x & 31;
  for (int h = 0; h < 2; ++h) {
    uint64_t i = (warp + h * warps) * 32 + lane;
    if (i >= pieces) return;
    uint4 c = codes[i];
    uint32_t w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float4 a = acc[4 * i + k];
      a.x += float(w[k] & 0xFF) * s; a.y += float((w[k] >> 8) & 0xFF) * s;
      a.z += float((w[k] >> 16) & 0xFF) * s; a.w += float(w[k] >> 24) * s;
      acc[4 * i + k] = a;
    }
  }
}
// Resident grid-stride loop, one piece per step.
__global__ void __launch_bounds__(256) accLoop(const uint4* __restrict__ codes, float4* __restrict__ acc, uint64_t pieces, float s) {
  for (uint64_t i = blockIdx.x * 256ull + threadIdx.x; i < pieces; i += gridDim.x * 256ull) {
    uint4 c = codes[i];
    uint32_t w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      float4 a = acc[4 * i + k];
      a.x += float(w[k] & 0xFF) * s; a.y += float((w[k] >> 8) & 0xFF) * s;
      a.z += float((w[k] >> 16) & 0xFF) * s; a.w += float(w[k] >> 24) * s;
      acc[4 * i + k] = a;
    }
  }
}
__global__ void copyKernel(const float4* __restrict__ a, float4* __restrict__ b, uint64_t n) {
  uint64_t i = blockIdx.x * 256ull + threadIdx.x;
  if (i < n) b[i] = a[i];
}

int main() {
  int sms = 0; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  for (uint64_t values : {uint64_t(8) << 20, uint64_t(32) << 20, uint64_t(128) << 20}) {
    const uint64_t pieces = values / 16;
    uint8_t* codes; float* acc; float* acc2;
    CK(cudaMalloc(&codes, values)); CK(cudaMalloc(&acc, values * 4)); CK(cudaMalloc(&acc2, values * 5)); float* acc3; CK(cudaMalloc(&acc3, values * 5));
    CK(cudaMemset(codes, 1, values)); CK(cudaMemset(acc, 0, values * 4));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    auto timeIt = [&](const char* name, auto launch) {
      for (int w = 0; w < 5; ++w) launch();
      cudaDeviceSynchronize();
      // queued: 20 back to back
      cudaEventRecord(e0); for (int k = 0; k < 20; ++k) launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1);
      double queued = ms * 1e3 / 20;
      std::vector<float> alone;
      for (int k = 0; k < 20; ++k) { cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1); cudaEventElapsedTime(&ms, e0, e1); alone.push_back(ms * 1e3f); }
      std::sort(alone.begin(), alone.end());
      printf("%-10s values %9llu  queued %8.2f us (%7.1f GB/s of fp32 acc, %6.2f TB/s of 9 B/value)  alone %8.2f us (%7.1f)\n", name,
             (unsigned long long)values, queued, values * 4 / queued / 1e3, values * 9 / queued / 1e6, alone[10], values * 4 / alone[10] / 1e3);
    };
    const float s = 0.5f;
    timeIt("accFull", [&] { accFull<<<(pieces + 255) / 256, 256>>>((const uint4*)codes, (float4*)acc, pieces, s); });
    timeIt("accTwo", [&] { accTwo<<<(pieces / 32 + 15) / 16, 256>>>((const uint4*)codes, (float4*)acc, pieces, s); });
    for (int per : {4, 8}) {
      char name[32]; snprintf(name, sizeof name, "accLoop%d", per);
      timeIt(name, [&] { accLoop<<<sms * per, 256>>>((const uint4*)codes, (float4*)acc, pieces, s); });
    }
    // copy of the same 9 B/value: 4.5 B/value read, 4.5 written
    const uint64_t n4 = values * 9 / 2 / 16;
    timeIt("copyKern", [&] { copyKernel<<<(n4 + 255) / 256, 256>>>((const float4*)acc3, (float4*)acc2, n4); });
    timeIt("memcpy", [&] { cudaMemcpyAsync(acc2, acc3, values * 9 / 2, cudaMemcpyDeviceToDevice); });
    CK(cudaGetLastError());
    cudaFree(codes); cudaFree(acc); cudaFree(acc2); cudaFree(acc3);
  }
  return 0;
}
