// The fp8 frame (docs/formats.md, "fp8"): layout constants and the scalar helpers the CPU
// reference and the kernels share, so that both compute the same bits. Every helper is IEEE fp32
// with each operation rounded on its own: the mulRn/addRn/subRn wrappers keep nvcc from fusing a
// multiply and an add into an FMA, which would round differently from the CPU; where an FMA is
// meant (candidateError), fmaRn asks for one on both sides.
#pragma once

#include <cmath>
#include <cstdint>

#include "cclz/cclz.h"
#include "codec/frame.h"
#include "common/float_bits.h"
#include "common/float_rn.h"
#include "common/hd.h"

namespace cclz::fp8 {

constexpr uint32_t kBlockElems = 64;  // values per fine scale
constexpr uint32_t kMaxRowElems = 1u << 24;
constexpr uint64_t kMaxCount = 1ull << 48;
constexpr uint32_t kMaxCandidates = 32;  // one octave of fine-scale codes
constexpr uint32_t kMinLog2Hadamard = 4, kMaxLog2Hadamard = 8;
constexpr uint32_t kMaxThreshold = 8;

// Row lengths the encoder may choose from the data (params[5] = 1, docs/formats.md "Choosing the
// row length"): multiples of max(64, H) in [512, 4096]; 1024 when nothing stands out.
// Rows of at least 512 keep the per-row side data (5 bytes per row) near 1% of the codes.
constexpr uint32_t kAutoMinRowElems = 512, kAutoMaxRowElems = 4096, kAutoFallbackRowElems = 1024;
// Per-channel smoothing (params[6], "Smoothing"): only for frames of at least kSmoothMinRows rows,
// so that its byte per channel stays below 1/128 of the codes. One byte per channel: a right
// shift of at most kMaxSmoothShift binades.
constexpr uint32_t kSmoothMinRows = 128, kMaxSmoothShift = 15;

// Frame values of params[0] (the grid) and params[2] (the rotation policy).
enum Grid : uint32_t { kE4M3 = 0, kE5M2 = 1, kInt8 = 2, kNumGrids };
enum Policy : uint32_t { kRotateNever = 0, kRotateAlways = 1, kRotateAdaptive = 2, kNumPolicies };

// Special codes: sign-magnitude, magnitude 0x7F is Inf, "-0" is NaN.
constexpr uint8_t kCodeNaN = 0x80, kCodePosInf = 0x7F, kCodeNegInf = 0xFF;

// A row whose largest |value| reaches 2^100 is never rotated, and a decoder rejects a rotated row
// whose coarse scale reaches 2^102: rotated sums then stay far from fp32 overflow (no Inf - Inf).
constexpr float kMaxRotatedInput = 1.2676506002282294e30f;   // 2^100
constexpr float kMaxRotatedCoarse = 5.0706024009129176e30f;  // 2^102
// A coarse scale below 2^-100 is stored as 0 (the row decodes as zeros): inverses stay finite.
constexpr float kMinCoarse = 7.888609052210118e-31f;  // 2^-100

enum Shape : uint32_t { kShapeCaller = 0, kShapeAuto = 1 };

struct Params {
  uint32_t grid = kE4M3;
  uint32_t log2Hadamard = 6;
  uint32_t policy = kRotateNever;
  uint32_t candidates = kMaxCandidates;
  uint32_t threshold = 4;  // adaptive: mean floor(log2 PAPR) per group at which a row rotates
  uint32_t rowElems = 1024;  // with shape = kShapeAuto: the encoder's choice (ignored on encode)
  uint32_t shape = kShapeCaller;  // params[5]
  // Encode: 1 = per-channel smoothing where the data asks for it. Frame (params[6]): 1 = the frame
  // has a smoothing area (the encoder asked and the frame is large enough).
  uint32_t smoothing = 0;
  uint32_t smoothApplied = 0;  // params[7]: the frame's values were smoothed (frames only)
};

CCLZ_HD bool validParams(const Params& p) {
  const uint32_t h = 1u << (p.log2Hadamard & 31);
  return p.grid < kNumGrids && p.log2Hadamard >= kMinLog2Hadamard &&
         p.log2Hadamard <= kMaxLog2Hadamard && p.policy < kNumPolicies && p.candidates >= 1 &&
         p.candidates <= kMaxCandidates && p.threshold >= 1 && p.threshold <= kMaxThreshold &&
         p.rowElems >= kBlockElems && p.rowElems <= kMaxRowElems && p.rowElems % kBlockElems == 0 &&
         p.rowElems % h == 0 && p.shape <= kShapeAuto && p.smoothing <= 1 &&
         p.smoothApplied <= p.smoothing;
}

// The step and the smallest of the row lengths an encoder may choose (kShapeAuto).
CCLZ_HD uint32_t autoRowStep(uint32_t log2H) {
  const uint32_t h = 1u << log2H;
  return h > kBlockElems ? h : kBlockElems;
}
CCLZ_HD uint32_t autoMinRowElems(uint32_t log2H) {
  const uint32_t step = autoRowStep(log2H);
  return step > kAutoMinRowElems ? step : kAutoMinRowElems;
}
CCLZ_HD bool isAutoCandidate(uint32_t rowElems, uint32_t log2H) {
  return rowElems % autoRowStep(log2H) == 0 && rowElems >= autoMinRowElems(log2H) &&
         rowElems <= kAutoMaxRowElems;
}

// True when a frame of count elements in rows of rowElems may be smoothed.
CCLZ_HD bool smoothEligible(uint64_t count, uint32_t rowElems) {
  return count >= static_cast<uint64_t>(kSmoothMinRows) * rowElems;
}

// Bytes of the smoothing area a frame reserves when it has one: the row length, or, where the
// encoder chooses it, the largest eligible candidate (0: no candidate is eligible, no area).
CCLZ_HD uint32_t smoothCapacity(uint64_t count, uint32_t shape, uint32_t rowElems, uint32_t log2H) {
  if (shape == kShapeCaller) return smoothEligible(count, rowElems) ? rowElems : 0u;
  const uint64_t step = autoRowStep(log2H), limit = count / kSmoothMinRows;
  uint64_t cap = (limit < kAutoMaxRowElems ? limit : kAutoMaxRowElems) / step * step;
  return cap >= autoMinRowElems(log2H) ? static_cast<uint32_t>(cap) : 0u;
}

CCLZ_HD bool isSupportedDtype(int dtype) {
  return dtype == cclzBfloat16 || dtype == cclzFloat16 || dtype == cclzFloat32;
}

// Where each part of a frame lies (docs/formats.md, "Layout").
// rowSlots: entries of the coarse-scale and flag arrays (numRows, or where the encoder chooses
// the row length, the rows of its shortest candidate, so that the frame's size does not depend on
// the choice); smoothBytes: the smoothing area (0: none). Without either, rowSlots = numRows and
// the smoothing area is empty: it starts where the frame ends.
struct Layout {
  uint64_t numRows, numBlocks, rowSlots, smoothBytes;
  uint64_t codes, fine, coarse, flags, smooth, frameBytes;
};

CCLZ_HD Layout frameLayout(uint64_t count, uint32_t rowElems, uint32_t shape = kShapeCaller,
                           uint32_t smoothBytes = 0, uint32_t log2H = 6) {
  Layout l;
  l.numRows = (count + rowElems - 1) / rowElems;
  l.numBlocks = (count + kBlockElems - 1) / kBlockElems;
  const uint32_t slotRow = shape == kShapeAuto ? autoMinRowElems(log2H) : rowElems;
  l.rowSlots = (count + slotRow - 1) / slotRow;
  l.smoothBytes = smoothBytes;
  l.codes = kFrameHeaderBytes;
  l.fine = alignUp(l.codes + count, 16);
  l.coarse = alignUp(l.fine + l.numBlocks, 16);
  l.flags = alignUp(l.coarse + 4 * l.rowSlots, 16);
  l.smooth = alignUp(l.flags + l.rowSlots, 16);
  l.frameBytes = alignUp(l.smooth + smoothBytes, 16);
  return l;
}

// The layout of a frame made under p (p.rowElems: the row length the frame declares).
CCLZ_HD Layout frameLayout(uint64_t count, const Params& p) {
  const uint32_t smooth =
      p.smoothing ? smoothCapacity(count, p.shape, p.rowElems, p.log2Hadamard) : 0u;
  return frameLayout(count, p.rowElems, p.shape, smooth, p.log2Hadamard);
}

// The power of two 2^-s (encode, s <= kMaxSmoothShift) or 2^s (decode) of a smoothing shift.
CCLZ_HD float smoothDown(uint32_t s) { return bitsToFloat((127u - s) << 23); }
CCLZ_HD float smoothUp(uint32_t s) { return bitsToFloat((127u + s) << 23); }

// ---- fp32 arithmetic, one rounding per operation (mulRn/addRn/subRn: common/float_rn.h) ----

CCLZ_HD float reciprocal(float a) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(a);
#else
  return 1.0f / a;
#endif
}
// Round to the nearest integer, ties to even (exact for |v| < 2^23 in both).
CCLZ_HD float roundEven(float v) {
#if defined(__CUDA_ARCH__)
  return rintf(v);
#else
  return __builtin_rintf(v);  // the default rounding mode: to nearest even
#endif
}
CCLZ_HD bool isFiniteBits(uint32_t u) { return (u & 0x7F800000u) != 0x7F800000u; }
CCLZ_HD float absf(float v) { return bitsToFloat(floatToBits(v) & 0x7FFFFFFFu); }
CCLZ_HD float maxf(float a, float b) { return a > b ? a : b; }  // NaN-free inputs only

