// What the fp8 encoder decides from the data before it encodes (docs/formats.md, "Choosing the
// row length" and "Smoothing"): the row length, when the caller leaves it to the codec, and the
// per-channel smoothing shifts. The statistics are integers (exact in any order) and the few
// floating-point steps of the decisions are single IEEE operations, so the CPU reference and the
// kernels decide the same.
#pragma once

#include <cstdint>

#include "codec/fp8/format.h"
#include "common/float_rn.h"

namespace cclz::fp8 {

// The row length is estimated from the first min(kShapeSampleElems, count / 8) elements (the
// estimate costs about as much per sampled value as the encode per value, so at most ~1/8 of it);
// a candidate needs kShapeMinRows rows of them. Messages below 16 * 512 * 8 = 65536 values are
// too small to tell and get the fallback.
constexpr uint32_t kShapeSampleElems = 65536, kShapeSampleDivisor = 8;
constexpr uint32_t kShapeMinRows = 16;
constexpr uint32_t kMaxShapeCandidates = (kAutoMaxRowElems - kAutoMinRowElems) / kBlockElems + 1;
// A length stands out when its columns explain at least 3% of the variance of the values' log
// magnitudes (noise: well below 1% at these sample sizes); the shortest length within 75% of
// the best is taken (multiples of the period explain as much as the period).
constexpr double kShapeMinStructure = 0.03;
constexpr double kShapeNearBest = 0.75;
// Smoothing leaves a channel whose typical magnitude is up to 2^kSmoothKeep above the median
// channel's; one further up is shifted down to that.
constexpr uint32_t kSmoothKeep = 3;

CCLZ_HD uint32_t numShapeCandidates(uint32_t log2H) {
  return (kAutoMaxRowElems - autoMinRowElems(log2H)) / autoRowStep(log2H) + 1;
}
CCLZ_HD uint32_t shapeCandidate(uint32_t i, uint32_t log2H) {
  return autoMinRowElems(log2H) + i * autoRowStep(log2H);
}
CCLZ_HD uint64_t shapeSampleElems(uint64_t count) {
  const uint64_t share = count / kShapeSampleDivisor;
  return share < kShapeSampleElems ? share : kShapeSampleElems;
}

// log2|v| in eighths of a binade, offset (the exponent and top 3 mantissa bits of |v|: 0..2039);
// NaN and Inf count as 0.
CCLZ_HD uint32_t magnitudeLevel(float v) {
  const uint32_t u = floatToBits(v) & 0x7FFFFFFFu;
  return isFiniteBits(u) ? u >> 20 : 0u;
}

// The row-length statistic works on levels relative to the sample's typical magnitude (its
// center), clamped to 8 binades either side, with zero, NaN and Inf at the center: a few zeros
// or non-finite values would otherwise outweigh every channel (they lie ~100 binades away).
constexpr uint32_t kShapeCenterElems = 4096;  // the center: median binade of the first ones
constexpr uint32_t kShapeWindow = 64;         // levels either side of the center

CCLZ_HD bool hasMagnitude(float v) {
  const uint32_t u = floatToBits(v) & 0x7FFFFFFFu;
  return u != 0 && isFiniteBits(u);
}

// The center from the histogram of the binades (fp32 exponent fields) of the first
// min(count, kShapeCenterElems) values with a magnitude (`counted` of them): the median binade,
// in levels, at the middle of its binade.
CCLZ_HD uint32_t shapeCenter(const uint32_t* histogram, uint32_t counted) {
  uint32_t seen = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    seen += histogram[b];
    if (2 * seen >= counted) return b * 8 + 4;
  }
  return 0;
}

// A value's level for the row-length statistic: 0..2 kShapeWindow.
CCLZ_HD uint32_t shapeLevel(float v, uint32_t center) {
  if (!hasMagnitude(v)) return kShapeWindow;
  const int d = static_cast<int>(magnitudeLevel(v)) - static_cast<int>(center) +
                static_cast<int>(kShapeWindow);
  return d < 0                                    ? 0u
         : d > static_cast<int>(2 * kShapeWindow) ? 2 * kShapeWindow
                                                  : static_cast<uint32_t>(d);
}

// One candidate row length R over the sample's first `rows` whole rows (N = rows * R values z,
// z = shapeLevel): sum of z, sum of z^2, and the sum over the R columns of (sum of the column's
// z)^2. All far below 2^53 (z <= 128, N <= 2^16).
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
  const double within =
      divRnD(static_cast<double>(nWithin), static_cast<double>(n * (N - rowElems)));
  const double all = divRnD(static_cast<double>(nTotal), static_cast<double>(N * (N - 1)));
  return subRnD(1.0, divRnD(within, all));
}

