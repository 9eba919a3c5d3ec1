// The decoder's fast path for a whole coded chunk (n == kMaxChunkElems, mode 1), payload
// version 2 (docs/formats.md): the same symbols and the same checks as the general lane loop of
// decode_v2_kernel.cu, in fewer instructions per symbol. Round 2 of the speed work
// (bench/notes/lossless-kernels.md): the general loop is ALU-bound (~27 thread instructions per
// symbol, most of them keeping a 64-bit bit buffer and its refill branch-free).
//
// NOTE: the lane keeps no bit buffer. It keeps the absolute bit position p of its stream in the
// staged block and, per pair of symbols, reads the two (three with escapes) words at p / 32 and
// funnel-shifts them into a window. No refill state, no 64-bit shifts. p is the position of the
// bit before the next code, so that the table index is `window & 0x7FE`: a byte offset into the
// table of 16-bit entries, one instruction.
//
// A table entry (format_v2.h, Codes::decode) is byte 0: the bits consumed, byte 1: the offset d,
// or 0x80 for the escape. Two entries permuted into one word x = (len0, d0, len1, d1) give:
//   - the new position in one dot-product instruction: p + len0 + len1 = dp4a(x, 0x00010001, p);
//   - both symbols at once: (top << 8 | 0xFF) * 0x10001 - x has top - d0 in byte 1 and top - d1
//     in byte 3 (the low bytes 0xFF - len never borrow), which the join below takes as they are;
//   - the validity check on 16-bit halves (d << 8 | len): one 3-input max per two pairs.
#pragma once

#include <cstdint>

#include "codec/lossless/device_v2.cuh"

namespace cclz::lossless::v2::device {

// The bytes a lane may read past its block's staged bytes: a corrupt lane consumes at most 16
// bits per symbol (128 symbols), and a window reads 2 words past its position.
// Groups whose raw planes are in flight ahead of the one being decoded: 32 bytes per lane
// (fp32: 48, two groups, within 56 registers).
template <int D>
constexpr int kWholeAhead = sizeof(typename Elements<D>::Word) == 4 ? 2 : 4;

constexpr uint32_t kStageOverread = kMaxChunkElems / kLanes * 16 / 8 + 16;

// NOTE: the stage and the table are read with plain C++ loads, not inline `ld.shared`: the
// compiler treats a non-volatile asm without a memory operand as a pure function of its inputs,
// free to move above the table's stores and the staging wait (the first device run of this
// path decoded wrong symbols at scattered positions). Plain loads keep those dependencies.
__device__ __forceinline__ uint32_t stageWordAt(const uint8_t* stage, uint32_t byteOffset) {
  return *reinterpret_cast<const uint32_t*>(stage + byteOffset);
}

// Entry of the decode table for the next 10 stream bits, window bits 1..10: (window & 0x7FE)
// is the entry's byte offset in the table of 16-bit entries.
__device__ __forceinline__ uint32_t entryAtWindow(const uint8_t* table, uint32_t window) {
  return *reinterpret_cast<const uint16_t*>(table + (window & 0x7FEu));
}

// (a & mask) | (b & ~mask), one instruction (the compiler splits it in two).
__device__ __forceinline__ uint32_t selectBits(uint32_t a, uint32_t b, uint32_t mask) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xE2;" : "=r"(r) : "r"(a), "r"(mask), "r"(b));
  return r;
}

// Bytes 1 and 3 of each mask byte pair: 0xFF where the entry's byte 1 (or 3) is an escape.
__device__ __forceinline__ uint32_t escapeMask(uint32_t x) {
  uint32_t m;
  // prmt's sign-replicate selectors (bit 3 of a nibble): bytes 1 and 3 of x's sign, 0 elsewhere.
  asm("prmt.b32 %0, %1, 0, 0xB494;" : "=r"(m) : "r"(x));
  return m;
}