// ---- Grids ------------------------------------------------------------------------------------

// The largest magnitude of a grid (its "top").
CCLZ_HD float gridTop(uint32_t grid) {
  return grid == kE4M3 ? 448.0f : grid == kE5M2 ? 57344.0f : 126.0f;
}

// A minifloat with `mant` mantissa bits and exponent bias `bias`: the 7-bit magnitude code of a
// finite v >= 0, rounded to nearest even (subnormals included) and saturated at maxCode.
CCLZ_HD uint32_t minifloatCode(float v, uint32_t mant, uint32_t bias, uint32_t maxCode) {
  const uint32_t u = floatToBits(v);
  const uint32_t minNormalBits = (128u - bias) << 23;  // 2^(1-bias)
  if (u >= minNormalBits) {
    // Keep `mant` mantissa bits, rounding the dropped ones to nearest even; a carry moves into
    // the exponent, which is what rounding up to the next binade means.
    const uint32_t shift = 23u - mant;
    const uint32_t rounded = (u + (1u << (shift - 1)) - 1u + ((u >> shift) & 1u)) >> shift;
    const uint32_t code = rounded - ((127u - bias) << mant);
    return code < maxCode ? code : maxCode;
  }
  // Subnormal: units of 2^(1-bias-mant); 2^mant means the smallest normal, whose code it also is.
  const float units = mulRn(v, bitsToFloat((127u + bias - 1u + mant) << 23));
  return static_cast<uint32_t>(roundEven(units));
}

