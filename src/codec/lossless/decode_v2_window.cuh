// The staged decoder's loop for a whole coded chunk (n == kMaxChunkElems, mode 1), payload
// version 2 (docs/formats.md): the same symbols and the same verdict as the lane loop of
// decode_v2_kernel.cu, with a shorter dependent chain per symbol. Used only by the staged kernel
// (kernel_path.h: small messages), and only while CCLZ_LOSSLESS_WINDOW is not `off`.
//
// Why (bench/notes/lossless-kernels.md, "Round 3 measured" and "Round 4"): at 1-4 MiB a
// multiprocessor runs about one warp per scheduler, so the kernel lasts as long as one warp's
// chain of 128 symbols, ~170 cycles per symbol in the lane loop (~27 instructions per symbol,
// most of them in series: a 64-bit bit buffer, its branch-free refill, the entry's fields).
// Round 2 wrote this loop for the general kernel, where it was exact but not faster (at 256 MiB
// the decoder is not bound by one warp's chain); here it is brought back where the chain is
// the bound.
//
// NOTE: the lane keeps no bit buffer. It keeps the bit position p of its stream in the block's
// shared memory and, per pair of symbols, reads the two (three with escapes) words at p / 32 and
// funnel-shifts them into a window. No refill state, no 64-bit shifts. p is the position of the
// bit before the next code, so that the table entry's byte offset is `window & 0x7FE`. Both
// addresses are offsets from the block's shared memory, which the compiler folds into the
// shared load: the dependent chain of a pair is two ALU steps to the stage words, two to the
// first entry, two to the second and one dp4a to the next position (7, against ~20 per symbol
// in the lane loop's SASS).
//
// A table entry (format_v2.h, Codes::decode) is byte 0: the bits consumed, byte 1: the offset d,
// or 0x80 for the escape. Two entries permuted into one word x = (len0, d0, len1, d1) give:
//   - the new position in one dot-product instruction: p + len0 + len1 = dp4a(x, 0x00010001, p);
//   - both symbols at once: (top << 8 | 0xFF) * 0x10001 - x has top - d0 in byte 1 and top - d1
//     in byte 3 (the low bytes 0xFF - len never borrow; a low half that goes negative, an
//     escape's 0x80 under a top below 128 or a d above top, borrows one from the high half's
//     low byte, 0xFF - len1, which absorbs it: byte 3 is never touched);
//   - the lane's check on 16-bit halves (d << 8 | len): one 3-input max per two pairs.
#pragma once

#include <cstdint>

#include "codec/lossless/device_v2.cuh"

