// The arithmetic of the staged decoder's pair-window loop (decode_window.cuh),
// written once for the kernel and for a CPU test that runs it against decodeRef
// (tests/codec/lossless_window_test.cpp): two symbols from a window of the stream, the lane's
// check, and the join of a group's symbols with its raw planes. On the device each helper is
// one instruction (funnel shift, dp4a, byte permute, 3-input max, LOP3); on the host, plain C++.
// See decode_window.cuh for why the loop exists and how a pair is decoded.
#pragma once

#include <cstdint>

#include "codec/lossless/format.h"
#include "common/hd.h"

namespace cclz::lossless::window {

// ---- One-instruction helpers (device), their meaning in C++ (host). ----

// Bits [s % 32, s % 32 + 32) of hi:lo.
CCLZ_HD uint32_t funnelRight(uint32_t lo, uint32_t hi, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(lo, hi, s);
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> (s & 31));
#endif
}

// Bits [min(s, 32), min(s, 32) + 32) of hi:lo.
CCLZ_HD uint32_t funnelRightClamped(uint32_t lo, uint32_t hi, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_rc(lo, hi, s);
#else
  return static_cast<uint32_t>(((static_cast<uint64_t>(hi) << 32) | lo) >> (s < 32 ? s : 32));
#endif
}

// c + the dot product of a's and b's bytes (unsigned).
CCLZ_HD uint32_t dotBytes(uint32_t a, uint32_t b, uint32_t c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(a, b, c);
#else
  for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xFFu) * ((b >> (8 * i)) & 0xFFu);
  return c;
#endif
}

// Byte i of the result is byte (selector nibble i, 0..7) of b:a (CUDA's __byte_perm).
CCLZ_HD uint32_t permuteBytes(uint32_t a, uint32_t b, uint32_t selector) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, selector);
#else
  const uint64_t ab = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i)
    r |= static_cast<uint32_t>((ab >> (8 * ((selector >> (4 * i)) & 7))) & 0xFFu) << (8 * i);
  return r;
#endif
}

// The larger of a, b and c in each 16-bit half (unsigned).
CCLZ_HD uint32_t max3Halves(uint32_t a, uint32_t b, uint32_t c) {
#if defined(__CUDA_ARCH__)
  return __vimax3_u16x2(a, b, c);
#else
  uint32_t r = 0;
  for (int h = 0; h < 32; h += 16) {
    uint32_t m = (a >> h) & 0xFFFFu;
    if (((b >> h) & 0xFFFFu) > m) m = (b >> h) & 0xFFFFu;
    if (((c >> h) & 0xFFFFu) > m) m = (c >> h) & 0xFFFFu;
    r |= m << h;
  }
  return r;
#endif
}

// (a & mask) | (b & ~mask), one LOP3 (written as C++, the compiler splits it in two).
CCLZ_HD uint32_t selectBits(uint32_t a, uint32_t b, uint32_t mask) {
#if defined(__CUDA_ARCH__)
  uint32_t r;
  asm("lop3.b32 %0, %1, %2, %3, 0xE2;" : "=r"(r) : "r"(a), "r"(mask), "r"(b));
  return r;
#else
  return (a & mask) | (b & ~mask);
#endif
}

// 0xFF in bytes 1 and 3 where x's byte 1 (byte 3) has bit 7 set (an escape), 0 elsewhere: prmt's
// sign-replicate selectors (bit 3 of a nibble).
CCLZ_HD uint32_t escapeMask(uint32_t x) {
#if defined(__CUDA_ARCH__)
  uint32_t m;
  asm("prmt.b32 %0, %1, 0, 0xB494;" : "=r"(m) : "r"(x));
  return m;
#else
  return ((x & 0x8000u) ? 0xFF00u : 0u) | ((x & 0x80000000u) ? 0xFF000000u : 0u);
#endif
}

// Where byte `at` of a swizzled stage lies (offsets from the block's shared memory): each
// 128-byte row r keeps its 16-byte units, in the order u ^ (r % 8). Such stages start and end on
// 128-byte rows, so a row never holds two warps' bytes.
// NOTE: why. Lanes read their own streams, which lie one after another in the block, about a
// lane's size apart: ~12 words on Gaussian bf16, and 12 i mod 32 takes only 8 banks. So each
// step's stream-word load would take 4.46 shared wavefronts at 256 MiB (9.5M
// of the decoder's 25.7M); swizzled, ~2.9 by bench/probes/lossless_stage_banks.py. Measured
// (docs/kernels/lossless.md, "Decoder"): bf16 256 MiB decode +9% (with 64 registers),
// fp32's staged kernel at 4 MiB +4%, but fp16 -3% (its chunks take the escape path, whose
// longer streams conflict less, and the swizzle's ~3 instructions per pair cost more there).
CCLZ_HD uint32_t swizzledStageOffset(uint32_t at) { return at ^ ((at >> 3) & 0x70u); }

