// The qgrad codec on the device: the fused error-feedback encode and the decode (plain or
// accumulating into fp32), producing exactly the CPU reference's bytes and residuals (ref.cpp).
//
// Memory bound by design: one thread takes one group of 8 consecutive elements (kGroupElems), so
// fp32 input is two 16-byte loads (and two for the residual), bf16 one, and the group's codes are
// one store of `bits` bytes at a `bits`-aligned address; a block's scale is found by a butterfly
// of shuffles over the blockElems/8 lanes that hold it (consecutive lanes of one warp, since
// blocks of <= 256 elements never straddle a warp's 256). No atomics on the data path; the only
// one marks a non-finite block in the status word.
#include <cuda_runtime.h>

#include <algorithm>

#include "codec/device.h"
#include "codec/load_device.cuh"
#include "codec/qgrad/device.h"
#include "codec/qgrad/format.h"

namespace cclz::qgrad {
namespace {

constexpr int kThreads = 256;

struct EncodeArgs {
  const void* src;
  Residual residual;  // none: plain encode
  uint8_t* dst;
  uint64_t count;
  uint64_t key;  // drawKey(seed, step)
  uint32_t blockElems, rounding;
  bool srcAligned;  // 16-byte aligned: vector loads
  Layout layout;
  FrameHeader header;
  uint64_t* encodedBytesOut;
  DeviceStatus* status;
};

// The group's 8 elements from `src` as fp32 (0 past count).
template <typename In>
__device__ __forceinline__ void loadGroup(const void* src, uint64_t i0, uint64_t count,
                                          bool aligned, float (&x)[kGroupElems]) {
  constexpr int dtype = sizeof(In) == 4 ? cclzFloat32 : cclzBfloat16;
  if (aligned && i0 + kGroupElems <= count) {
    loadEightAsFloat<dtype>(src, i0, x);
    return;
  }
  for (int j = 0; j < kGroupElems; ++j)
    x[j] = i0 + j < count ? loadAsFloat(src, dtype, i0 + j) : 0.0f;
}

// 8 fp32 values from element i0, 32-byte aligned (0 past count): the fp32 accumulator, and an
// fp32 residual (ours, cudaMalloc'd by cclzFeedbackCreate, or an aligned copy of a piece of it).
__device__ __forceinline__ void loadFloats(const float* r, uint64_t i0, uint64_t count,
                                           float (&x)[kGroupElems]) {
  if (i0 + kGroupElems <= count) {
    const float4 a = reinterpret_cast<const float4*>(r + i0)[0];
    const float4 b = reinterpret_cast<const float4*>(r + i0)[1];
    const float v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    for (int j = 0; j < kGroupElems; ++j) x[j] = v[j];
  } else {
    for (int j = 0; j < kGroupElems; ++j) x[j] = i0 + j < count ? r[i0 + j] : 0.0f;
  }
}

__device__ __forceinline__ void storeFloats(float* out, uint64_t i0, uint64_t count,
                                            const float (&v)[kGroupElems]) {
  if (i0 + kGroupElems <= count) {
    reinterpret_cast<float4*>(out + i0)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4*>(out + i0)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    for (int j = 0; j < kGroupElems; ++j)
      if (i0 + j < count) out[i0 + j] = v[j];
  }
}

// One group's codes (8 x kBits bits = kBits bytes) at byte i0*kBits/8 of the codes region.
template <int kBits>
__device__ __forceinline__ void storeCodes(uint8_t* codes, uint64_t i0, uint64_t packed) {
  uint8_t* p = codes + i0 * kBits / 8;
  if constexpr (kBits == 8) {
    *reinterpret_cast<uint2*>(p) =
        make_uint2(static_cast<uint32_t>(packed), static_cast<uint32_t>(packed >> 32));
  } else if constexpr (kBits == 4) {
    *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(packed);
  } else {
    *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(packed);
  }
}

template <int kBits>
__device__ __forceinline__ uint64_t loadCodes(const uint8_t* codes, uint64_t i0) {
  const uint8_t* p = codes + i0 * kBits / 8;
  if constexpr (kBits == 8) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    return v.x | (static_cast<uint64_t>(v.y) << 32);
  } else if constexpr (kBits == 4) {
    return *reinterpret_cast<const uint32_t*>(p);
  } else {
    return *reinterpret_cast<const uint16_t*>(p);
  }
}

// The header, the zero gap between scales and codes, the zero tail after the last group's codes,
// and the frame's size: written by one thread, disjoint from everything the others write.
__device__ void writeFrameEdges(const EncodeArgs& a, int bits) {
  *reinterpret_cast<FrameHeader*>(a.dst) = a.header;
  for (uint64_t b = a.layout.scalesOffset + 2 * a.layout.numBlocks; b < a.layout.codesOffset; ++b)
    a.dst[b] = 0;
  const uint64_t groups = (a.count + kGroupElems - 1) / kGroupElems;
  for (uint64_t b = a.layout.codesOffset + groups * bits; b < a.layout.frameBytes; ++b)
    a.dst[b] = 0;
  if (a.encodedBytesOut) *a.encodedBytesOut = a.layout.frameBytes;
  a.status->encodedBytes = a.layout.frameBytes;
}

// Residual kinds of the encode kernel: none (a plain encode), fp32, bf16.
constexpr int kNoResidual = 0, kFp32Residual = 1, kBf16Residual = 2;

template <int kResidual>
__device__ __forceinline__ void loadResidual(const Residual& r, uint64_t i0, uint64_t count,
                                             float (&x)[kGroupElems]) {
  if constexpr (kResidual == kFp32Residual)
    loadFloats(static_cast<const float*>(r.data), i0, count, x);
  else  // a group of 8 bf16 is one 16-byte word (the residual is 16-byte aligned)
    loadGroup<uint16_t>(r.data, i0, count, true, x);
}

template <int kResidual>
__device__ __forceinline__ void storeResidual(const Residual& r, uint64_t i0, uint64_t count,
                                              const float (&v)[kGroupElems]);

template <int kBits, typename In, int kResidual>
__global__ void __launch_bounds__(kThreads) encodeKernel(const EncodeArgs a) {
  constexpr bool kFeedback = kResidual != kNoResidual;
  if (blockIdx.x == 0 && threadIdx.x == 0) writeFrameEdges(a, kBits);
  const uint64_t group = static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const uint64_t i0 = group * kGroupElems;
  // NOTE: no early return: every lane of the warp must reach the shuffles. Lanes past the end
  // carry zeros, which do not change a maximum.
  float x[kGroupElems];
  loadGroup<In>(a.src, i0, a.count, a.srcAligned, x);
  if constexpr (kFeedback) {
    float r[kGroupElems];
    loadResidual<kResidual>(a.residual, i0, a.count, r);
    for (int j = 0; j < kGroupElems; ++j) x[j] = addRn(x[j], r[j]);
  }
  float m = 0.0f;
  for (int j = 0; j < kGroupElems; ++j) m = fmaxf(m, magnitudeOrInf(x[j]));
  const uint32_t lanesPerBlock = a.blockElems / kGroupElems;
  for (uint32_t offset = 1; offset < lanesPerBlock; offset <<= 1)
    m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, static_cast<int>(offset)));
  if (i0 >= a.count) return;

  constexpr int kQmax = (1 << (kBits - 1)) - 1;
  const uint16_t scale = scaleFor(m, kQmax);
  const bool leader = i0 % a.blockElems == 0;
  if (leader) {
    *reinterpret_cast<uint16_t*>(a.dst + a.layout.scalesOffset + 2 * (i0 / a.blockElems)) = scale;
  }
  uint8_t* codes = a.dst + a.layout.codesOffset;
  if (scale == kNanScale) {  // docs/formats.md: codes 0, residual kept, reported
    storeCodes<kBits>(codes, i0, 0);
    if (leader) atomicOr(&a.status->encodeError, 1u);
    return;
  }
  const float s = scaleValue(scale), rs = reciprocal(s);
  uint64_t packed = 0;
  float rest[kGroupElems];
  for (int j = 0; j < kGroupElems; ++j) {
    const uint64_t i = i0 + j;
    int q = 0;
    if (i < a.count) {
      const float draw = a.rounding == kRoundStochastic ? uniformDraw(a.key, i) : 0.0f;
      q = quantize(x[j], rs, kQmax, static_cast<int>(a.rounding), draw);
    }
    packed |= static_cast<uint64_t>(codeBits(q, kBits)) << (j * kBits);
    rest[j] = subRn(x[j], dequantize(q, s));
  }
  storeCodes<kBits>(codes, i0, packed);
  if constexpr (kFeedback) storeResidual<kResidual>(a.residual, i0, a.count, rest);
}

