// The encoder's cost pass with 8-bit costs (encode_lane.cuh, laneCostsNoEscapes),
// written once for the kernel and for a CPU test that checks it against the 16-bit sums
// (tests/codec/lossless_cost_bytes_test.cpp).
//
// NOTE: why: the cost pass adds, for every symbol, the bits it would take under all 8 codes. As
// 16-bit fields that is a 16-byte shared load per symbol and lane, 4 of the ~5.5 shared
// wavefronts per symbol of the whole encoder (docs/kernels/lossless.md, "Encoder": 28.7M
// wavefronts, 56% of the shared pipe at 256 MiB). Where no symbol escapes, a symbol costs at
// most kMaxCodeBits under any code, so 8-bit costs (an 8-byte entry) add up without a carry for
// kSymbolsPerWiden symbols; the sums are then spread to the 16-bit fields. Half the shared
// bytes, half the adds. (A table of pairs of offsets, 16-byte entries, halved the loads instead:
// its entries collide in the shared banks and the encode lost 40%;
// docs/kernels/lossless.md, "Encoder")
#pragma once

#include <cstdint>

#include "codec/lossless/format.h"
#include "codec/lossless/window.h"
#include "common/hd.h"

namespace cclz::lossless::costbytes {

// The longest code of every table of both families, escapes aside (tables.h).
constexpr uint32_t kMaxCodeBits = 10;
// Symbols added as bytes before the sums are spread: 16 * 10 = 160 < 256.
constexpr int kSymbolsPerWiden = 16;
static_assert(kSymbolsPerWiden * kMaxCodeBits < 256, "byte sums must not carry");
// With escapes (a code and the 8 symbol bits): 14 * 18 = 252 < 256.
constexpr uint32_t kMaxEscapeBits = kMaxCodeBits + kEscapeBits;
constexpr int kSymbolsPerWidenWithEscapes = 14;
static_assert(kSymbolsPerWidenWithEscapes * kMaxEscapeBits < 256, "byte sums must not carry");

// The 8-byte entry of offset index d (the escape's, D, included): byte t of lo (t < 4) or hi
// (t >= 4) is d's cost under code t, from the packed 16-bit costs (Codes::cost[family]).
CCLZ_HD void entry(const uint32_t (*cost)[4], uint32_t d, uint32_t& lo, uint32_t& hi) {
  uint32_t words[2] = {0, 0};
  for (uint32_t t = 0; t < kTables; ++t)
    words[t / 4] |= ((cost[d][t / 2] >> (16 * (t % 2))) & 0xFFu) << (8 * (t % 4));
  lo = words[0];
  hi = words[1];
}

// Adds byte sums (lo: codes 0..3, hi: codes 4..7) to packed 16-bit costs (packed[w]: codes 2w and
// 2w + 1). One byte permute per word on the device.
CCLZ_HD void widen(uint32_t lo, uint32_t hi, uint32_t (&packed)[4]) {
  packed[0] += window::permuteBytes(lo, 0, 0x4140);  // codes 0, 1 to bytes 0, 2
  packed[1] += window::permuteBytes(lo, 0, 0x4342);  // codes 2, 3
  packed[2] += window::permuteBytes(hi, 0, 0x4140);
  packed[3] += window::permuteBytes(hi, 0, 0x4342);
}

// The byte offsets of a word's four offsets into a table of 8-byte entries, for the bf16/fp32
// family (offsets below 32, so 8 times each fits its byte): 8 (top - s) per byte from one
// multiply-add, as top * 0x08080808 - 8 * word; then one instruction per byte.
CCLZ_HD uint32_t offsetsTimes8(uint32_t top, uint32_t word) { return top * 0x08080808u - 8 * word; }

}  // namespace cclz::lossless::costbytes