// Whether the window kernels swizzle their stages for this dtype (see swizzledStageOffset).
constexpr bool swizzledStage(int dtype) { return dtype != cclzFloat16; }

// NOTE: the stage and the table are read with plain C++ loads, never with a non-volatile inline
// `ld.shared`: the compiler treats such an asm as a pure function of its inputs, free to move
// above the table's stores and the staging wait (a decode without it read wrong
// symbols at scattered positions). Plain loads keep those dependencies.
// Word i (0..3) from the stage word holding bit p (p counted from `shared`). kSwizzled: the stage
// is swizzled (swizzledStageOffset).
template <bool kSwizzled>
CCLZ_HD uint32_t wordFromBit(const uint8_t* shared, uint32_t p, uint32_t i) {
  if constexpr (kSwizzled)
    return *reinterpret_cast<const uint32_t*>(shared +
                                              swizzledStageOffset(((p >> 3) & ~3u) + 4 * i));
  else
    return *reinterpret_cast<const uint32_t*>(shared + ((p >> 3) & ~3u) + 4 * i);
}
// The entry of the table at `tableAt` (a multiple of 2 KiB from `shared`, so OR adds) for the
// next 10 stream bits, window bits 1..10.
CCLZ_HD uint32_t entryAtWindow(const uint8_t* shared, uint32_t tableAt, uint32_t window) {
  return *reinterpret_cast<const uint16_t*>(shared + ((window & 0x7FEu) | tableAt));
}

// The stage words from the one holding a lane's position p on (w[0] holds bit p): three, four
// with escapes. NOTE: kept in registers from pair to pair, so that a pair's window waits on no
// shared load: a pair moves p by at most 32 bits (two codes of at most 16), so the next window
// starts in w[0] or w[1], and the word that has to come in next is loaded a whole pair ahead.
template <bool kEscapes>
struct StageWords {
  static constexpr int kWords = kEscapes ? 4 : 3;
  uint32_t w[kWords];
};

template <bool kEscapes, bool kSwizzled>
CCLZ_HD StageWords<kEscapes> stageWordsAt(const uint8_t* shared, uint32_t p) {
  StageWords<kEscapes> s;
  for (int i = 0; i < StageWords<kEscapes>::kWords; ++i)
    s.w[i] = wordFromBit<kSwizzled>(shared, p, i);
  return s;
}