CCLZ_HD float minifloatValue(uint32_t m, uint32_t mant, uint32_t bias) {
  const uint32_t e = m >> mant, f = m & ((1u << mant) - 1u);
  if (e == 0) return mulRn(static_cast<float>(f), bitsToFloat((127u + 1u - bias - mant) << 23));
  return bitsToFloat(((e + 127u - bias) << 23) | (f << (23u - mant)));
}

// Magnitude code (0..126) of a finite v >= 0 on a grid.
CCLZ_HD uint32_t magnitudeCode(uint32_t grid, float v) {
  if (grid == kE4M3) return minifloatCode(v, 3, 7, 0x7E);
  if (grid == kE5M2) return minifloatCode(v, 2, 15, 0x7B);
  return v >= 126.0f ? 126u : static_cast<uint32_t>(roundEven(v));
}

CCLZ_HD float magnitudeValue(uint32_t grid, uint32_t m) {
  if (grid == kE4M3) return minifloatValue(m, 3, 7);
  if (grid == kE5M2) return minifloatValue(m, 2, 15);
  return static_cast<float>(m);
}

// magnitudeValue(grid, magnitudeCode(grid, v)) for a finite v >= 0, computed without building
// the code: the scale search evaluates it for 3 values x up to 32 candidates per block, so it is
// on the encoder's critical path. The same rounding (nearest even, saturating), so the same value.
CCLZ_HD float roundMagnitude(uint32_t grid, float v) {
  if (grid == kInt8) return v >= 126.0f ? 126.0f : roundEven(v);
  const uint32_t mant = grid == kE4M3 ? 3 : 2, bias = grid == kE4M3 ? 7 : 15;
  const uint32_t u = floatToBits(v);
  if (u >= (128u - bias) << 23) {
    const uint32_t shift = 23u - mant, mask = (1u << shift) - 1u;
    const uint32_t rounded = (u + (mask >> 1) + ((u >> shift) & 1u)) & ~mask;
    const uint32_t topBits = floatToBits(gridTop(grid));
    return bitsToFloat(rounded < topBits ? rounded : topBits);
  }
  // Subnormal: a whole number of units 2^(1-bias-mant) (2^mant units is the smallest normal).
  const float units = roundEven(mulRn(v, bitsToFloat((127u + bias - 1u + mant) << 23)));
  return mulRn(units, bitsToFloat((127u + 1u - bias - mant) << 23));
}

// The code of a finite scaled value v (= x * inv). Zero is always 0x00, never the NaN code.
CCLZ_HD uint8_t quantize(uint32_t grid, float v) {
  const uint32_t u = floatToBits(v);
  const uint32_t m = magnitudeCode(grid, bitsToFloat(u & 0x7FFFFFFFu));
  return static_cast<uint8_t>(m == 0 ? 0u : (m | ((u >> 24) & 0x80u)));
}