struct DecodeArgs {
  const uint8_t* src;
  uint64_t srcBytes;
  void* dst;  // dtype elements, or the fp32 accumulator (reduce.acc for kReduce)
  uint64_t count;
  int dtype;
  uint32_t blockElems, bits;
  DeviceStatus* status;
  ReduceStep reduce;  // kReduce only: its fromZero, store and divisor
};

// What the decode kernel does with its values: stores them in the dtype, adds them to the fp32
// accumulator, or takes a fused first or last step of a sum (ReduceStep, codec/device.h). The
// plain accumulate keeps its own instantiation.
constexpr int kStore = 0, kAccumulate = 1, kReduce = 2;

// y (8 values from element i0) into out (Out: float, or uint16_t for bf16), as the plain decode
// stores them.
template <typename Out>
__device__ __forceinline__ void storeValues(void* dst, uint64_t i0, uint64_t count,
                                            const float (&y)[kGroupElems]) {
  if constexpr (sizeof(Out) == 4) {
    storeFloats(static_cast<float*>(dst), i0, count, y);
  } else {
    uint16_t* out = static_cast<uint16_t*>(dst);
    if (i0 + kGroupElems <= count) {
      uint32_t w[4];
      for (int j = 0; j < 4; ++j)
        w[j] = floatToBf16(y[2 * j]) | (static_cast<uint32_t>(floatToBf16(y[2 * j + 1])) << 16);
      *reinterpret_cast<uint4*>(out + i0) = make_uint4(w[0], w[1], w[2], w[3]);
    } else {
      for (int j = 0; j < kGroupElems; ++j)
        if (i0 + j < count) out[i0 + j] = floatToBf16(y[j]);
    }
  }
}

