#include "codec/fp8/ref.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "codec/fp8/shape.h"
#include "common/error.h"

namespace cclz::fp8 {
namespace {

// The statistic of the adaptive policy for a row of n finite values (docs/formats.md,
// "Rotation"): the sum over whole groups of floor(log2 PAPR) against threshold * groups.
bool outlierHeavy(const Params& p, const float* x, uint64_t n) {
  const uint32_t h = 1u << p.log2Hadamard;
  const uint64_t groups = n / h;
  if (groups == 0) return false;
  uint64_t sum = 0;
  std::vector<float> leaves(h / 8);
  float xs[8];
  for (uint64_t g = 0; g < groups; ++g) {
    const float* y = x + g * h;
    float a = 0.0f;
    for (uint32_t i = 0; i < h; ++i) a = maxf(a, absf(y[i]));
    if (a == 0.0f) continue;
    const float scale = statisticScale(a);  // the group's largest into [1, 2)
    for (uint32_t l = 0; l < h / 8; ++l) {
      for (int i = 0; i < 8; ++i) xs[i] = mulRn(y[l * 8 + i], scale);
      leaves[l] = sumSquares8(xs);
    }
    for (uint32_t width = h / 8; width > 1; width /= 2)  // pairwise, in index order
      for (uint32_t i = 0; i < width / 2; ++i) leaves[i] = addRn(leaves[2 * i], leaves[2 * i + 1]);
    sum += groupOutlierLog2(mulRn(a, scale), leaves[0], p.log2Hadamard);
  }
  return sum >= static_cast<uint64_t>(p.threshold) * groups;
}

// Encodes one row of n values (fp32, may be NaN/Inf) in place of its codes, fine scales, coarse
// scale and flag.
void encodeRow(const Params& p, float* x, uint64_t n, uint8_t* codes, uint8_t* fine,
               float* coarseOut, uint8_t* flagOut) {
  bool finite = true;
  float rowMax = 0.0f;
  for (uint64_t i = 0; i < n; ++i) {
    if (!isFiniteBits(floatToBits(x[i])))
      finite = false;
    else
      rowMax = maxf(rowMax, absf(x[i]));
  }
  const uint32_t h = 1u << p.log2Hadamard;
  bool rotate = false;
  if (finite && rowMax < kMaxRotatedInput && n >= h) {
    if (p.policy == kRotateAlways) rotate = true;
    if (p.policy == kRotateAdaptive) rotate = outlierHeavy(p, x, n);
  }
  if (rotate) {
    for (uint64_t g = 0; g + h <= n; g += h) hadamardInPlace(x + g, h);
    rowMax = 0.0f;
    for (uint64_t i = 0; i < n; ++i) rowMax = maxf(rowMax, absf(x[i]));
  }
  const float c = coarseScale(p.grid, rowMax);
  for (uint64_t b0 = 0; b0 < n; b0 += kBlockElems) {
    const uint64_t m = std::min<uint64_t>(kBlockElems, n - b0);
    float t[3] = {0.0f, 0.0f, 0.0f};
    for (uint64_t i = b0; i < b0 + m; ++i)
      if (isFiniteBits(floatToBits(x[i]))) offerTop3(t, absf(x[i]));
    const uint32_t k = chooseFineCode(p.grid, c, t, p.candidates);
    fine[b0 / kBlockElems] = static_cast<uint8_t>(k);
    const BlockScale sc = blockScale(c, k);
    for (uint64_t i = b0; i < b0 + m; ++i) {
      const uint32_t u = floatToBits(x[i]);
      codes[i] = isFiniteBits(u) ? quantize(p.grid, mulRn(x[i], sc.inv)) : specialCode(u);
    }
  }
  *coarseOut = c;
  *flagOut = rotate ? 1 : 0;
}

struct FrameView {
  FrameHeader h;
  Params p;
  Layout l;
};

float readCoarse(const uint8_t* src, const Layout& l, uint64_t r) {
  float c;
  std::memcpy(&c, src + l.coarse + 4 * r, 4);
  return c;
}

// Validates everything a decode reads (docs/formats.md, "Validation") before anything is written.
uint32_t validate(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, FrameView* v) {
  if (!src || srcBytes < kFrameHeaderBytes) return kFrameTruncated;
  std::memcpy(&v->h, src, sizeof v->h);
  uint32_t err = checkFrameHeader(v->h, srcBytes);
  if (err == kFrameOk) err = checkFrameMatches(v->h, cclzCodecFp8, dtype, count);
  if (err == kFrameOk) err = checkFp8Header(v->h, &v->p);
  if (err != kFrameOk) return err;
  v->l = frameLayout(count, v->p);
  if (v->p.smoothApplied)
    for (uint32_t j = 0; j < v->p.rowElems; ++j)
      if (src[v->l.smooth + j] > kMaxSmoothShift) return kFrameBadChunk;
  const uint32_t h = 1u << v->p.log2Hadamard;
  for (uint64_t r = 0; r < v->l.numRows; ++r) {
    const float c = readCoarse(src, v->l, r);
    const uint8_t flag = src[v->l.flags + r];
    if (!validCoarse(c, flag) || (flag && v->p.policy == kRotateNever)) return kFrameBadChunk;
    if (!flag) continue;
    const uint64_t begin = r * v->p.rowElems;
    const uint64_t end = std::min<uint64_t>(count, begin + v->p.rowElems);
    const uint64_t whole = begin + (end - begin) / h * h;
    for (uint64_t i = begin; i < whole; ++i)
      if (isSpecialCode(src[v->l.codes + i])) return kFrameBadChunk;
  }
  return kFrameOk;
}

// Decodes a validated frame, one row at a time, handing each fp32 value to put(i, v).
template <class Put>
void decodeRows(const uint8_t* src, const FrameView& v, uint64_t count, int dtype, Put put) {
  const uint32_t h = 1u << v.p.log2Hadamard;
  const float maxFinite = dtypeMaxFinite(dtype);
  std::vector<float> row(v.p.rowElems);
  for (uint64_t r = 0; r < v.l.numRows; ++r) {
    const uint64_t begin = r * v.p.rowElems;
    const uint64_t n = std::min<uint64_t>(count - begin, v.p.rowElems);
    const float c = readCoarse(src, v.l, r);
    for (uint64_t i = 0; i < n; ++i) {
      const uint8_t code = src[v.l.codes + begin + i];
      const BlockScale sc = blockScale(c, src[v.l.fine + (begin + i) / kBlockElems]);
      row[i] = isSpecialCode(code) ? specialValue(code) : mulRn(codeValue(v.p.grid, code), sc.s);
    }
    if (src[v.l.flags + r]) {
      const float inv = inverseHadamardScale(v.p.log2Hadamard);
      for (uint64_t g = 0; g + h <= n; g += h) {
        hadamardInPlace(row.data() + g, h);
        for (uint32_t i = 0; i < h; ++i) row[g + i] = mulRn(row[g + i], inv);
      }
    }
    if (v.p.smoothApplied)  // special codes keep their value (and their NaN's bits)
      for (uint64_t i = 0; i < n; ++i)
        if (!isSpecialCode(src[v.l.codes + begin + i]))
          row[i] = mulRn(row[i], smoothUp(src[v.l.smooth + i]));
    // Special codes keep their NaN/Inf; everything else saturates (a finite input never
    // decodes to Inf, even where rounding pushed it past the dtype's range).
    for (uint64_t i = 0; i < n; ++i)
      put(begin + i,
          isSpecialCode(src[v.l.codes + begin + i]) ? row[i] : saturate(row[i], maxFinite));
  }
}

// The parameters a frame of these values records: the row length chosen where the caller left it
// to the encoder, the smoothing area where the frame is large enough, the smoothing decision and
// its shifts (rowElems of them, all 0 when the frame is not smoothed).
Params frameParams(const Params& req, int dtype, const void* src, uint64_t count,
                   std::vector<uint8_t>* shifts) {
  Params p = req;
  if (p.shape == kShapeAuto) p.rowElems = chooseRowElemsRef(dtype, src, count, p.log2Hadamard);
  p.smoothing = req.smoothing && smoothCapacity(count, p.shape, p.rowElems, p.log2Hadamard) != 0;
  shifts->assign(p.rowElems, 0);
  p.smoothApplied = (p.smoothing && smoothEligible(count, p.rowElems) &&
                     chooseSmoothingRef(dtype, src, count, p.rowElems, shifts->data()))
                        ? 1
                        : 0;
  return p;
}

}  // namespace

uint64_t maxEncodedBytes(const Params& p, uint64_t count) {
  return frameLayout(count, p).frameBytes;  // auto shape: the same for every row length chosen
}

void shapeStatsRef(int dtype, const void* src, uint64_t count, uint32_t log2H, ShapeStats* stats) {
  const uint64_t sample = shapeSampleElems(count);
  uint32_t histogram[256] = {}, counted = 0;
  for (uint64_t i = 0; i < std::min<uint64_t>(count, kShapeCenterElems); ++i) {
    const float v = loadAsFloat(src, dtype, i);
    if (hasMagnitude(v)) ++histogram[floatToBits(v) << 1 >> 24], ++counted;
  }
  const uint32_t center = shapeCenter(histogram, counted);
  std::vector<uint32_t> z(sample);
  std::vector<uint64_t> sum(sample + 1, 0), sumSq(sample + 1, 0);  // prefix sums
  for (uint64_t i = 0; i < sample; ++i) {
    z[i] = shapeLevel(loadAsFloat(src, dtype, i), center);
    sum[i + 1] = sum[i] + z[i];
    sumSq[i + 1] = sumSq[i] + uint64_t{z[i]} * z[i];
  }
  std::vector<uint64_t> column(kAutoMaxRowElems);
  for (uint32_t c = 0; c < numShapeCandidates(log2H); ++c) {
    const uint32_t rowElems = shapeCandidate(c, log2H);
    ShapeStats& s = stats[c];
    s = ShapeStats{};
    s.rows = static_cast<uint32_t>(sample / rowElems);
    if (s.rows < kShapeMinRows) continue;
    std::fill(column.begin(), column.begin() + rowElems, 0);
    for (uint64_t r = 0; r < s.rows; ++r)
      for (uint32_t j = 0; j < rowElems; ++j) column[j] += z[r * rowElems + j];
    for (uint32_t j = 0; j < rowElems; ++j) s.sumColSq += column[j] * column[j];
    s.total = sum[uint64_t{s.rows} * rowElems];
    s.sumSq = sumSq[uint64_t{s.rows} * rowElems];
  }
}

uint32_t chooseRowElemsRef(int dtype, const void* src, uint64_t count, uint32_t log2H) {
  ShapeStats stats[kMaxShapeCandidates] = {};
  shapeStatsRef(dtype, src, count, log2H, stats);
  return chooseRowElems(stats, log2H);
}

bool chooseSmoothingRef(int dtype, const void* src, uint64_t count, uint32_t rowElems,
                        uint8_t* shifts) {
  const uint64_t wholeRows = count / rowElems;
  std::vector<uint32_t> levels(rowElems, 0);  // per column, the sum of the sample's levels
  for (uint32_t i = 0; i < kSmoothMinRows; ++i) {
    const uint64_t begin = smoothSampleRow(i, wholeRows) * rowElems;
    for (uint32_t j = 0; j < rowElems; ++j)
      levels[j] += magnitudeLevel(loadAsFloat(src, dtype, begin + j));
  }
  uint32_t histogram[256] = {};
  for (uint32_t j = 0; j < rowElems; ++j) ++histogram[columnBinade(levels[j])];
  const uint32_t median = medianBinade(histogram, rowElems);
  bool any = false;
  for (uint32_t j = 0; j < rowElems; ++j) {
    shifts[j] = static_cast<uint8_t>(smoothShift(columnBinade(levels[j]), median));
    any = any || shifts[j] != 0;
  }
  return any;
}

uint64_t encodeRef(const Params& req, int dtype, const void* src, uint64_t count, uint8_t* dst,
                   uint64_t capacity) {
  CCLZ_REQUIRE(validParams(req) && req.smoothApplied == 0, cclzInvalidArgument,
               "invalid fp8 parameters");
  CCLZ_REQUIRE(isSupportedDtype(dtype), cclzNotSupported, "the fp8 codec takes bf16, fp16 or fp32");
  CCLZ_REQUIRE(count <= kMaxCount, cclzInvalidArgument, "element count too large");
  CCLZ_REQUIRE(count == 0 || src, cclzInvalidArgument, "source is NULL");
  CCLZ_REQUIRE(dst, cclzInvalidArgument, "destination is NULL");
  CCLZ_REQUIRE(frameLayout(count, req).rowSlots <= 0xFFFFFFFFull, cclzInvalidArgument,
               "too many rows for one frame");
  CCLZ_REQUIRE(capacity >= maxEncodedBytes(req, count), cclzBufferTooSmall,
               "destination capacity is below the maximum encoded size");
  std::vector<uint8_t> shifts;
  const Params p = frameParams(req, dtype, src, count, &shifts);
  const Layout l = frameLayout(count, p);
  std::memset(dst, 0, l.frameBytes);  // alignment gaps and unused slots are zero
  const FrameHeader h = makeHeader(p, dtype, count);
  std::memcpy(dst, &h, sizeof h);
  if (p.smoothApplied) std::memcpy(dst + l.smooth, shifts.data(), p.rowElems);
  std::vector<float> row(p.rowElems);
  for (uint64_t r = 0; r < l.numRows; ++r) {
    const uint64_t begin = r * p.rowElems;
    const uint64_t n = std::min<uint64_t>(count - begin, p.rowElems);
    for (uint64_t i = 0; i < n; ++i) {
      row[i] = loadAsFloat(src, dtype, begin + i);
      if (p.smoothApplied) row[i] = mulRn(row[i], smoothDown(shifts[i]));
    }
    float c;
    encodeRow(p, row.data(), n, dst + l.codes + begin, dst + l.fine + begin / kBlockElems, &c,
              dst + l.flags + r);
    std::memcpy(dst + l.coarse + 4 * r, &c, 4);
  }
  return l.frameBytes;
}

uint32_t decodeRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst) {
  FrameView v;
  const uint32_t err = validate(src, srcBytes, dtype, count, &v);
  if (err != kFrameOk) return err;
  decodeRows(src, v, count, dtype, [&](uint64_t i, float x) { storeFromFloat(dst, dtype, i, x); });
  return kFrameOk;
}

uint32_t decodeAccumulateRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count,
                             float* acc) {
  FrameView v;
  const uint32_t err = validate(src, srcBytes, dtype, count, &v);
  if (err != kFrameOk) return err;
  decodeRows(src, v, count, dtype, [&](uint64_t i, float x) {
    uint32_t word = 0;  // round to the dtype as decodeRef stores it, then add in fp32
    storeFromFloat(&word, dtype, 0, x);
    acc[i] = accumulateRn(acc[i], loadAsFloat(&word, dtype, 0));
  });
  return kFrameOk;
}

}  // namespace cclz::fp8