// Four codes in a word, as a conversion that keeps the sign of a value rounded to zero gives them
// (0x80: the NaN code here), with every such code made 0x00, as quantize codes zero. A byte's
// magnitude plus 0x7F sets its top bit exactly when the magnitude is not zero (no carry leaves the
// byte), so the sign survives there only.
CCLZ_HD uint32_t clearZeroSigns(uint32_t word) {
  return word & (((word & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | 0x7F7F7F7Fu);
}

// The code of an element that is NaN or Inf (bits u).
CCLZ_HD uint8_t specialCode(uint32_t u) {
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return kCodeNaN;
  return (u >> 31) ? kCodeNegInf : kCodePosInf;
}

CCLZ_HD bool isSpecialCode(uint8_t code) { return code == kCodeNaN || (code & 0x7Fu) == 0x7Fu; }

// The value of a special code, in fp32.
CCLZ_HD float specialValue(uint8_t code) {
  if (code == kCodeNaN) return bitsToFloat(0x7FC00000u);
  return bitsToFloat(code == kCodePosInf ? 0x7F800000u : 0xFF800000u);
}

// The unscaled value of a finite code.
CCLZ_HD float codeValue(uint32_t grid, uint8_t code) {
  const float m = magnitudeValue(grid, code & 0x7Fu);
  return (code & 0x80u) ? -m : m;
}

// ---- Scales -----------------------------------------------------------------------------------

// Fine scale code k: 2^((k >> 5) - 7) * (1 + (k & 31)/32), exact in fp32: exponent field
// (k >> 5) + 120 and top 5 mantissa bits k & 31, ((k >> 5) + 120) << 23 | (k & 31) << 18.
// NOTE: written as k << 18 plus 120 << 23, the same bits for every k (k << 18 is (k >> 5) << 23
// plus (k & 31) << 18, and adding 120 << 23 leaves bits 18..22 alone; Fp8Format.FineScaleBits
// checks every k < 2^24 and a sample beyond): one multiply-add (the FMA pipe) where the fields
// would take a shift, two masks and an add on the integer ALU pipe, once per table entry.
CCLZ_HD float fineScale(uint32_t k) { return bitsToFloat((k << 18) + (120u << 23)); }

// A row's coarse scale from its largest finite |value| a.
CCLZ_HD float coarseScale(uint32_t grid, float a) {
  const float c = a / gridTop(grid);
  return c < kMinCoarse ? 0.0f : c;
}

// Block scale s = c * f(k) and its inverse.
struct BlockScale {
  float s, inv;
};
CCLZ_HD BlockScale blockScale(float coarse, uint32_t k) {
  const float s = mulRn(coarse, fineScale(k));
  return BlockScale{s, s > 0.0f ? reciprocal(s) : 0.0f};
}

// The largest fine code k with f(k) <= x (0 where x < f(0) = 2^-7, 255 where x >= 2): x's
// exponent and top 5 mantissa bits.
// NOTE: b >> 18 is (exponent << 5 | top 5 mantissa bits) for x >= 0, so the code is that minus
// (127 - 7) << 5, clamped; a sign bit (or NaN, Inf) lands above 255 and clamps to 255.
// A subtraction and a clamp instead of tests and selects: the encoder runs near the limit of its
// integer ALU pipe (ncu; docs/kernels/fp8.md, "Encoder").
CCLZ_HD uint32_t floorFineCode(float x) {
  const int code = static_cast<int>(floatToBits(x) >> 18) - ((127 - 7) << 5);
  return static_cast<uint32_t>(code < 0 ? 0 : code > 255 ? 255 : code);
}

// The fine code nearest to x > 0 (ties to the larger; clamped to 0..255 as floorFineCode): the
// fine scales are the fp32 values with 5 mantissa bits, so x rounded to 5 mantissa bits (a carry
// out of the mantissa moves the exponent, and the code with it).
CCLZ_HD uint32_t nearestFineCode(float x) {
  return floorFineCode(bitsToFloat(floatToBits(x) + (1u << 17)));
}

// need = a / (top * coarse): the fine scale at which a lands on the grid's top (in (0, ~1]).
CCLZ_HD float fineScaleNeeded(uint32_t grid, float coarse, float a) {
  return divRn(a, mulRn(gridTop(grid), coarse));
}

// The smallest k at which the block's largest |value| a does not exceed the grid's top
// (docs/formats.md, "Scales": choosing k), for coarse > 0 and a > 0 with need = fineScaleNeeded(grid,
// coarse, a). v(k) = a * inv(k) does not increase with k, so the guess floorFineCode(need),
// corrected one code at a time, gives the same k as a search from 0.
CCLZ_HD uint32_t startCodeFrom(uint32_t grid, float coarse, float a, float need) {
  const float top = gridTop(grid);
  auto fits = [&](uint32_t k) { return mulRn(a, blockScale(coarse, k).inv) <= top; };
  int k = static_cast<int>(floorFineCode(need));
  while (k > 0 && fits(static_cast<uint32_t>(k - 1))) --k;
  while (k < 255 && !fits(static_cast<uint32_t>(k))) ++k;
  return static_cast<uint32_t>(k);
}
// startCodeFrom from the inverses of three codes around guess = floorFineCode(need) (inv(k) =
// blockScale(coarse, k).inv for k = guess - 1 .. guess + 1): need lies in [fineScale(guess),
// fineScale(guess + 1)), so k0 is guess or guess + 1 unless rounding moves it, and a table lookup
// or two decide it. Returns kNoStartCode where the three do not decide (k0 elsewhere, or guess at
// the ends of the codes): the caller then calls startCodeFrom.
constexpr uint32_t kNoStartCode = 0xFFFFFFFFu;
// NOTE: the three inverses are read whatever they decide and combined by selects: on the device a
// branch per lookup would cost a divergence region each. A guess at the ends reads codes 0..2 instead
// (in range; declined whatever they hold).
template <typename Inverse>
CCLZ_HD uint32_t startCodeNear(uint32_t grid, float a, uint32_t guess, Inverse inv) {
  const float top = gridTop(grid);
  const bool inner = guess > 0 && guess < 254;
  const uint32_t g = inner ? guess : 1u;
  const bool fitsBelow = mulRn(a, inv(g - 1)) <= top;
  const bool fitsAt = mulRn(a, inv(g)) <= top;
  const bool fitsAfter = mulRn(a, inv(g + 1)) <= top;
  const uint32_t k = fitsAt ? g : fitsAfter ? g + 1 : kNoStartCode;
  return inner && !fitsBelow ? k : kNoStartCode;
}

CCLZ_HD uint32_t startCode(uint32_t grid, float coarse, float a) {
  if (coarse == 0.0f || a == 0.0f) return 0;
  return startCodeFrom(grid, coarse, a, fineScaleNeeded(grid, coarse, a));
}

// The search's error of candidate k for the block's three largest magnitudes t[0] >= t[1] >= t[2]:
// d_j = t_j - q(t_j * inv) * s by one fused multiply-add each, then d0^2 + d1^2 + d2^2 by a
// multiply and two fused multiply-adds, in that order.
CCLZ_HD float candidateError(uint32_t grid, float coarse, uint32_t k, const float* t) {
  const BlockScale sc = blockScale(coarse, k);
  float d[3];
  for (int j = 0; j < 3; ++j) d[j] = fmaRn(roundMagnitude(grid, mulRn(t[j], sc.inv)), -sc.s, t[j]);
  return fmaRn(d[2], d[2], fmaRn(d[1], d[1], mulRn(d[0], d[0])));
}

// A candidate's rank: its error's bits (the error is >= 0 or +Inf, so the bits order as the
// values) with the low 8 replaced by the code. The block takes the smallest: the smallest error
// on 15 mantissa bits, then the smallest code. One unsigned minimum per candidate, the same in any
// order, so the kernels can split the candidates over lanes and merge with a min.
CCLZ_HD uint32_t candidateKey(float err, uint32_t k) { return (floatToBits(err) & ~0xFFu) | k; }
constexpr uint32_t kNoCandidateKey = 0xFFFFFFFFu;  // above every key

// The search window of a block: k0 .. last.
CCLZ_HD uint32_t lastCandidate(uint32_t k0, uint32_t candidates) {
  const uint32_t last = k0 + candidates - 1;
  return last < 255 ? last : 255;
}

// The grid-aligned candidates (E4M3): the fine scale that puts the block's largest value a on
// grid point g is need * top / g, so for each grid value g with top / 2 < g < top, the code
// nearest to need * R, R = top / g (fp32, rounded to nearest); with k0 (a at the top) that is 8
// codes where the window has 32. The block's 2nd and 3rd largest values seldom prefer another:
// all 32 codes give a geometric-mean NMSE of 3.79e-4 on the real tensors against 3.83e-4, for
// 1.22x the encode time at 256 MiB (docs/formats.md, fp8 "Why this design"). E5M2's grid is too
// coarse for that (its 2nd and 3rd values decide more often: grid-aligned codes give 9-12% more
// top-3 error on Gaussian blocks): it searches every code of the window, as INT8 does.
constexpr uint32_t kMaxScaleRatios = 7;
CCLZ_HD uint32_t numScaleRatios(uint32_t grid) { return grid == kE4M3 ? kMaxScaleRatios : 0u; }
// Ratio i: 448 / g for g = 416, 384, 352, 320, 288, 256, 240 (largest first).
CCLZ_HD float scaleRatio(uint32_t i) {
  switch (i) {
    case 0: return 0x1.13b13cp+0f;
    case 1: return 0x1.2aaaaap+0f;
    case 2: return 0x1.45d174p+0f;
    case 3: return 0x1.666666p+0f;
    case 4: return 0x1.8e38e4p+0f;
    case 5: return 0x1.c00000p+0f;
    default: return 0x1.dddddep+0f;
  }
}
// Candidate i + 1 of a grid-aligned search (candidate 0 is k0).
CCLZ_HD uint32_t ratioCode(float need, uint32_t i) {
  return nearestFineCode(mulRn(need, scaleRatio(i)));
}

// The block's fine-scale code (docs/formats.md, "Scales": choosing k): the candidate in the window with the
// smallest key. The candidates are the grid-aligned ones for E4M3, every code of the window for
// E5M2 and INT8.
CCLZ_HD uint32_t chooseFineCode(uint32_t grid, float coarse, const float* t, uint32_t candidates) {
  if (coarse == 0.0f || t[0] == 0.0f) return 0;
  const float need = fineScaleNeeded(grid, coarse, t[0]);
  const uint32_t k0 = startCodeFrom(grid, coarse, t[0], need);
  if (candidates == 1) return k0;
  const uint32_t last = lastCandidate(k0, candidates);
  uint32_t best = candidateKey(candidateError(grid, coarse, k0, t), k0);
  auto consider = [&](uint32_t k) {
    if (k < k0 || k > last) return;
    const uint32_t key = candidateKey(candidateError(grid, coarse, k, t), k);
    best = key < best ? key : best;
  };
  if (numScaleRatios(grid) == 0) {
    for (uint32_t k = k0 + 1; k <= last; ++k) consider(k);
  } else {
    for (uint32_t i = 0; i < numScaleRatios(grid); ++i) consider(ratioCode(need, i));
  }
  return best & 0xFFu;
}

// Keeps t[0] >= t[1] >= t[2] the three largest of the magnitudes offered.
CCLZ_HD void offerTop3(float* t, float v) {
  if (v > t[2]) {
    if (v > t[1]) {
      t[2] = t[1];
      if (v > t[0])
        t[1] = t[0], t[0] = v;
      else
        t[1] = v;
    } else {
      t[2] = v;
    }
  }
}

// The same three values as offerTop3 without branches, for the kernels (the values are finite
// and >= +0, so min/max are exact and a sorted triple of them is unique): insertTop3 offers one
// value; mergeTop3 leaves in a the largest three of a's and b's (the k-th largest of two sorted
// lists is the largest over i of min(a's i-th, b's (k-i)-th)).
CCLZ_HD void insertTop3(float* t, float v) {
  const float lo0 = fminf(t[0], v), lo1 = fminf(t[1], lo0);
  t[0] = fmaxf(t[0], v);
  t[1] = fmaxf(t[1], lo0);
  t[2] = fmaxf(t[2], lo1);
}
CCLZ_HD void mergeTop3(float* a, const float* b) {
  const float t0 = fmaxf(a[0], b[0]);
  const float t1 = fmaxf(fminf(a[0], b[0]), fmaxf(a[1], b[1]));
  const float t2 = fmaxf(fmaxf(a[2], b[2]), fmaxf(fminf(a[0], b[1]), fminf(a[1], b[0])));
  a[0] = t0, a[1] = t1, a[2] = t2;
}

// The three largest of 8 magnitudes (finite, >= +0), sorted: insertTop3 of each into {0, 0, 0},
// with fewer min/max (27 instead of 40): 4 sorted pairs, two pairs of pairs merged into sorted
// triples (of h0 >= l0 and h1 >= l1 the largest is max(h0, h1); the middle two are min(h0, h1) and
// max(l0, l1) in either order), then one mergeTop3.
CCLZ_HD void top3of8(const float* v, float* t) {
  float hi[4], lo[4];
  for (int i = 0; i < 4; ++i) {
    hi[i] = fmaxf(v[2 * i], v[2 * i + 1]);
    lo[i] = fminf(v[2 * i], v[2 * i + 1]);
  }
  float b[3];
  float* out[2] = {t, b};
  for (int q = 0; q < 2; ++q) {
    const float h0 = hi[2 * q], h1 = hi[2 * q + 1];
    const float m = fminf(h0, h1), n = fmaxf(lo[2 * q], lo[2 * q + 1]);
    out[q][0] = fmaxf(h0, h1), out[q][1] = fmaxf(m, n), out[q][2] = fminf(m, n);
  }
  mergeTop3(t, b);
}

// ---- Top-3 and maxima on bf16/fp16 magnitude bits, two 16-bit halves per word -----------------
// For bf16 and fp16, |v| of a finite value is ordered as its bits with the sign cleared
// (0..0x7F7F / 0x7BFF), and converts to fp32 exactly: the largest magnitude or the top-3 of the
// bits are those of the values. The kernels use these on the raw words of a row (sm_90: one
// VIMNMX.U16x2 per max/min, two values each), which is why they work on halves.

CCLZ_HD uint32_t maxU16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __vmaxu2(a, b);
#else
  const uint32_t lo = (a & 0xFFFFu) > (b & 0xFFFFu) ? a & 0xFFFFu : b & 0xFFFFu;
  const uint32_t hi = (a >> 16) > (b >> 16) ? a >> 16 : b >> 16;
  return lo | (hi << 16);
#endif
}
CCLZ_HD uint32_t minU16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __vminu2(a, b);
#else
  const uint32_t lo = (a & 0xFFFFu) < (b & 0xFFFFu) ? a & 0xFFFFu : b & 0xFFFFu;
  const uint32_t hi = (a >> 16) < (b >> 16) ? a >> 16 : b >> 16;
  return lo | (hi << 16);
#endif
}

