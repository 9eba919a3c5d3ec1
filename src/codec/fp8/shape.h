// What the fp8 encoder decides from the data before it encodes (docs/formats.md, "Choosing the
// row length" and "Smoothing"): the row length, when the caller leaves it to the codec, and the
// per-channel smoothing shifts. The statistics are integers (exact in any order) and the few
// floating-point steps of the decisions are single IEEE operations, so the CPU reference and the
// kernels decide the same.
#pragma once

#include <cstdint>

#include "codec/fp8/format.h"

namespace cclz::fp8 {

// The row length is estimated from the first kShapeSampleElems elements; a candidate needs
// kShapeMinRows rows of them.
constexpr uint32_t kShapeSampleElems = 32768;
constexpr uint32_t kShapeMinRows = 8;
constexpr uint32_t kMaxShapeCandidates = (kAutoMaxRowElems - kAutoMinRowElems) / kBlockElems + 1;
// A length stands out when its columns explain at least 2% of the variance of the values' log
// magnitudes (noise: well below 1% at these sample sizes); the shortest length within 90% of
// the best is taken (multiples of the period explain as much as the period).
constexpr double kShapeMinStructure = 0.02;
constexpr double kShapeNearBest = 0.9;
// Smoothing keeps a channel up to 2^3 above the median channel (of the column maxima).
constexpr uint32_t kSmoothKeep = 3;

// fp64 with one rounding per operation (see common/float_rn.h).
CCLZ_HD double divRnD(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __ddiv_rn(a, b);
#else
  return a / b;
#endif
}
CCLZ_HD double subRnD(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}
CCLZ_HD double mulRnD(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

CCLZ_HD uint32_t numShapeCandidates(uint32_t log2H) {
  return (kAutoMaxRowElems - autoMinRowElems(log2H)) / autoRowStep(log2H) + 1;
}
CCLZ_HD uint32_t shapeCandidate(uint32_t i, uint32_t log2H) {
  return autoMinRowElems(log2H) + i * autoRowStep(log2H);
}
CCLZ_HD uint64_t shapeSampleElems(uint64_t count) {
  return count < kShapeSampleElems ? count : kShapeSampleElems;
}

// log2|v| in eighths of a binade, offset (the exponent and top 3 mantissa bits of |v|: 0..2039);
// NaN and Inf count as 0.
CCLZ_HD uint32_t magnitudeLevel(float v) {
  const uint32_t u = floatToBits(v) & 0x7FFFFFFFu;
  return isFiniteBits(u) ? u >> 20 : 0u;
}

// One candidate row length R over the sample's first `rows` whole rows (N = rows * R values z):
// sum of z, sum of z^2, and the sum over the R columns of (sum of the column's z)^2. All below
// 2^53 (z < 2^11, N <= 2^15).
struct ShapeStats {
  uint64_t total, sumSq, sumColSq;
  uint32_t rows, unused;
};

// The adjusted share of the variance of z that the columns explain (one-way analysis of
// variance): 1 - (within-column variance) / (total variance), each with its degrees of freedom.
// About 0 without channel structure; -1 for a candidate with too few rows to measure.
CCLZ_HD double channelStructure(const ShapeStats& s, uint32_t rowElems) {
  if (s.rows < kShapeMinRows) return -1.0;
  const uint64_t n = s.rows, N = n * rowElems;
  const uint64_t nTotal = N * s.sumSq - s.total * s.total;  // N * total sum of squares
  if (nTotal == 0) return 0.0;
  const uint64_t nWithin = n * s.sumSq - s.sumColSq;  // n * within-column sum of squares
  const double within = divRnD(static_cast<double>(nWithin), static_cast<double>(n * (N - rowElems)));
  const double all = divRnD(static_cast<double>(nTotal), static_cast<double>(N * (N - 1)));
  return subRnD(1.0, divRnD(within, all));
}

// The row length from the candidates' statistics (stats[i] for shapeCandidate(i)).
CCLZ_HD uint32_t chooseRowElems(const ShapeStats* stats, uint32_t log2H) {
  const uint32_t n = numShapeCandidates(log2H);
  double best = -1.0;
  for (uint32_t i = 0; i < n; ++i) {
    const double e = channelStructure(stats[i], shapeCandidate(i, log2H));
    if (e > best) best = e;
  }
  if (!(best >= kShapeMinStructure)) return kAutoFallbackRowElems;
  const double bar = mulRnD(kShapeNearBest, best);
  for (uint32_t i = 0; i < n; ++i)
    if (channelStructure(stats[i], shapeCandidate(i, log2H)) >= bar) return shapeCandidate(i, log2H);
  return kAutoFallbackRowElems;  // not reached: the best passes its own bar
}

// Smoothing looks at kSmoothMinRows rows spread evenly over the frame (numRows >= that many).
CCLZ_HD uint64_t smoothSampleRow(uint32_t i, uint64_t numRows) {
  return static_cast<uint64_t>(i) * numRows / kSmoothMinRows;
}

// The median binade of the column maxima, from a histogram of their fp32 exponent fields: the
// smallest e with at least half of the R columns at or below it.
CCLZ_HD uint32_t medianExponent(const uint32_t* histogram, uint32_t rowElems) {
  const uint32_t need = (rowElems + 1) / 2;
  uint32_t seen = 0;
  for (uint32_t e = 0; e < 256; ++e) {
    seen += histogram[e];
    if (seen >= need) return e;
  }
  return 255;
}

// The shift of a column whose largest finite |value| has bits colMaxBits.
CCLZ_HD uint32_t smoothShift(uint32_t colMaxBits, uint32_t median) {
  const uint32_t e = colMaxBits >> 23;
  if (e <= median + kSmoothKeep) return 0;
  const uint32_t s = e - median - kSmoothKeep;
  return s < kMaxSmoothShift ? s : kMaxSmoothShift;
}

}  // namespace cclz::fp8