// The candidates a message of count values measures: those with kShapeMinRows rows in the
// sample. They are the first ones (rows fall as the length grows); 0: none, the fallback.
CCLZ_HD uint32_t numMeasuredCandidates(uint64_t count, uint32_t log2H) {
  const uint64_t sample = shapeSampleElems(count);
  uint32_t n = 0;
  while (n < numShapeCandidates(log2H) && sample / shapeCandidate(n, log2H) >= kShapeMinRows) ++n;
  return n;
}

// The row length from the statistics of the first n candidates (stats[i] for shapeCandidate(i)).
// The others score -1 (too few rows) and never win, so n = numMeasuredCandidates decides as
// n = numShapeCandidates does.
CCLZ_HD uint32_t chooseRowElems(const ShapeStats* stats, uint32_t n, uint32_t log2H) {
  double best = -1.0;
  for (uint32_t i = 0; i < n; ++i) {
    const double e = channelStructure(stats[i], shapeCandidate(i, log2H));
    if (e > best) best = e;
  }
  if (!(best >= kShapeMinStructure)) return kAutoFallbackRowElems;
  const double bar = mulRnD(kShapeNearBest, best);
  for (uint32_t i = 0; i < n; ++i)
    if (channelStructure(stats[i], shapeCandidate(i, log2H)) >= bar)
      return shapeCandidate(i, log2H);
  return kAutoFallbackRowElems;  // not reached: the best passes its own bar
}
CCLZ_HD uint32_t chooseRowElems(const ShapeStats* stats, uint32_t log2H) {
  return chooseRowElems(stats, numShapeCandidates(log2H), log2H);
}

// How the device measures a candidate of R columns from the sample's levels stored as bytes
// (sample_kernel.cu): each thread adds the 16 columns of one 16-byte load over every
// `lanes`-th row, R / 16 such column groups side by side, so a row's loads are contiguous.
constexpr uint32_t kColumnGroupElems = 16;
struct ColumnSplit {
  uint32_t groups, lanes;  // lanes: threads per column group (threads / groups, at least 4)
};
CCLZ_HD ColumnSplit columnSplit(uint32_t rowElems, uint32_t threads) {
  const uint32_t groups = rowElems / kColumnGroupElems;
  return ColumnSplit{groups, threads / groups};
}
// The most rows a thread of 1024 takes (the sample's rows of a candidate over split.lanes): its
// loads are issued together.
constexpr uint32_t kMaxRowsPerLane = 5;
// Four levels (the bytes of w) as two words of two 16-bit column sums: bytes 0 and 2, bytes 1
// and 3. A column's sum over the sample stays below 2^16, so halves never carry into each other.
static_assert(kShapeSampleElems / kAutoMinRowElems * (2 * kShapeWindow) < (1u << 16),
              "a column's sum of levels fits 16 bits");
CCLZ_HD uint32_t evenLevels(uint32_t w) { return w & 0x00FF00FFu; }
CCLZ_HD uint32_t oddLevels(uint32_t w) { return (w >> 8) & 0x00FF00FFu; }
// The sum of squares of a word's two 16-bit column sums, and their sum.
CCLZ_HD uint64_t halvesSquared(uint32_t w) {
  const uint64_t lo = w & 0xFFFFu, hi = w >> 16;
  return lo * lo + hi * hi;
}
CCLZ_HD uint32_t halvesSum(uint32_t w) { return (w & 0xFFFFu) + (w >> 16); }

// Smoothing looks at kSmoothMinRows whole rows spread evenly over the frame (it has at least
// that many whole rows). Per column it sums the values' levels (magnitudeLevel): the typical
// magnitude of a channel, which a rare spike barely moves (a column maximum would follow it).
CCLZ_HD uint64_t smoothSampleRow(uint32_t i, uint64_t wholeRows) {
  return static_cast<uint64_t>(i) * wholeRows / kSmoothMinRows;
}

// A column's typical binade: its mean level in whole binades (levels are eighths of a binade;
// the sum is over kSmoothMinRows = 128 values, so the mean binade is the sum / 1024).
CCLZ_HD uint32_t columnBinade(uint32_t levelSum) { return levelSum / (8 * kSmoothMinRows); }

// The median of the columns' binades, from their histogram: the smallest b with at least half
// of the R columns at or below it.
CCLZ_HD uint32_t medianBinade(const uint32_t* histogram, uint32_t rowElems) {
  const uint32_t need = (rowElems + 1) / 2;
  uint32_t seen = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    seen += histogram[b];
    if (seen >= need) return b;
  }
  return 255;
}

// The shift of a column: how far its binade lies more than kSmoothKeep above the median.
CCLZ_HD uint32_t smoothShift(uint32_t binade, uint32_t median) {
  if (binade <= median + kSmoothKeep) return 0;
  const uint32_t s = binade - median - kSmoothKeep;
  return s < kMaxSmoothShift ? s : kMaxSmoothShift;
}

}  // namespace cclz::fp8