// Per half, the sorted top-3 t[0] >= t[1] >= t[2] of the four words w (the pair-of-pairs step of
// top3of8: of h0 >= l0 and h1 >= l1 the largest is max(h0, h1), the middle two are min(h0, h1)
// and max(l0, l1)).
CCLZ_HD void top3of4x2(const uint32_t* w, uint32_t* t) {
  const uint32_t h0 = maxU16x2(w[0], w[1]), l0 = minU16x2(w[0], w[1]);
  const uint32_t h1 = maxU16x2(w[2], w[3]), l1 = minU16x2(w[2], w[3]);
  const uint32_t m = minU16x2(h0, h1), n = maxU16x2(l0, l1);
  t[0] = maxU16x2(h0, h1), t[1] = maxU16x2(m, n), t[2] = minU16x2(m, n);
}

// The largest of three per half (sm_90: one 3-input VIMNMX3.U16x2).
CCLZ_HD uint32_t max3U16x2(uint32_t a, uint32_t b, uint32_t c) {
#if defined(__CUDA_ARCH__)
  return __vimax3_u16x2(a, b, c);
#else
  return maxU16x2(maxU16x2(a, b), c);
#endif
}

// mergeTop3 per half (7 min/max instead of 9, with 3-input maxima).
CCLZ_HD void mergeTop3x2(uint32_t* a, const uint32_t* b) {
  const uint32_t t0 = maxU16x2(a[0], b[0]);
  const uint32_t t1 = max3U16x2(minU16x2(a[0], b[0]), a[1], b[1]);
  const uint32_t t2 = max3U16x2(a[2], b[2], maxU16x2(minU16x2(a[0], b[1]), minU16x2(a[1], b[0])));
  a[0] = t0, a[1] = t1, a[2] = t2;
}