// Two symbols of a lane, in bytes 1 and 3 of the result; `x` gets the two entries for the check
// (with escapes, the escape bits masked off). kEscapes: the window is 64 bits (two codes with
// escapes take up to 32 bits, one more than a 32-bit window holds after the leading bit).
// p: the position of the bit before the next code, in bits from `shared` (the block's shared
// memory); s: the stage words from p on (stageWordsAt), moved along with p. tableAt: the decode
// table's byte offset from `shared`, a multiple of 2 KiB. kSwizzled: the stage is swizzled.
template <bool kEscapes, bool kSwizzled>
CCLZ_HD uint32_t decodePair(const uint8_t* shared, uint32_t tableAt, uint32_t topWord, uint32_t& p,
                            StageWords<kEscapes>& s, uint32_t& x) {
  const uint32_t w = funnelRight(s.w[0], s.w[1], p);  // the shift is p % 32
  const uint32_t e0 = entryAtWindow(shared, tableAt, w);
  uint32_t wHigh = 0;
  if constexpr (kEscapes) wHigh = funnelRight(s.w[1], s.w[2], p);
  // funnelRight takes its shift modulo 32: the entry's low 5 bits, which are its length.
  const uint32_t w1 = funnelRight(w, wHigh, e0);
  // NOTE: the position advances by each length as soon as its entry is there (dp4a of the
  // entry's bytes with (1, 0, 0, 0)), so the second entry is one instruction from the next
  // pair's position.
  const uint32_t pMid = dotBytes(e0, 1u, p);
  const uint32_t e1 = entryAtWindow(shared, tableAt, w1);
  const uint32_t next = dotBytes(e1, 1u, pMid);
  // The words move by one when next lies in the word after p's: as next - p <= 32 and
  // p % 32 <= 31, that is when bit 5 of the position changes. NOTE: a clamped funnel shift by
  // 0 or 32 moves them, one instruction after the LOP3 that gives the shift (a select on a
  // predicate took four). The last word is loaded here, and used no earlier than the next
  // pair's second code (escapes) or the pair after.
  const uint32_t by = (next ^ p) & 32u;
  s.w[0] = funnelRightClamped(s.w[0], s.w[1], by);
  s.w[1] = funnelRightClamped(s.w[1], s.w[2], by);
  if constexpr (kEscapes) {
    s.w[2] = funnelRightClamped(s.w[2], s.w[3], by);
    s.w[3] = wordFromBit<kSwizzled>(shared, next, 3);
  } else {
    s.w[2] = wordFromBit<kSwizzled>(shared, next, 2);
  }
  p = next;
  const uint32_t entries = permuteBytes(e0, e1, 0x5410);
  if constexpr (kEscapes) {
    // Escapes have 0x80 in the offset byte: masked off, only real offsets are checked.
    x = entries & 0x7F7F7F7Fu;
    const uint32_t y = topWord - entries;
    // An escape's symbol is the 8 bits after its code: window bits [len - 7, len + 1).
    const uint32_t s0 = funnelRight(w, wHigh, e0 - 7);
    const uint32_t s1 = funnelRight(w1, w1, e1 - 7);
    const uint32_t escaped = permuteBytes(s0, s1, 0x4400);  // s0 to byte 1, s1 to byte 3
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

// bf16 (and fp16, split as bf16): element = sign << 15 | symbol << 7 | low 7 bits.
template <>
struct PairJoiner<cclzBfloat16> {
  static constexpr int kWords = 4;
  CCLZ_HD static void join(const uint32_t (&y)[4], const uint32_t (&a)[2], const uint32_t (&)[4],
                           uint32_t (&out)[4]) {
    for (int k = 0; k < 4; ++k) {
      // Raw bytes (r0, r0, r1, r1): the sign lands at bits 15 and 31, the low 7 bits at 0 and 16.
      const uint32_t raw = permuteBytes(a[k / 2], 0, k % 2 ? 0x3322 : 0x1100);
      out[k] = selectBits(y[k] >> 1, raw, 0x7F807F80u);  // symbols to bits 7..14 and 23..30
    }
  }
};

// fp32: element = sign << 31 | symbol << 23 | low 7 bits << 16 | plane B's 16 bits.
template <>
struct PairJoiner<cclzFloat32> {
  static constexpr int kWords = 8;
  CCLZ_HD static void join(const uint32_t (&y)[4], const uint32_t (&a)[2],
                           const uint32_t (&lows)[4], uint32_t (&out)[8]) {
    for (int k = 0; k < 4; ++k) {
      const uint32_t raws = a[k / 2];
      // Bytes (low 16 bits of element 2k or 2k+1, its raw byte twice): the raw byte's low 7
      // bits land at 16..22 and its sign at 31; the symbol then covers bits 23..30. The raw
      // byte of element i is byte i % 4 of raws, selector 4 + i % 4.
      const uint32_t r0 = 4 + (2 * k) % 4, r1 = 4 + (2 * k + 1) % 4;
      const uint32_t v0 = permuteBytes(lows[k], raws, (r0 << 12) | (r0 << 8) | 0x10);
      const uint32_t v1 = permuteBytes(lows[k], raws, (r1 << 12) | (r1 << 8) | 0x32);
      out[2 * k] = selectBits(y[k] << 15, v0, 0x7F800000u);
      out[2 * k + 1] = selectBits(y[k] >> 1, v1, 0x7F800000u);
    }
  }
};

// The lane's verdict: it used exactly `laneBits` bits (`used`), met no escape its header did not
// announce and no offset above top. check: the max3Halves of its pairs' x.
CCLZ_HD bool laneOk(int dtype, bool escapes, uint32_t top, uint32_t used, uint32_t laneBits,
                    uint32_t check) {
  // The largest offset byte of the lane's entries (bits 8..15 of either 16-bit half).
  const uint32_t hi = check >> 24, lo = (check >> 8) & 0xFFu;
  const uint32_t maxOffset = hi > lo ? hi : lo;
  // Without escapes an escape entry (0x80) or an offset past top fails (a real offset is below
  // the family's D, so min(top, D - 1) rejects exactly those); with escapes, an offset past top.
  const uint32_t d1 = familyOffsets(dtype) - 1;
  const uint32_t limit = escapes || top < d1 ? top : d1;
  return used == laneBits && maxOffset <= limit;
}

}  // namespace cclz::lossless::window
