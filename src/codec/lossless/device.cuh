// Device helpers shared by the lossless encode and decode kernels: shared-memory staging, the
// header checksum, the element split and join of a group, the static codes in device memory and
// warp-wide reductions.
#pragma once

#include <atomic>
#include <cstdint>

#include "codec/device.h"
#include "codec/lossless/elements.h"
#include "codec/lossless/format.h"

namespace cclz::lossless::device {

// Raises a kernel's dynamic shared-memory limit to `bytes` on the current device, once per device
// (the attribute is per device; the mask is per kernel, and setting it twice is harmless, so
// concurrent first calls need no lock).
template <typename Kernel>
inline void ensureSharedMemoryLimit(Kernel kernel, int bytes, std::atomic<uint64_t>& configured) {
  int device = 0;
  CCLZ_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = 1ull << (device & 63);
  if (configured.load(std::memory_order_relaxed) & bit) return;
  CCLZ_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  configured.fetch_or(bit, std::memory_order_relaxed);
}

// Records the first error a kernel meets; later ones keep the first.
__device__ inline void reportError(DeviceStatus* status, uint32_t error) {
  atomicCAS(&status->decodeError, 0u, error);
}

// Asynchronous 16-byte copy from global to shared memory (cp.async, bypassing L1): a thread can
// have many in flight, so a block pays the memory latency once per chunk, not once per group.
__device__ inline void copyAsync16(void* shared, const void* global) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(global));
}

// Asks L2 for the line holding `global` (inside the frame): no register held, nothing to wait for.
// NOTE: for the general decoder, whose raw-plane loads the compiler issues only ~50-100
// instructions before their use (to stay within its register bound). Asked for a few groups
// earlier, the line is in L2 when the load comes: bf16 256 MiB decode +4%, fp32 16 MiB +15-16%
// (docs/kernels/lossless.md, "Decoder"). Measured there and not kept: a whole chunk asked for
// by one thread (cp.async.bulk.prefetch.L2), -2.7%; the warp's next chunk, -10%; the general
// encoder's input, by line -1.6%, by chunk -2.4%, its next chunk -21%.
__device__ inline void prefetchL2(const void* global) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(global));
}

__device__ inline void copyAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ inline void copyAsyncWaitAll() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

// Copies `bytes` (rounded up to 16) from global to shared memory, both 16-byte aligned, with the
// whole block; completes at copyAsyncWaitAll + __syncthreads.
__device__ inline void stageAsync(uint8_t* shared, const uint8_t* global, uint32_t bytes) {
  for (uint32_t i = threadIdx.x * 16; i < bytes; i += blockDim.x * 16)
    copyAsync16(shared + i, global + i);
}

// FNV-1a checksum of a frame header read with four 16-byte loads, kept in registers (the generic
// headerChecksum works on bytes in memory, which on the device means local memory).
__device__ inline uint32_t headerChecksumFromGlobal(const uint8_t* frame, FrameHeader* header) {
  uint32_t words[16];
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(frame) + v);
    words[4 * v] = q.x;
    words[4 * v + 1] = q.y;
    words[4 * v + 2] = q.z;
    words[4 * v + 3] = q.w;
  }
  uint32_t h = 2166136261u;
#pragma unroll
  for (int i = 0; i < 60; ++i) h = (h ^ ((words[i / 4] >> (8 * (i % 4))) & 0xFFu)) * 16777619u;
  *header = *reinterpret_cast<const FrameHeader*>(frame);
  return h;
}

// Splits a group of 8 elements, given as 32-bit words (4 for 16-bit types, 8 for fp32), into its
// symbols and plane A bytes (element order, two words each) and, for fp32, plane B (4 words).
// NOTE: two 16-bit elements are handled per operation and bytes gathered with byte permutes:
// about 1-2 instructions per element.
template <int Dtype>
struct Splitter;

template <>
struct Splitter<cclzBfloat16> {
  static constexpr int kWords = 4;
  __device__ static void split(const uint32_t (&x)[4], uint32_t (&sym)[2], uint32_t (&a)[2],
                               uint32_t (&)[4]) {
    // NOTE: the encoder is heavy on the integer ALU pipe (its profile), so the shift that
    // lifts each half's 8 symbol bits into its high byte is a multiply (x * 2, the FMA pipe; the
    // low half's sign moves into byte 2, which the permute does not take), and each half's raw
    // byte (sign at bit 7, 7 low bits) is one bit select with x >> 8, whose bytes 1 and 3 are
    // left as they fall (not taken either): 3 ALU instructions per two elements fewer.
    uint32_t s[4], r[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s[i] = x[i] * 2u;
      r[i] = ((x[i] >> 8) & 0x00800080u) | (x[i] & ~0x00800080u);
    }
    sym[0] = __byte_perm(s[0], s[1], 0x7531);
    sym[1] = __byte_perm(s[2], s[3], 0x7531);
    a[0] = __byte_perm(r[0], r[1], 0x6420);
    a[1] = __byte_perm(r[2], r[3], 0x6420);
  }
};

// fp16 takes bf16's bit positions (elements.h).
template <>
struct Splitter<cclzFloat16> : Splitter<cclzBfloat16> {};