// a's and b's low halves as one word (a's in the low half), and their high halves: one byte
// permute each.
CCLZ_HD uint32_t lowHalves(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, 0x5410);
#else
  return (a & 0xFFFFu) | (b << 16);
#endif
}
CCLZ_HD uint32_t highHalves(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(a, b, 0x7632);
#else
  return (a >> 16) | (b & 0xFFFF0000u);
#endif
}

// A word of two bf16/fp16 values with each half's magnitude doubled: the low half 2|a| (its sign
// shifted out into the high half), the high half 2|b| plus the low half's sign bit (its own sign
// shifted out of the word). Maxima and top-3 of these halves give those of the magnitudes
// (halving each result): the extra bit only breaks ties between equal magnitudes.
// NOTE: a multiply, so that it goes to the FMA pipe, where masking the signs off would be an
// integer ALU instruction per word and the encoder runs near the limit of that pipe (ncu;
// docs/kernels/fp8.md, "Encoder").
CCLZ_HD uint32_t doubledMagnitudes(uint32_t w) { return w * 2u; }
// The magnitude bits (< 0x8000) of the low or high half of a word of doubled magnitudes.
CCLZ_HD uint32_t halvedLow(uint32_t d) { return (d & 0xFFFFu) >> 1; }
CCLZ_HD uint32_t halvedHigh(uint32_t d) { return d >> 17; }