template <int kResidual>
__device__ __forceinline__ void storeResidual(const Residual& r, uint64_t i0, uint64_t count,
                                              const float (&v)[kGroupElems]) {
  if constexpr (kResidual == kFp32Residual)
    storeFloats(static_cast<float*>(r.data), i0, count, v);
  else  // rounded to bf16 to nearest even, as the reference's Residual::store
    storeValues<uint16_t>(r.data, i0, count, v);
}

// Every CUDA block checks the header before it touches the output, so a bad frame writes nothing.
__device__ bool headerValid(const DecodeArgs& a) {
  __shared__ uint32_t error;
  if (threadIdx.x == 0) {
    uint32_t err = kFrameTruncated;
    if (a.src && a.srcBytes >= kFrameHeaderBytes) {
      const FrameHeader h = *reinterpret_cast<const FrameHeader*>(a.src);
      err = checkFrameHeader(h, a.srcBytes);
      if (err == kFrameOk) err = checkFrameMatches(h, cclzCodecQgrad, a.dtype, a.count);
      if (err == kFrameOk) err = checkQgradHeader(h);
      if (err == kFrameOk && (h.chunkElems != a.blockElems || h.params[0] != a.bits))
        err = kFrameMismatch;  // the device decoder is specialized for the handle's B and b
    }
    error = err;
    if (err != kFrameOk && blockIdx.x == 0) atomicCAS(&a.status->decodeError, 0u, err);
  }
  __syncthreads();
  return error == kFrameOk;
}

template <int kBits, int kMode, typename Out>
__global__ void __launch_bounds__(kThreads) decodeKernel(const DecodeArgs a) {
  if (!headerValid(a)) return;
  const uint64_t i0 = (static_cast<uint64_t>(blockIdx.x) * kThreads + threadIdx.x) * kGroupElems;
  if (i0 >= a.count) return;
  const Layout l = frameLayout(a.count, a.blockElems, kBits);
  const uint16_t scale =
      *reinterpret_cast<const uint16_t*>(a.src + l.scalesOffset + 2 * (i0 / a.blockElems));
  const float s = scaleValue(scale);
  const uint64_t packed = loadCodes<kBits>(a.src + l.codesOffset, i0);
  float y[kGroupElems];
  for (int j = 0; j < kGroupElems; ++j)
    y[j] = dequantize(codeValue(static_cast<uint32_t>(packed >> (j * kBits)) & ((1u << kBits) - 1u),
                                kBits),
                      s);
  if constexpr (kMode == kAccumulate) {
    float* acc = static_cast<float*>(a.dst);
    float old[kGroupElems];
    loadFloats(acc, i0, a.count, old);
    for (int j = 0; j < kGroupElems; ++j) y[j] = addRn(old[j], y[j]);
    storeFloats(acc, i0, a.count, y);
  } else if constexpr (kMode == kReduce) {
    // The bits of zero, decode-and-accumulate and store (collective/reduce.h) taken apart.
    float* acc = a.reduce.acc;
    float old[kGroupElems] = {};
    if (!a.reduce.fromZero) loadFloats(acc, i0, a.count, old);
    for (int j = 0; j < kGroupElems; ++j) y[j] = addRn(old[j], y[j]);
    if (!a.reduce.store) {
      storeFloats(acc, i0, a.count, y);
    } else {
      for (int j = 0; j < kGroupElems; ++j) y[j] = divRn(y[j], a.reduce.divisor);
      storeValues<Out>(a.reduce.store, i0, a.count, y);
    }
  } else {
    storeValues<Out>(a.dst, i0, a.count, y);
  }
}