namespace cclz::lossless::v2::device {

// How far a corrupt lane's window may read past its staged block: at most 16 bits per symbol
// (128 symbols) past a position inside the block, plus the window's three words. The staged
// kernel keeps its decode table right after the stage, so these reads stay in the warp's own
// shared memory (a static_assert there checks it).
constexpr uint32_t kWindowOverread = kMaxChunkElems / kLanes * 16 / 8 + 12;

// NOTE: the stage and the table are read with plain C++ loads, never with a non-volatile inline
// `ld.shared`: the compiler treats such an asm as a pure function of its inputs, free to move
// above the table's stores and the staging wait (round 2's first device run decoded wrong
// symbols at scattered positions). Plain loads keep those dependencies.
// Word i (0, 1, 2) from the stage word holding bit p (p counted from `shared`).
__device__ __forceinline__ uint32_t wordFromBit(const uint8_t* shared, uint32_t p, uint32_t i) {
  return *reinterpret_cast<const uint32_t*>(shared + ((p >> 3) & ~3u) + 4 * i);
}
// The entry of the table at `tableAt` (a multiple of 2 KiB from `shared`, so OR adds) for the
// next 10 stream bits, window bits 1..10.
__device__ __forceinline__ uint32_t entryAtWindow(const uint8_t* shared, uint32_t tableAt,
                                                  uint32_t window) {
  return *reinterpret_cast<const uint16_t*>(shared + ((window & 0x7FEu) | tableAt));
}

// (a & mask) | (b & ~mask), one LOP3 (written as C++, the compiler splits it in two).
__device__ __forceinline__ uint32_t selectBits(uint32_t a, uint32_t b, uint32_t mask) {
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xE2;" : "=r"(r) : "r"(a), "r"(mask), "r"(b));
  return r;
}

// 0xFF in bytes 1 and 3 where x's byte 1 (byte 3) is an escape (bit 7 set), 0 elsewhere: prmt's
// sign-replicate selectors (bit 3 of a nibble).
__device__ __forceinline__ uint32_t escapeMask(uint32_t x) {
  uint32_t m;
  asm("prmt.b32 %0, %1, 0, 0xB494;" : "=r"(m) : "r"(x));
  return m;
}

// Two symbols of a lane, in bytes 1 and 3 of the result; `x` gets the two entries for the check
// (with escapes, the escape bits masked off). kEscapes: the window is 64 bits (two codes with
// escapes take up to 32 bits, one more than a 32-bit window holds after the leading bit).
// p: the position of the bit before the next code, in bits from `shared` (the block's shared
// memory). tableAt: the decode table's byte offset from `shared`, a multiple of 2 KiB.
template <bool kEscapes>
__device__ __forceinline__ uint32_t decodePair(const uint8_t* shared, uint32_t tableAt,
                                               uint32_t topWord, uint32_t& p, uint32_t& x) {
  const uint32_t lo = wordFromBit(shared, p, 0), mid = wordFromBit(shared, p, 1);
  const uint32_t w = __funnelshift_r(lo, mid, p);  // the shift is p % 32
  const uint32_t e0 = entryAtWindow(shared, tableAt, w);
  uint32_t wHigh = 0;
  if constexpr (kEscapes) wHigh = __funnelshift_r(mid, wordFromBit(shared, p, 2), p);
  // funnelshift_r takes its shift modulo 32: the entry's low 5 bits, which are its length.
  const uint32_t w1 = __funnelshift_r(w, wHigh, e0);
  // NOTE: the position advances by each length as soon as its entry is there (dp4a of the
  // entry's bytes with (1, 0, 0, 0)), so the second entry is one instruction from the next
  // pair's position.
  const uint32_t pMid = __dp4a(e0, 1u, p);
  const uint32_t e1 = entryAtWindow(shared, tableAt, w1);
  p = __dp4a(e1, 1u, pMid);
  const uint32_t entries = __byte_perm(e0, e1, 0x5410);
  if constexpr (kEscapes) {
    // Escapes have 0x80 in the offset byte: masked off, only real offsets are checked.
    x = entries & 0x7F7F7F7Fu;
    const uint32_t y = topWord - entries;
    // An escape's symbol is the 8 bits after its code: window bits [len - 7, len + 1).
    const uint32_t s0 = __funnelshift_r(w, wHigh, e0 - 7);
    const uint32_t s1 = __funnelshift_r(w1, w1, e1 - 7);
    const uint32_t escaped = __byte_perm(s0, s1, 0x4400);  // s0 to byte 1, s1 to byte 3
    return selectBits(escaped, y, escapeMask(entries));
  } else {
    x = entries;
    return topWord - x;
  }
}

// The output words of a group from its 4 pairs (symbols in bytes 1 and 3 of y[k]) and its raw
// planes. NOTE: the symbols are taken where decodePair leaves them: a byte permute and one LOP3
// per two bf16 elements (the lane loop's Joiner needs ~7 instructions for the same two).
template <int D>
struct PairJoiner;

// bf16 (and fp16, split as bf16 in version 2): element = sign << 15 | symbol << 7 | low 7 bits.
template <>
struct PairJoiner<cclzBfloat16> {
  static constexpr int kWords = 4;
  __device__ static void join(const uint32_t (&y)[4], uint2 a, const uint4&, uint32_t (&out)[4]) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      // Raw bytes (r0, r0, r1, r1): the sign lands at bits 15 and 31, the low 7 bits at 0 and 16.
      const uint32_t raw = __byte_perm(k < 2 ? a.x : a.y, 0, k % 2 ? 0x3322 : 0x1100);
      out[k] = selectBits(y[k] >> 1, raw, 0x7F807F80u);  // symbols to bits 7..14 and 23..30
    }
  }
};