// One lane's top-3 of two tiles at once: a and b are the lane's 8 magnitudes (4 words) of tile A
// and of tile B; t[j]'s low half is the j-th largest of A's 8, its high half B's.
CCLZ_HD void top3of8Pair(const uint32_t* a, const uint32_t* b, uint32_t* t) {
  uint32_t ta[3], tb[3], hi[3];
  top3of4x2(a, ta);  // per half: the top-3 of the lane's even values and of its odd values
  top3of4x2(b, tb);
  for (int j = 0; j < 3; ++j) {
    t[j] = lowHalves(ta[j], tb[j]);    // the even values' triples of A and B
    hi[j] = highHalves(ta[j], tb[j]);  // the odd values' triples
  }
  mergeTop3x2(t, hi);
}

// ---- Rotation ---------------------------------------------------------------------------------

// y = W y for the unnormalized Sylvester-Hadamard W of size n, in the fixed order of the spec.
CCLZ_HD void hadamardInPlace(float* y, uint32_t n) {
  for (uint32_t len = 1; len < n; len <<= 1)
    for (uint32_t i = 0; i < n; ++i)
      if ((i & len) == 0) {
        const float a = y[i], b = y[i + len];
        y[i] = addRn(a, b);
        y[i + len] = subRn(a, b);
      }
}

// 1/H as an fp32 (a power of two).
CCLZ_HD float inverseHadamardScale(uint32_t log2H) { return bitsToFloat((127u - log2H) << 23); }

// A group's contribution to the adaptive statistic: floor(log2(H a^2 / e)), at least 0; a and e
// come from values scaled by the power of two that brings the group's largest into [1, 2), so
// that neither overflows nor loses the group to underflow.
CCLZ_HD uint32_t groupOutlierLog2(float a, float e, uint32_t log2H) {
  if (e == 0.0f) return 0;
  const float papr = mulRn(mulRn(a, a), bitsToFloat((127u + log2H) << 23)) / e;
  const int exponent = static_cast<int>(floatToBits(papr) >> 23) - 127;
  return exponent > 0 ? static_cast<uint32_t>(exponent) : 0u;
}

