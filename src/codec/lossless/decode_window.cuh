// The decoder's loop for a whole coded chunk (n == kMaxChunkElems, mode 1; docs/formats.md,
// "Lossless payload"): the same symbols and the same verdict as the lane loop of
// decode_kernel.cu, with a shorter dependent chain per symbol and fewer integer-ALU
// instructions (10.6 instructions per symbol against the lane loop's 26). Used by the staged
// kernel, and by the general kernel for bf16 and fp16 (kernel_path.h).
//
// In the general kernel: at 256 MiB the decoder waits on the integer ALU pipe as much as on
// anything, and the window loop takes fewer instructions per symbol: bf16 256 MiB 1.78 -> 1.89
// TB/s on the H200. In the staged kernel: at 1-4 MiB a multiprocessor runs about one warp per
// scheduler, so the kernel lasts as long as one warp's chain of 128 symbols, ~170 cycles per
// symbol in the lane loop (~27 instructions per symbol, most of them in series: a 64-bit bit
// buffer, its branch-free refill, the entry's fields). (docs/kernels/lossless.md, "Decoder".)
//
// NOTE: the lane keeps no bit buffer. It keeps the bit position p of its stream in the block's
// shared memory and the three (four with escapes) stage words from p / 32 on in registers; per
// pair of symbols it funnel-shifts two of them into a window, and after the pair moves the words
// by one (when p crossed into the next word) and loads the word that comes in, a pair ahead of
// its use. No refill state, no 64-bit shifts. p is the position of the bit before the next
// code, so that the table entry's byte offset is `window & 0x7FE`; table and stage addresses are
// offsets from the block's shared memory, which the compiler folds into the shared load. The
// dependent chain of a pair (SASS): dp4a (position) -> LOP3 (move by 0 or 32) -> clamped
// funnel shift (the words) -> funnel shift (window) -> LOP3 -> table load -> funnel shift ->
// LOP3 -> table load -> dp4a: 7 ALU steps and 2 shared loads for two symbols (loading the
// window's words from p instead: 7 and 3; the lane loop: ~14 and 3, its refill included).
//
// A table entry (format.h, Codes::decode) is byte 0: the bits consumed, byte 1: the offset d,
// or 0x80 for the escape. Two entries permuted into one word x = (len0, d0, len1, d1) give:
//   - the new position in one dot-product instruction: p + len0 + len1 = dp4a(x, 0x00010001, p);
//   - both symbols at once: (top << 8 | 0xFF) * 0x10001 - x has top - d0 in byte 1 and top - d1
//     in byte 3 (the low bytes 0xFF - len never borrow; a low half that goes negative, an
//     escape's 0x80 under a top below 128 or a d above top, borrows one from the high half's
//     low byte, 0xFF - len1, which absorbs it: byte 3 is never touched);
//   - the lane's check on 16-bit halves (d << 8 | len): one 3-input max per two pairs.
// The arithmetic is in window.h (host and device: a CPU test runs it against decodeRef); the
// lane's loop over its 16 groups, with its shared-memory planes and 16-byte stores, is here.
#pragma once

#include <cstdint>

#include "codec/lossless/device.cuh"
#include "codec/lossless/window.h"