unsigned gridFor(uint64_t count) {
  const uint64_t groups = (count + kGroupElems - 1) / kGroupElems;
  return static_cast<unsigned>(std::max<uint64_t>((groups + kThreads - 1) / kThreads, 1));
}

template <int kBits, typename In>
void launchEncodeOf(const EncodeArgs& a, int residual, unsigned grid, cudaStream_t stream) {
  if (residual == kFp32Residual)
    encodeKernel<kBits, In, kFp32Residual><<<grid, kThreads, 0, stream>>>(a);
  else if (residual == kBf16Residual)
    encodeKernel<kBits, In, kBf16Residual><<<grid, kThreads, 0, stream>>>(a);
  else
    encodeKernel<kBits, In, kNoResidual><<<grid, kThreads, 0, stream>>>(a);
}

template <int kBits>
void launchEncode(const EncodeArgs& a, int dtype, cudaStream_t stream) {
  const unsigned grid = gridFor(a.count);
  const int residual = !a.residual                        ? kNoResidual
                       : a.residual.dtype == cclzBfloat16 ? kBf16Residual
                                                          : kFp32Residual;
  if (dtype == cclzFloat32)
    launchEncodeOf<kBits, float>(a, residual, grid, stream);
  else
    launchEncodeOf<kBits, uint16_t>(a, residual, grid, stream);
}

template <int kBits>
void launchDecode(const DecodeArgs& a, int mode, cudaStream_t stream) {
  const unsigned grid = gridFor(a.count);
  const bool fp32 = a.dtype == cclzFloat32;
  if (mode == kAccumulate)
    decodeKernel<kBits, kAccumulate, float><<<grid, kThreads, 0, stream>>>(a);
  else if (mode == kReduce && fp32)
    decodeKernel<kBits, kReduce, float><<<grid, kThreads, 0, stream>>>(a);
  else if (mode == kReduce)
    decodeKernel<kBits, kReduce, uint16_t><<<grid, kThreads, 0, stream>>>(a);
  else if (fp32)
    decodeKernel<kBits, kStore, float><<<grid, kThreads, 0, stream>>>(a);
  else
    decodeKernel<kBits, kStore, uint16_t><<<grid, kThreads, 0, stream>>>(a);
}

}  // namespace

void encodeDevice(const Params& p, int dtype, const void* src, uint64_t count, Residual residual,
                  uint64_t step, uint8_t* dst, uint64_t* encodedBytesOut, DeviceStatus* status,
                  cudaStream_t stream) {
  EncodeArgs a{};
  a.src = src;
  a.residual = count ? residual : Residual{};
  a.dst = dst;
  a.count = count;
  a.key = drawKey(p.seed, step);
  a.blockElems = p.blockElems;
  a.rounding = p.rounding;
  a.srcAligned = reinterpret_cast<uintptr_t>(src) % 16 == 0;
  a.layout = frameLayout(count, p.blockElems, p.bits);
  a.header = makeHeader(p, dtype, count);
  a.encodedBytesOut = encodedBytesOut;
  a.status = status;
  if (p.bits == 8) launchEncode<8>(a, dtype, stream);
  if (p.bits == 4) launchEncode<4>(a, dtype, stream);
  if (p.bits == 2) launchEncode<2>(a, dtype, stream);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void decodeDevice(const Params& p, int dtype, const uint8_t* src, uint64_t srcBytes, void* dst,
                  uint64_t count, bool accumulate, DeviceStatus* status, cudaStream_t stream) {
  const DecodeArgs a{src, srcBytes, dst, count, dtype, p.blockElems, p.bits, status, {}};
  const int mode = accumulate ? kAccumulate : kStore;
  if (p.bits == 8) launchDecode<8>(a, mode, stream);
  if (p.bits == 4) launchDecode<4>(a, mode, stream);
  if (p.bits == 2) launchDecode<2>(a, mode, stream);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void decodeReduceDevice(const Params& p, int dtype, const uint8_t* src, uint64_t srcBytes,
                        uint64_t count, const ReduceStep& step, DeviceStatus* status,
                        cudaStream_t stream) {
  const DecodeArgs a{src, srcBytes, step.acc, count, dtype, p.blockElems, p.bits, status, step};
  const int mode = step.fromZero || step.store ? kReduce : kAccumulate;
  if (p.bits == 8) launchDecode<8>(a, mode, stream);
  if (p.bits == 4) launchDecode<4>(a, mode, stream);
  if (p.bits == 2) launchDecode<2>(a, mode, stream);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cclz::qgrad