// The power of two that scales a group whose largest |value| is a (finite, > 0) into [1, 2).
CCLZ_HD float statisticScale(float a) {
  const int e = static_cast<int>(floatToBits(a) >> 23) - 127;  // a subnormal counts as 2^-127
  const int s = e < -126 ? 126 : e > 126 ? -126 : -e;          // 2^s stays a normal fp32
  return bitsToFloat(static_cast<uint32_t>(s + 127) << 23);
}

// Sum of squares of 8 consecutive values, sequentially: the leaves of the statistic's tree.
CCLZ_HD float sumSquares8(const float* x) {
  float e = mulRn(x[0], x[0]);
  for (int i = 1; i < 8; ++i) e = addRn(e, mulRn(x[i], x[i]));
  return e;
}

// ---- Decoding ---------------------------------------------------------------------------------

// The largest finite value of a dtype, to which decoded values saturate.
CCLZ_HD float dtypeMaxFinite(int dtype) {
  if (dtype == cclzFloat16) return 65504.0f;
  if (dtype == cclzBfloat16) return bitsToFloat(0x7F7F0000u);
  return bitsToFloat(0x7F7FFFFFu);
}

CCLZ_HD float saturate(float v, float maxFinite) {
  return v > maxFinite ? maxFinite : v < -maxFinite ? -maxFinite : v;
}

// Checks of the per-row side data (docs/formats.md, "Validation").
CCLZ_HD bool validCoarse(float c, uint8_t flag) {
  const uint32_t u = floatToBits(c);
  if ((u >> 31) != 0 || !isFiniteBits(u)) return false;
  return flag == 0 || (flag == 1 && c < kMaxRotatedCoarse);
}

// Checks the fp8 fields of a header that passed checkFrameHeader; fills p.
CCLZ_HD uint32_t checkFp8Header(const FrameHeader& h, Params* p) {
  if (h.codec != cclzCodecFp8 || !isSupportedDtype(h.dtype) || h.flags != 0 || h.count > kMaxCount)
    return kFrameBadField;
  Params q;
  q.grid = h.params[0];
  q.log2Hadamard = h.params[1];
  q.policy = h.params[2];
  q.candidates = h.params[3];
  q.threshold = h.params[4];
  q.rowElems = h.chunkElems;
  q.shape = h.params[5];
  q.smoothing = h.params[6];
  q.smoothApplied = h.params[7];
  if (!validParams(q)) return kFrameBadField;
  if (q.shape == kShapeAuto && !isAutoCandidate(q.rowElems, q.log2Hadamard)) return kFrameBadField;
  if (q.smoothing && smoothCapacity(h.count, q.shape, q.rowElems, q.log2Hadamard) == 0)
    return kFrameBadField;
  if (q.smoothApplied && !smoothEligible(h.count, q.rowElems)) return kFrameBadField;
  const Layout l = frameLayout(h.count, q);
  if (l.numRows > 0xFFFFFFFFull) return kFrameBadField;
  if (h.numChunks != l.numRows || h.frameBytes != l.frameBytes) return kFrameBadField;
  if (p) *p = q;
  return kFrameOk;
}

// The header of a frame made under p, whose fields are the frame's own (p.rowElems the row length
// it uses, p.smoothing whether it has a smoothing area, p.smoothApplied whether it smoothed).
CCLZ_HD FrameHeader makeHeader(const Params& p, int dtype, uint64_t count) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kFrameVersion;
  h.codec = cclzCodecFp8;
  h.dtype = static_cast<uint8_t>(dtype);
  h.count = count;
  const Layout l = frameLayout(count, p);
  h.frameBytes = l.frameBytes;
  h.chunkElems = p.rowElems;
  h.numChunks = static_cast<uint32_t>(l.numRows);
  h.params[0] = static_cast<uint8_t>(p.grid);
  h.params[1] = static_cast<uint8_t>(p.log2Hadamard);
  h.params[2] = static_cast<uint8_t>(p.policy);
  h.params[3] = static_cast<uint8_t>(p.candidates);
  h.params[4] = static_cast<uint8_t>(p.threshold);
  h.params[5] = static_cast<uint8_t>(p.shape);
  h.params[6] = static_cast<uint8_t>(p.smoothing);
  h.params[7] = static_cast<uint8_t>(p.smoothApplied);
  h.checksum = headerChecksum(h);
  return h;
}

// Stores fp32 v as element i of a bf16, fp16 or fp32 array.
CCLZ_HD void storeFromFloat(void* data, int dtype, uint64_t i, float v) {
  if (dtype == cclzBfloat16)
    static_cast<uint16_t*>(data)[i] = floatToBf16(v);
  else if (dtype == cclzFloat16)
    static_cast<uint16_t*>(data)[i] = floatToHalf(v);
  else
    static_cast<float*>(data)[i] = v;
}

}  // namespace cclz::fp8