// fp32: element = sign << 31 | symbol << 23 | low 7 bits << 16 | plane B's 16 bits.
template <>
struct PairJoiner<cclzFloat32> {
  static constexpr int kWords = 8;
  __device__ static void join(const uint32_t (&y)[4], uint2 a, const uint4& b, uint32_t (&out)[8]) {
    const uint32_t lows[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const uint32_t raws = k < 2 ? a.x : a.y;
      // Bytes (low 16 bits of element 2k or 2k+1, its raw byte twice): the raw byte's low 7
      // bits land at 16..22 and its sign at 31; the symbol then covers bits 23..30. The raw
      // byte of element i is byte i % 4 of raws, selector 4 + i % 4.
      const uint32_t r0 = 4 + (2 * k) % 4, r1 = 4 + (2 * k + 1) % 4;
      const uint32_t v0 = __byte_perm(lows[k], raws, (r0 << 12) | (r0 << 8) | 0x10);
      const uint32_t v1 = __byte_perm(lows[k], raws, (r1 << 12) | (r1 << 8) | 0x32);
      out[2 * k] = selectBits(y[k] << 15, v0, 0x7F800000u);
      out[2 * k + 1] = selectBits(y[k] >> 1, v1, 0x7F800000u);
    }
  }
};

// A whole coded chunk, one lane: its 16 groups from bit `start` of the staged block, the raw
// planes from shared memory (staged whole), 16-byte stores. Returns true if the lane used
// exactly `laneBits` bits, met no escape its header did not announce and no offset above top
// (the lane loop's three checks).
// shared: the block's shared memory; stageAt, tableAt: the warp's staged block and decode table
// (a multiple of 2 KiB) as byte offsets from it; rawA, rawB: the warp's staged raw planes.
// out: the chunk's first element.
template <int D, bool kEscapes>
__device__ __forceinline__ bool decodeWindowLane(const uint8_t* shared, uint32_t stageAt,
                                                 uint32_t tableAt, uint32_t top, uint32_t start,
                                                 uint32_t laneBits, const uint8_t* rawA,
                                                 const uint16_t* rawB, void* out, uint32_t lane) {
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
  uint32_t check = 0;
#pragma unroll 1
  for (int j0 = 0; j0 < kGroups; j0 += kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = j0 + u;  // group lane + 32 j of the chunk
      const uint2 ra = a2[kLanes * j];
      uint4 rb = make_uint4(0, 0, 0, 0);
      if constexpr (kHasPlaneB) rb = b4[kLanes * j];
      uint32_t y[4], x[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) y[k] = decodePair<kEscapes>(shared, tableAt, topWord, p, x[k]);
      check = __vimax3_u16x2(check, x[0], x[1]);
      check = __vimax3_u16x2(check, x[2], x[3]);
      uint32_t words[Join::kWords];
      Join::join(y, ra, rb, words);
#pragma unroll
      for (int v = 0; v < kVectors; ++v)
        out4[kLanes * j * kVectors + v] =
            make_uint4(words[4 * v], words[4 * v + 1], words[4 * v + 2], words[4 * v + 3]);
    }
  }
  // The largest offset byte of the lane's entries (bits 8..15 of either 16-bit half).
  const uint32_t maxOffset = max((check >> 8) & 0xFFu, check >> 24);
  // Without escapes an escape entry (0x80) or an offset past top fails (a real offset is below
  // the family's D, so min(top, D - 1) rejects exactly those); with escapes, an offset past top.
  const uint32_t limit = kEscapes ? top : min(top, familyOffsets(D) - 1);
  return p - first == laneBits && maxOffset <= limit;
}

}  // namespace cclz::lossless::v2::device