namespace cclz::lossless::device {

// How far a corrupt lane's window may read past its staged block: at most 16 bits per symbol
// (128 symbols) past a position inside the block, plus the four words from the last position. The
// window kernel keeps the warp's plane A right after its stage, so these reads stay in the warp's
// own shared memory (a static_assert there checks it).
constexpr uint32_t kWindowOverread = kMaxChunkElems / kLanes * 16 / 8 + 16;

// A whole coded chunk, one lane: its 16 groups from bit `start` of the staged block, the raw
// planes from shared memory (staged whole), 16-byte stores. Returns true if the lane used
// exactly `laneBits` bits, met no escape its header did not announce and no offset above top
// (the lane loop's three checks).
// shared: the block's shared memory; stageAt, tableAt: the warp's staged block (swizzled where
// swizzledStage(D)) and decode table (a multiple of 2 KiB) as byte offsets from it; rawA, rawB:
// the warp's staged raw planes.
// out: the chunk's first element.
// kRawAhead: rawA and rawB are the chunk's planes in the frame (global memory: the general
// kernel), read an iteration (two groups) ahead, the first group's given as firstA, firstB.
template <int D, bool kEscapes, bool kRawAhead = false>
__device__ __forceinline__ bool decodeWindowLane(const uint8_t* shared, uint32_t stageAt,
                                                 uint32_t tableAt, uint32_t top, uint32_t start,
                                                 uint32_t laneBits, const uint8_t* rawA,
                                                 const uint16_t* rawB, void* out, uint32_t lane,
                                                 uint2 firstA = {}, uint4 firstB = {}) {
  using namespace window;
  using Join = PairJoiner<D == cclzFloat16 ? cclzBfloat16 : D>;  // fp16 is split as bf16
  constexpr bool kHasPlaneB = Elements<D>::kHasPlaneB;
  constexpr int kGroups = kMaxGroupsPerLane;  // 16
  constexpr int kVectors = Join::kWords / 4;  // 16-byte stores per group
  // NOTE: two groups per iteration (8 pairs): the loop's own cost is small, and the next
  // group's raw planes (shared loads, off the chain) can be issued early.
  constexpr int kUnroll = 2;
  const uint32_t topWord = ((top << 8) | 0xFFu) * 0x00010001u;
  const uint2* a2 = reinterpret_cast<const uint2*>(rawA) + lane;
  const uint4* b4 = reinterpret_cast<const uint4*>(rawB) + lane;
  uint4* out4 = static_cast<uint4*>(out) + lane * kVectors;
  // The bit before the lane's first code (start >= 64, so inside the block).
  const uint32_t first = 8 * stageAt + start - 1;
  uint32_t p = first;
  constexpr bool kSwizzled = swizzledStage(D);
  StageWords<kEscapes> near = stageWordsAt<kEscapes, kSwizzled>(shared, first);
  uint32_t check = 0;
  // Groups j0 .. j0 + kUnroll - 1 of the lane. kRawAhead: their raw planes are in ra, rb, and
  // those of the next kUnroll groups are loaded into na, nb (a group past the lane's last is
  // clamped to it: a load without a branch, whose value goes unused).
  auto groups = [&](int j0, const uint2(&ra)[kUnroll], const uint4(&rb)[kUnroll],
                    uint2(&na)[kUnroll], uint4(&nb)[kUnroll]) {
    if constexpr (kRawAhead) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int j = min(j0 + kUnroll + u, kGroups - 1);
        na[u] = __ldg(a2 + kLanes * j);
        if constexpr (kHasPlaneB) nb[u] = __ldg(b4 + kLanes * j);
        // Two iterations further on, asked of L2 now: the load above is scheduled late, and
        // would otherwise wait on DRAM (lossless::device::prefetchL2).
        const int far = min(j0 + 3 * kUnroll + u, kGroups - 1);
        lossless::device::prefetchL2(a2 + kLanes * far);
        if constexpr (kHasPlaneB) lossless::device::prefetchL2(b4 + kLanes * far);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u;  // group lane + 32 j of the chunk
      const uint2 a = kRawAhead ? ra[u] : a2[kLanes * j];
      uint4 b = make_uint4(0, 0, 0, 0);
      if constexpr (kHasPlaneB) b = kRawAhead ? rb[u] : b4[kLanes * j];
      uint32_t y[4], x[4];
#pragma unroll
      for (int k = 0; k < 4; ++k)
        y[k] = decodePair<kEscapes, kSwizzled>(shared, tableAt, topWord, p, near, x[k]);
      check = max3Halves(check, x[0], x[1]);
      check = max3Halves(check, x[2], x[3]);
      const uint32_t planeA[2] = {a.x, a.y}, planeB[4] = {b.x, b.y, b.z, b.w};
      uint32_t words[Join::kWords];
      Join::join(y, planeA, planeB, words);
#pragma unroll
      for (int v = 0; v < kVectors; ++v)
        out4[kLanes * j * kVectors + v] =
            make_uint4(words[4 * v], words[4 * v + 1], words[4 * v + 2], words[4 * v + 3]);
    }
  };
  uint2 a0[kUnroll] = {}, a1[kUnroll] = {};
  uint4 b0[kUnroll] = {}, b1[kUnroll] = {};
  if constexpr (kRawAhead) {
    // NOTE: two sets of registers used in turn, not one copied into the other: a copy of a
    // loaded register waits for the load (docs/kernels/lossless.md, "Decoder").
    a0[0] = firstA;
    b0[0] = firstB;
#pragma unroll
    for (int u = 1; u < kUnroll; ++u) {
      a0[u] = __ldg(a2 + kLanes * u);
      if constexpr (kHasPlaneB) b0[u] = __ldg(b4 + kLanes * u);
    }
#pragma unroll 1
    for (int j0 = 0; j0 < kGroups; j0 += 2 * kUnroll) {
      groups(j0, a0, b0, a1, b1);
      groups(j0 + kUnroll, a1, b1, a0, b0);
    }
  } else {
#pragma unroll 1
    for (int j0 = 0; j0 < kGroups; j0 += kUnroll) groups(j0, a0, b0, a1, b1);
  }
  return laneOk(D, kEscapes, top, p - first, laneBits, check);
}

}  // namespace cclz::lossless::device