// Two symbols of a lane. kEscapes: the window is 64 bits (a pair of codes with escapes takes up
// to 32 bits, one more than a 32-bit window holds after the leading bit). Returns the symbols in
// bytes 1 and 3; `x` gets the two entries for the check.
// p: the position of the bit before the next code, in bits from the start of the staged block.
template <bool kEscapes>
__device__ __forceinline__ uint32_t decodePair(const uint8_t* stage, const uint8_t* table,
                                               uint32_t topWord, uint32_t& p, uint32_t& x) {
  const uint32_t at = (p >> 3) & ~3u;  // the byte offset of the word holding bit p
  const uint32_t lo = stageWordAt(stage, at), mid = stageWordAt(stage, at + 4);
  const uint32_t w = __funnelshift_r(lo, mid, p);
  const uint32_t e0 = entryAtWindow(table, w);
  uint32_t wHigh = 0;
  if constexpr (kEscapes) wHigh = __funnelshift_r(mid, stageWordAt(stage, at + 8), p);
  // funnelshift_r masks its shift to 5 bits: the entry's low byte is the length (at most 16).
  const uint32_t w1 = __funnelshift_r(w, wHigh, e0);
  const uint32_t e1 = entryAtWindow(table, w1);
  x = __byte_perm(e0, e1, 0x5410);
  p = __dp4a(x, 0x00010001u, p);
  uint32_t y = topWord - x;
  if constexpr (kEscapes) {
    // An escape's symbol is the 8 bits after its code: window bits [len - 7, len + 1).
    const uint32_t s0 = __funnelshift_r(w, wHigh, e0 - 7);
    const uint32_t s1 = __funnelshift_r(w1, w1, e1 - 7);
    const uint32_t escaped = __byte_perm(s0, s1, 0x4400);  // s0 to byte 1, s1 to byte 3
    const uint32_t m = escapeMask(x);
    y = (escaped & m) | (y & ~m);
  }
  return y;
}

// The output words of a group from its 4 pairs (symbols in bytes 1 and 3 of y[k]) and raw planes.
template <int D>
struct PairJoiner;

// bf16 (and fp16, split as bf16 in version 2): element = sign << 15 | symbol << 7 | low 7 bits.
template <>
struct PairJoiner<cclzBfloat16> {
  static constexpr int kWords = 4;
  __device__ static void join(const uint32_t (&y)[4], uint2 a, const uint4&, uint32_t (&out)[4]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // Raw bytes (r0, r0, r1, r1): sign at bits 15 and 31, low 7 bits at 0 and 16.
      const uint32_t raw = __byte_perm(k < 2 ? a.x : a.y, 0, k % 2 ? 0x3322 : 0x1100);
      out[k] = selectBits(y[k] >> 1, raw, 0x7F807F80u);  // symbols to bits 7..14 and 23..30
    }
  }
};
template <>
struct PairJoiner<cclzFloat16> : PairJoiner<cclzBfloat16> {};

// fp32: element = sign << 31 | symbol << 23 | low 7 bits << 16 | plane B's 16 bits.
template <>
struct PairJoiner<cclzFloat32> {
  static constexpr int kWords = 8;
  __device__ static void join(const uint32_t (&y)[4], uint2 a, const uint4& b, uint32_t (&out)[8]) {
    const uint32_t lows[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t raws = k < 2 ? a.x : a.y;
      // Bytes (low16 of element 2k or 2k+1, raw byte, raw byte): the raw byte of element i is
      // byte i % 4 of raws, selector 4 + i % 4.
      const uint32_t r0 = 4 + (2 * k) % 4, r1 = 4 + (2 * k + 1) % 4;
      const uint32_t v0 = __byte_perm(lows[k], raws, (r0 << 12) | (r0 << 8) | 0x10);
      const uint32_t v1 = __byte_perm(lows[k], raws, (r1 << 12) | (r1 << 8) | 0x32);
      out[2 * k] = selectBits(y[k] << 15, v0, 0x7F800000u);
      out[2 * k + 1] = selectBits(y[k] >> 1, v1, 0x7F800000u);
    }
  }
};

