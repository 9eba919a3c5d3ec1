// The fp8 encoder's reciprocal of a block scale (codec/fp8/device.cuh, reciprocalOfNormal) against
// the IEEE reciprocal __frcp_rn, on every float it is used for and more: each exponent field
// 1..252, each mantissa, both signs (2 x 252 x 2^23 values). The block scales lie in
// [2^-107, 2^122) (encode_kernel.cu, blockScaleOfRow).
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "codec/fp8/device.cuh"

namespace {

struct Mismatches {
  unsigned long long count;
  uint32_t firstBits;
};

__global__ void compareReciprocals(uint32_t firstBits, uint64_t numValues, Mismatches* out) {
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < numValues;
       i += stride) {
    const uint32_t magnitude = firstBits + static_cast<uint32_t>(i >> 1);
    const uint32_t bits = magnitude | (static_cast<uint32_t>(i & 1) << 31);
    const float s = __uint_as_float(bits);
    const float fast = cclz::fp8::reciprocalOfNormal(s), ieee = __frcp_rn(s);
    if (__float_as_uint(fast) != __float_as_uint(ieee)) {
      if (atomicAdd(&out->count, 1ull) == 0) out->firstBits = bits;
    }
  }
}

bool haveGpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

TEST(Fp8Reciprocal, EqualsIeeeOnEveryNormalExponentTo252) {
  if (!haveGpu()) GTEST_SKIP() << "no GPU";
  constexpr uint32_t kFirst = 1u << 23;                   // exponent field 1, mantissa 0
  constexpr uint32_t kEnd = 253u << 23;                   // past exponent field 252
  constexpr uint64_t kValues = 2ull * (kEnd - kFirst);    // both signs
  Mismatches* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, sizeof(Mismatches)), cudaSuccess);
  ASSERT_EQ(cudaMemset(d, 0, sizeof(Mismatches)), cudaSuccess);
  compareReciprocals<<<132 * 8, 256>>>(kFirst, kValues, d);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  Mismatches h{};
  ASSERT_EQ(cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  float first = 0.0f;
  std::memcpy(&first, &h.firstBits, sizeof first);
  EXPECT_EQ(h.count, 0u) << "first mismatch at s = " << first << " (bits 0x" << std::hex
                         << h.firstBits << ")";
}

}  // namespace
