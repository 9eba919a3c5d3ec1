// Decode-and-accumulate's read-modify-write (1 B code in, fp32 acc in and out per value) by the
// simplest kernel, with the accumulator's loads and stores under each cache hint, beside the same
// kernel writing a second buffer (out of place) and a copy of the same 9 B/value.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)

enum Hint { kDefault, kLdcs, kStcs, kCs, kCg, kLdlu, kStwt, kEvictFirst, kLdEvictFirstStEvictLast, kNoAllocL1 };

__device__ __forceinline__ float4 loadAcc(const float4* p, int hint, uint64_t policy) {
  float4 v;
  switch (hint) {
    case kLdcs: case kCs: return __ldcs(p);
    case kCg: return __ldcg(p);
    case kLdlu: return __ldlu(p);
    case kEvictFirst: case kLdEvictFirstStEvictLast:
      asm volatile("ld.global.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
      return v;
    case kNoAllocL1:
      asm volatile("ld.global.L1::no_allocate.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
      return v;
    default: return *p;
  }
}
__device__ __forceinline__ void storeAcc(float4* p, float4 v, int hint, uint64_t policy, uint64_t lastPolicy) {
  switch (hint) {
    case kStcs: case kCs: __stcs(p, v); return;
    case kCg: __stcg(p, v); return;
    case kStwt: __stwt(p, v); return;
    case kEvictFirst:
      asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "l"(policy) : "memory");
      return;
    case kLdEvictFirstStEvictLast:
      asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, %5;" :: "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "l"(lastPolicy) : "memory");
      return;
    default: *p = v;
  }
}

template <int H>
__global__ void __launch_bounds__(256, 4) acc16(const uint4* __restrict__ codes, const float4* in, float4* out, uint64_t pieces, float s) {
  uint64_t policy, lastPolicy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(lastPolicy));
  uint64_t i = blockIdx.x * 256ull + threadIdx.x;
  if (i >= pieces) return;
  uint4 c = __ldg(codes + i);
  uint32_t w[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float4 a = loadAcc(in + 4 * i + k, H, policy);
    a.x += float(w[k] & 0xFF) * s; a.y += float((w[k] >> 8) & 0xFF) * s;
    a.z += float((w[k] >> 16) & 0xFF) * s; a.w += float(w[k] >> 24) * s;
    storeAcc(out + 4 * i + k, a, H, policy, lastPolicy);
  }
}
__global__ void copyKernel(const float4* __restrict__ a, float4* __restrict__ b, uint64_t n) {
  uint64_t i = blockIdx.x * 256ull + threadIdx.x;
  if (i < n) b[i] = a[i];
}

int main() {
  for (uint64_t values : {uint64_t(32) << 20, uint64_t(128) << 20}) {
    const uint64_t pieces = values / 16;
    uint8_t* codes; float *acc, *acc2, *big1, *big2;
    CK(cudaMalloc(&codes, values)); CK(cudaMalloc(&acc, values * 4)); CK(cudaMalloc(&acc2, values * 4));
    CK(cudaMalloc(&big1, values * 5)); CK(cudaMalloc(&big2, values * 5));
    CK(cudaMemset(codes, 1, values)); CK(cudaMemset(acc, 0, values * 4));
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    auto timeIt = [&](const char* name, auto launch) {
      for (int w = 0; w < 5; ++w) launch();
      cudaDeviceSynchronize();
      cudaEventRecord(e0); for (int k = 0; k < 20; ++k) launch(); cudaEventRecord(e1); cudaEventSynchronize(e1);
      float ms; cudaEventElapsedTime(&ms, e0, e1);
      const double queued = ms * 1e3 / 20;
      std::vector<float> alone;
      for (int k = 0; k < 20; ++k) { cudaEventRecord(e0); launch(); cudaEventRecord(e1); cudaEventSynchronize(e1); cudaEventElapsedTime(&ms, e0, e1); alone.push_back(ms * 1e3f); }
      std::sort(alone.begin(), alone.end());
      printf("%-16s values %9llu queued %8.2f us %7.1f GB/s acc (%5.2f TB/s of 9 B)  alone %8.2f us %7.1f\n", name,
             (unsigned long long)values, queued, values * 4 / queued / 1e3, values * 9 / queued / 1e6, alone[10], values * 4 / alone[10] / 1e3);
    };
    const float s = 0.5f;
    const unsigned grid = (pieces + 255) / 256;
#define RUN(H, name) timeIt(name, [&] { acc16<H><<<grid, 256>>>((const uint4*)codes, (const float4*)acc, (float4*)acc, pieces, s); })
    RUN(kDefault, "default");
    timeIt("outOfPlace", [&] { acc16<kDefault><<<grid, 256>>>((const uint4*)codes, (const float4*)acc, (float4*)acc2, pieces, s); });
    RUN(kLdcs, "ldcs");
    RUN(kStcs, "stcs");
    RUN(kCs, "ldcs+stcs");
    RUN(kCg, "ldcg+stcg");
    RUN(kLdlu, "ldlu");
    RUN(kStwt, "stwt");
    RUN(kEvictFirst, "evictFirst");
    RUN(kLdEvictFirstStEvictLast, "ldEF+stEL");
    RUN(kNoAllocL1, "L1noalloc");
    const uint64_t n4 = values * 9 / 2 / 16;
    timeIt("copyKern", [&] { copyKernel<<<(n4 + 255) / 256, 256>>>((const float4*)big1, (float4*)big2, n4); });
    CK(cudaGetLastError());
    cudaFree(codes); cudaFree(acc); cudaFree(acc2); cudaFree(big1); cudaFree(big2);
  }
  return 0;
}
