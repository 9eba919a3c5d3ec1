// Vector loads of 8 consecutive input values as fp32, shared by the codec kernels (fp8, qgrad).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cclz/cclz.h"
#include "common/float_bits.h"

namespace cclz {

// A 16-bit value of dtype Dtype (bf16 or fp16) in the low bits of w, as fp32.
template <int Dtype>
__device__ __forceinline__ float halfWordAsFloat(uint32_t w) {
  return Dtype == cclzBfloat16 ? bf16ToFloat(static_cast<uint16_t>(w))
                               : halfToFloat(static_cast<uint16_t>(w));
}

// Elements i..i+7 of src (bf16, fp16 or fp32) as fp32, in two or one 16-byte loads. The caller
// has checked that all 8 exist and that src + i is 16-byte aligned.
template <int Dtype>
__device__ __forceinline__ void loadEightAsFloat(const void* src, uint64_t i, float* v) {
  if constexpr (Dtype == cclzFloat32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(src) + i);
    const float4 a = p[0], b = p[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z,
    v[7] = b.w;
  } else {
    const uint4 w = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(src) + i);
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[2 * j] = halfWordAsFloat<Dtype>(words[j] & 0xFFFFu);
      v[2 * j + 1] = halfWordAsFloat<Dtype>(words[j] >> 16);
    }
  }
}

}  // namespace cclz