template <>
struct Splitter<cclzFloat32> {
  static constexpr int kWords = 8;
  __device__ static void split(const uint32_t (&x)[8], uint32_t (&sym)[2], uint32_t (&a)[2],
                               uint32_t (&b)[4]) {
    uint32_t s[8], r[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      s[i] = x[i] >> 23;  // exponent in the low byte (the sign above it is dropped below)
      r[i] = ((x[i] >> 16) & 0x7Fu) | ((x[i] >> 24) & 0x80u);
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sym[h] = __byte_perm(__byte_perm(s[4 * h], s[4 * h + 1], 0x40),
                           __byte_perm(s[4 * h + 2], s[4 * h + 3], 0x40), 0x5410);
      a[h] = __byte_perm(__byte_perm(r[4 * h], r[4 * h + 1], 0x40),
                         __byte_perm(r[4 * h + 2], r[4 * h + 3], 0x40), 0x5410);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) b[i] = __byte_perm(x[2 * i], x[2 * i + 1], 0x5410);
  }
};

// Joins a group's symbols (8 bytes, element order, in two words) with its raw bits and returns
// the elements packed in 32-bit words (4 words for 16-bit types, 8 for fp32). NOTE: byte permutes
// and two-lanes-at-once masks keep this at about 1-3 instructions per element.
template <int Dtype>
struct Joiner;

template <>
struct Joiner<cclzBfloat16> {
  static constexpr int kWords = 4;
  __device__ static void join(uint32_t symLo, uint32_t symHi, uint2 a, const uint4&,
                              uint32_t (&out)[4]) {
    const uint32_t syms[2] = {symLo, symHi}, raws[2] = {a.x, a.y};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      // Symbols (bytes (0,1) or (2,3)) to 16-bit lanes, shifted into bits 7..14; each raw byte
      // twice (r, r), whose bit 15 is r's sign and bits 0..6 its mantissa: one LOP3 selects.
      const uint32_t s = __byte_perm(syms[w / 2], 0, (w % 2) ? 0x4342 : 0x4140);
      const uint32_t r = __byte_perm(raws[w / 2], 0, (w % 2) ? 0x3322 : 0x1100);
      out[w] = (r & 0x807F807Fu) | (s << 7);
    }
  }
};

template <>
struct Joiner<cclzFloat16> : Joiner<cclzBfloat16> {};

template <>
struct Joiner<cclzFloat32> {
  static constexpr int kWords = 8;
  __device__ static void join(uint32_t symLo, uint32_t symHi, uint2 a, const uint4& b,
                              uint32_t (&out)[8]) {
    const uint32_t syms[2] = {symLo, symHi}, raws[2] = {a.x, a.y};
    const uint32_t lows[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t raw = (raws[i / 4] >> (8 * (i % 4))) & 0xFFu;
      const uint32_t sym = (syms[i / 4] >> (8 * (i % 4))) & 0xFFu;
      const uint32_t low = (lows[i / 2] >> (16 * (i % 2))) & 0xFFFFu;
      out[i] = fp32Join(sym, raw, low);
    }
  }
};

// Loads a group as 32-bit words (zeros past a short group's end), 16 bytes at a time when the
// source allows.
template <int D>
__device__ void loadGroupWords(const uint8_t* in, uint32_t valid, bool aligned16,
                               uint32_t (&x)[Splitter<D>::kWords]) {
  constexpr int kWords = Splitter<D>::kWords;
  if (valid == kGroup && aligned16) {
#pragma unroll
    for (int v = 0; v < kWords / 4; ++v) {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(in) + v);
      x[4 * v] = q.x;
      x[4 * v + 1] = q.y;
      x[4 * v + 2] = q.z;
      x[4 * v + 3] = q.w;
    }
  } else {
    using Word = typename Elements<D>::Word;
    const Word* e = reinterpret_cast<const Word*>(in);
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (sizeof(Word) == 2) {
        const uint32_t lo = 2 * i < static_cast<int>(valid) ? e[2 * i] : 0u;
        const uint32_t hi = 2 * i + 1 < static_cast<int>(valid) ? e[2 * i + 1] : 0u;
        x[i] = lo | (hi << 16);
      } else {
        x[i] = i < static_cast<int>(valid) ? e[i] : 0u;
      }
    }
  }
}

}  // namespace cclz::lossless::device

namespace cclz::lossless::device {

// The codes, derived from the lengths at compile time (format.h), as device data.
__device__ const Codes kDeviceCodes = makeCodes();

constexpr uint32_t kFullMask = 0xffffffffu;
constexpr int kWarpsPerBlock = 4;
constexpr int kThreads = 32 * kWarpsPerBlock;
constexpr uint32_t kMaxGroupsPerLane = kMaxChunkElems / (kGroup * kLanes);  // 16
// A warp's staging area: the largest block of a chunk (stored mode), 16-byte aligned.
constexpr uint32_t kStageBytes = (kBlockHeaderBytes + kMaxChunkElems + 15) / 16 * 16;

__device__ inline uint32_t warpMax(uint32_t v) { return __reduce_max_sync(kFullMask, v); }
__device__ inline uint32_t warpMin(uint32_t v) { return __reduce_min_sync(kFullMask, v); }
__device__ inline uint32_t warpSum(uint32_t v) { return __reduce_add_sync(kFullMask, v); }

__device__ inline uint32_t warpInclusiveScan(uint32_t v, uint32_t lane) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t other = __shfl_up_sync(kFullMask, v, d);
    if (lane >= static_cast<uint32_t>(d)) v += other;
  }
  return v;
}

// Symbols of lane l's j-th group (group l + 32j of the chunk): 8, fewer for the chunk's last
// group, 0 past its end.
__device__ inline uint32_t groupValid(uint32_t n, uint32_t g) {
  return g * kGroup >= n ? 0u : min(static_cast<uint32_t>(kGroup), n - g * kGroup);
}

}  // namespace cclz::lossless::device