// A whole coded chunk, one lane: its 16 groups from bit `start` of the staged block, the raw
// planes from the frame (4 groups loaded ahead), 16-byte stores. Returns true if the lane used
// exactly `laneBits` bits, met no escape its header did not announce and no offset above top.
// ra, rb: the raw planes of the lane's first kWholeAhead groups, loaded by the caller.
// stage, table: the warp's staged block and its decode table, in shared memory.
template <int D, bool kEscapes>
__device__ __forceinline__ bool decodeWholeLane(const uint8_t* stage, const uint8_t* table,
                                                uint32_t top, uint32_t start, uint32_t laneBits,
                                                const uint8_t* planeA, const uint16_t* planeB,
                                                typename Elements<D>::Word* out, uint32_t lane,
                                                uint2 (&ra)[kWholeAhead<D>],
                                                uint4 (&rb)[kWholeAhead<D>]) {
  using Join = PairJoiner<D>;
  constexpr bool kHasPlaneB = Elements<D>::kHasPlaneB;
  constexpr int kGroups = kMaxGroupsPerLane;  // 16
  constexpr int kAhead = kWholeAhead<D>;
  const uint32_t topWord = ((top << 8) | 0xFFu) * 0x00010001u;
  const uint2* a2 = reinterpret_cast<const uint2*>(planeA) + lane;
  const uint4* b4 = reinterpret_cast<const uint4*>(planeB) + lane;
  uint4* out4 = reinterpret_cast<uint4*>(out) + lane * (Join::kWords / 4);
  const uint32_t first = start - 1;  // the bit before the lane's first code (start >= 64)
  uint32_t p = first;
  uint32_t check = 0;
#pragma unroll 1
  for (int j0 = 0; j0 < kGroups; j0 += kAhead) {
#pragma unroll
    for (int b = 0; b < kAhead; ++b) {
      const int j = j0 + b;
      uint32_t y[4], x[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) y[k] = decodePair<kEscapes>(stage, table, topWord, p, x[k]);
      if constexpr (kEscapes) {
        // Escapes have 0x80 in the offset byte: masked off, only real offsets are compared.
        check = __vimax3_u16x2(check, x[0] & 0x7F7F7F7Fu, x[1] & 0x7F7F7F7Fu);
        check = __vimax3_u16x2(check, x[2] & 0x7F7F7F7Fu, x[3] & 0x7F7F7F7Fu);
      } else {
        check = __vimax3_u16x2(check, x[0], x[1]);
        check = __vimax3_u16x2(check, x[2], x[3]);
      }
      uint32_t words[Join::kWords];
      Join::join(y, ra[b], rb[b], words);
#pragma unroll
      for (int v = 0; v < Join::kWords / 4; ++v)
        out4[(kLanes * j) * (Join::kWords / 4) + v] =
            make_uint4(words[4 * v], words[4 * v + 1], words[4 * v + 2], words[4 * v + 3]);
      if (j + kAhead < kGroups) {
        ra[b] = __ldg(a2 + kLanes * (j + kAhead));
        if constexpr (kHasPlaneB) rb[b] = __ldg(b4 + kLanes * (j + kAhead));
      }
    }
  }
  // The largest offset byte of the lane's entries (bits 8..15 of either 16-bit half).
  const uint32_t maxOffset = max((check >> 8) & 0xFFu, check >> 24);
  // Without escapes an escape entry (0x80) or an offset past top fails; with escapes, an offset
  // past top (an offset is below the family's D, so d <= top is all that is left).
  const uint32_t limit = kEscapes ? top : min(top, familyOffsets(D) - 1);
  return p - first == laneBits && maxOffset <= limit;
}

}  // namespace cclz::lossless::v2::device
