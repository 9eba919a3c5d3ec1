// The fp8 encode on the device: one warp per row, two passes over the row, each lane holding 8
// consecutive values (a 16-byte vector of bf16/fp16) per 256-value tile; a bf16/fp16 row of up to
// 1024 values is read once and held in registers, a longer one is read in segments of 1024 by
// each pass (the second time from L2) and each segment encoded as a held row; fp32 rows and
// rotated or smoothed long rows are read tile by tile in each pass. Where the row length or the
// smoothing is decided from the data, the sampling kernels (sample_kernel.cu) run first on the
// same stream.
#include "codec/fp8/device.cuh"

namespace cclz::fp8 {
namespace {

constexpr uint32_t kHeldTiles = 4;  // encode: rows of up to 1024 bf16/fp16 values held in registers
constexpr uint32_t kHeldElems = kHeldTiles * kTileElems;

// ---- Encode's fast paths. Each gives the bits of the format.h helper it stands for (the GPU tests
// compare the frames with the CPU reference byte for byte); they only compute them with fewer
// instructions.

// The block scales of one row, for every fine-scale code k: sInv[k] = (blockScale(c, k).s,
// blockScale(c, k).inv) (a reciprocal per code and row instead of one per candidate).
// NOTE: (s, inv) pairs side by side: a candidate reads both with one 8-byte shared load.
struct ScaleTable {
  float2 sInv[256];  // x: s, y: inv
};

__device__ __forceinline__ void fillScaleTable(ScaleTable& t, float coarse, uint32_t lane) {
#pragma unroll
  for (uint32_t k = lane; k < 256; k += 32) {
    const BlockScale sc = blockScale(coarse, k);
    t.sInv[k] = make_float2(sc.s, sc.inv);
  }
  __syncwarp();
}

// blockScale(coarse, k) as (s, inv) for the coarse scale of a row that has one (kMinCoarse <=
// coarse <= FLT_MAX / 126, the smallest grid top) and a code k <= 255: s = coarse * f(k) lies in
// [2^-107, 2^122), so blockScale's test s > 0 holds and is left out, and the reciprocal needs no
// range test.
// NOTE: __frcp_rn's range test and slow path are a divergence region per scale; in the fill of
// the scale table (~2.2 entries per lane and row at rows of 1024) they are part of ~8% of the
// encode's stall samples under ncu at 64 MiB (docs/kernels/fp8.md, "Encoder").
__device__ __forceinline__ float2 blockScaleOfRow(float coarse, uint32_t k) {
  const float s = mulRn(coarse, fineScale(k));
  return make_float2(s, reciprocalOfNormal(s));
}

// startCodeFrom(grid, coarse, a, need) from the table: the smallest k whose scale fits a, for
// coarse > 0 and a > 0.
__device__ __forceinline__ uint32_t startCodeFast(uint32_t grid, float a, float need,
                                                  const ScaleTable& t) {
  const float top = gridTop(grid);
  int k = static_cast<int>(floorFineCode(need));
  while (k > 0 && mulRn(a, t.sInv[k - 1].y) <= top) --k;
  while (k < 255 && !(mulRn(a, t.sInv[k].y) <= top)) ++k;
  return static_cast<uint32_t>(k);
}

// roundMagnitude(grid, a) and (grid, b) for finite a, b >= 0 on an E4M3/E5M2 grid: the
// hardware's conversion to the grid (nearest even, saturating at the top) and back (exact).
__device__ __forceinline__ float2 roundMagnitude2(uint32_t grid, float a, float b) {
  const __nv_fp8x2_storage_t q = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE,
                                                          fp8Kind(grid));
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(q, fp8Kind(grid))));
}

// candidateError(grid, coarse, k, t) from the block scale sInv = (s, inv) of code k.
__device__ __forceinline__ float candidateErrorFast(uint32_t grid, float2 sInv, const float* t) {
  const float s = sInv.x, inv = sInv.y;
  float q[3];
  if (grid == kInt8) {
#pragma unroll
    for (int j = 0; j < 3; ++j) q[j] = roundMagnitude(grid, mulRn(t[j], inv));
  } else {
    const float2 q01 = roundMagnitude2(grid, mulRn(t[0], inv), mulRn(t[1], inv));
    q[0] = q01.x, q[1] = q01.y;
    q[2] = roundMagnitude2(grid, mulRn(t[2], inv), 0.0f).x;
  }
  float d[3];
#pragma unroll
  for (int j = 0; j < 3; ++j) d[j] = fmaRn(q[j], -s, t[j]);
  return fmaRn(d[2], d[2], fmaRn(d[1], d[1], mulRn(d[0], d[0])));
}

// candidateErrorFast(grid, a, t) and (grid, b, t) for E4M3/E5M2 (a, b: two codes' (s, inv)), with
// the two candidates' third magnitudes in one pair conversion (each half of it rounds on its own):
// 3 conversions and 3 unpacks for two candidates instead of 4 and 4.
__device__ __forceinline__ float2 candidateErrorPairFast(uint32_t grid, float2 a, float2 b,
                                                         const float* t) {
  const float2 qa = roundMagnitude2(grid, mulRn(t[0], a.y), mulRn(t[1], a.y));
  const float2 qb = roundMagnitude2(grid, mulRn(t[0], b.y), mulRn(t[1], b.y));
  const float2 q2 = roundMagnitude2(grid, mulRn(t[2], a.y), mulRn(t[2], b.y));
  auto error = [&](float s, float q0, float q1, float q2) {
    const float d0 = fmaRn(q0, -s, t[0]), d1 = fmaRn(q1, -s, t[1]), d2 = fmaRn(q2, -s, t[2]);
    return fmaRn(d2, d2, fmaRn(d1, d1, mulRn(d0, d0)));
  };
  return make_float2(error(a.x, qa.x, qa.y, q2.x), error(b.x, qb.x, qb.y, q2.y));
}

// The smallest candidateKey of the block's candidates that lane `slot` of its kLanes takes
// (format.h, chooseFineCode; kNoCandidateKey if none): E4M3's 8 grid-aligned candidates,
// candidate 0 = k0 and candidate i + 1 = ratioCode(need, i), candidate j * kLanes + slot in step
// j, branch-free (a candidate outside the window is scored and dropped); other grids every code
// k0 + slot + j * kLanes up to last. scales(k): the block scale (s, inv) of code k (0..255), from
// the row's table or computed.
template <uint32_t kLanes, typename Scales>
__device__ __forceinline__ uint32_t searchCandidates(uint32_t grid, Scales scales, const float* t,
                                                     float need, uint32_t k0, uint32_t last,
                                                     uint32_t slot) {
  uint32_t best = kNoCandidateKey;
  if (numScaleRatios(grid) == 0) {  // uniform
    for (uint32_t k = k0 + slot; k <= last; k += kLanes) {
      const uint32_t key = candidateKey(candidateErrorFast(grid, scales(k), t), k);
      best = min(best, key);
    }
    return best;
  }
  constexpr uint32_t kCandidates = kMaxScaleRatios + 1;
  static_assert(kCandidates % kLanes == 0, "every lane takes as many candidates");
  if constexpr (kLanes == 2) {
    // NOTE: fewer integer-ALU instructions per candidate than the general form below (the encoder
    // is near that pipe's limit):
    // - the ratio of candidate 2j + slot by one FMA, slot * (r1 - r0) + r0 with r0, r1 the
    //   ratios of candidates 2j and 2j + 1, instead of a select: the ratios lie in [1, 2), so
    //   r1 - r0 and r0 + (r1 - r0) are exact (Fp8Format.ScaleRatioStepsAreExact); in step 0,
    //   slot 0's candidate is k0 and both lanes take r1;
    // - the scales of k read whether or not k is in the window (k is a code, 0..255; a stale
    //   table entry gives a key that is dropped), and a key outside the window dropped by a
    //   predicated minimum rather than two selects;
    // - two candidates' errors at once (candidateErrorPairFast).
    const float slotValue = slot == 0 ? 0.0f : 1.0f;
    uint32_t k[kCandidates / kLanes];
#pragma unroll
    for (uint32_t j = 0; j < kCandidates / kLanes; ++j) {
      const float r1 = scaleRatio(2 * j);
      float ratio = r1;
      if (j > 0) {
        const float r0 = scaleRatio(2 * j - 1);
        ratio = fmaRn(slotValue, subRn(r1, r0), r0);
      }
      const uint32_t nearest = nearestFineCode(mulRn(need, ratio));
      k[j] = j == 0 && slot == 0 ? k0 : nearest;
    }
#pragma unroll
    for (uint32_t j = 0; j < kCandidates / kLanes; j += 2) {
      const float2 err = candidateErrorPairFast(kE4M3, scales(k[j]), scales(k[j + 1]), t);
      const uint32_t keyA = candidateKey(err.x, k[j]), keyB = candidateKey(err.y, k[j + 1]);
      if (k[j] >= k0 && k[j] <= last) best = min(best, keyA);
      if (k[j + 1] >= k0 && k[j + 1] <= last) best = min(best, keyB);
    }
  } else {
#pragma unroll
    for (uint32_t j = 0; j < kCandidates / kLanes; ++j) {
      // Candidate j * kLanes + slot's ratio: compile-time constants and selects.
      float ratio = 1.0f;
#pragma unroll
      for (uint32_t s = 0; s < kLanes; ++s)
        if (slot == s && j * kLanes + s > 0) ratio = scaleRatio(j * kLanes + s - 1);
      // NOTE: computed in every lane and then selected: as a branch it would be a divergence
      // region (the two lanes of a block take different sides) where both sides run anyway.
      const uint32_t nearest = nearestFineCode(mulRn(need, ratio));
      const uint32_t k = j == 0 && slot == 0 ? k0 : nearest;
      const bool inWindow = k >= k0 && k <= last;
      const uint32_t key =
          candidateKey(candidateErrorFast(kE4M3, scales(inWindow ? k : k0), t), k);
      best = min(best, inWindow ? key : kNoCandidateKey);
    }
  }
  return best;
}

// The codes of 8 finite values on an E4M3/E5M2 grid, 4 to a word: quantize(grid, v[j]) by the
// hardware's conversion (nearest even, saturating), with a value that rounds to zero coded 0x00
// whatever its sign, as quantize does (clearZeroSigns: 3 instructions a word where __vcmpeq4
// takes 5).
__device__ __forceinline__ void quantize8Fast(uint32_t grid, const float* v, uint32_t* packed) {
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * w], v[4 * w + 1]),
                                                 __NV_SATFINITE, fp8Kind(grid));
    const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v[4 * w + 2], v[4 * w + 3]),
                                                 __NV_SATFINITE, fp8Kind(grid));
    const uint32_t word = lo | (hi << 16);
    packed[w] = clearZeroSigns(word);
  }
}

// The smallest magnitude bits of a non-finite bf16/fp16 value.
template <int Dtype>
constexpr uint32_t kFirstNonFinite = Dtype == cclzBfloat16 ? 0x7F80u : 0x7C00u;

// How encodeSegment is compiled: kFull, a whole segment of finite values of a plain row on the
// grid kGrid (E4M3 or E5M2), or any segment (kGrid unused: the row's grid).
template <bool Full, uint32_t Grid>
struct SegmentKind {
  static constexpr bool kFull = Full;
  static constexpr uint32_t kGrid = Grid;
};

// The largest finite magnitude bits of a held lane's 16 words (0 if none).
template <int Dtype>
__device__ __forceinline__ uint32_t largestFiniteBits(const uint4 (&raw)[kHeldTiles]) {
  uint32_t best = 0;
#pragma unroll
  for (uint32_t t = 0; t < kHeldTiles; ++t) {  // unrolled: raw stays in registers
    const uint32_t w[4] = {raw[t].x, raw[t].y, raw[t].z, raw[t].w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t h = (w[i / 2] >> (16 * (i % 2))) & 0x7FFFu;
      if (h < kFirstNonFinite<Dtype> && h > best) best = h;
    }
  }
  return best;
}

// Multiplies the lane's 8 values (columns first.. of their row) by their columns' 2^-shift.
__device__ __forceinline__ void smooth8(float* v, const uint8_t* shifts, uint32_t valid) {
  if (valid == 0) return;
  uint32_t w[2] = {0, 0};
  if (valid == kLaneElems) {
    const uint2 q = *reinterpret_cast<const uint2*>(shifts);
    w[0] = q.x, w[1] = q.y;
  } else {
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j)
      if (j < valid) w[j / 4] |= static_cast<uint32_t>(shifts[j]) << (8 * (j % 4));
  }
#pragma unroll
  for (uint32_t j = 0; j < kLaneElems; ++j)
    v[j] = mulRn(v[j], smoothDown((w[j / 4] >> (8 * (j % 4))) & 0xFFu));
}

// Frame blockIdx.y of `frames` (EncodeFrames: one count, one layout). Chosen = false is the encode
// with every parameter known on the host. Chosen = true reads the row length and the smoothing
// decision the sampling kernels left in the frame's choice, patches the header with them, and
// leaves the side data's unused slots to the kernel or memset that zeroed them before.
// NOTE: 4 blocks (32 warps) per SM: at most 64 registers.
// kLong: rows may be longer than kHeldElems (false where the host knows they are not: the
// segment loops then compile away, and held rows encode 3-5% faster without them;
// docs/kernels/fp8.md, "Row length and smoothing").
template <int Dtype, bool Chosen, bool kLong>
__global__ void __launch_bounds__(kThreads, 4)
    encodeKernel(Params p, Layout l, FrameHeader header, EncodeFrames frames, uint64_t count,
                 bool vector, DeviceStatus* status) {
  // NOTE: launched programmatic where it can be (launchEncode): this kernel waits for the kernel
  // before it before it touches global memory, then lets the kernel after it start. For calls in
  // a row (a pipeline's pieces) the launch of one overlaps the run of the one before. Letting the
  // next start only after the wait keeps the overlap one kernel deep (codec/pdl.cuh).
  waitForPreviousKernel();
  letNextKernelStart();
  const void* const src = frames.source();
  uint8_t* const dst = frames.frame();
  __shared__ ScaleTable tables[kThreads / 32];
  ScaleTable& table = tables[threadIdx.x / 32];
  const uint32_t lane = threadIdx.x & 31;
  uint32_t rowElems = p.rowElems;
  uint64_t numRows = l.numRows;
  bool smoothed = false;
  if constexpr (Chosen) {
    const EncodeChoice* choice = frames.choice();
    if (p.shape == kShapeAuto) rowElems = choice->rowElems;
    smoothed = choice->smoothApplied != 0;
    numRows = (count + rowElems - 1) / rowElems;
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    if constexpr (Chosen) {
      header.chunkElems = rowElems;
      header.numChunks = static_cast<uint32_t>(numRows);
      header.params[7] = smoothed ? 1 : 0;
      header.checksum = headerChecksum(header);
    }
    *reinterpret_cast<FrameHeader*>(dst) = header;
    // The alignment gaps are zero (each is shorter than 16 bytes).
    for (uint64_t i = l.codes + count; i < l.fine; ++i) dst[i] = 0;
    for (uint64_t i = l.fine + l.numBlocks; i < l.coarse; ++i) dst[i] = 0;
    if constexpr (!Chosen) {
      for (uint64_t i = l.coarse + 4 * l.numRows; i < l.flags; ++i) dst[i] = 0;
      for (uint64_t i = l.flags + l.numRows; i < l.frameBytes; ++i) dst[i] = 0;
    }
    status->encodedBytes = l.frameBytes;
    if (uint64_t* out = frames.sizeOut()) *out = l.frameBytes;
  }
  const uint32_t h = 1u << p.log2Hadamard, groupLanes = h / kLaneElems;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * blockDim.x / 32;
  constexpr bool kCanHold = Dtype != cclzFloat32;
  for (uint64_t r = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       r < numRows; r += warps) {
    const uint64_t begin = r * rowElems;
    const uint32_t n = static_cast<uint32_t>(count - begin < rowElems ? count - begin : rowElems);
    const bool mayRotate = p.policy != kRotateNever && n >= h;

    // NOTE: a bf16/fp16 row of up to kHeldTiles tiles is read from HBM once, all its loads in
    // flight together (64 bytes per lane), and held in registers for both passes; longer plain
    // rows are read so a segment at a time in each pass, the second time from L2; fp32 and
    // longer rotated or smoothed rows tile by tile in each pass.
    const bool held = kCanHold && n <= kHeldElems;  // uniform
    uint4 raw[kHeldTiles];
    // The lane's words of the row's elements s0 .. s0 + kHeldElems (0 past the row's end).
    auto loadSegment = [&](uint32_t s0) {
      if (vector && s0 + kHeldElems <= n) {  // uniform: one test per segment, not one per tile
#pragma unroll
        for (uint32_t t = 0; t < kHeldTiles; ++t)
          raw[t] = loadRaw8<Dtype>(src, begin + s0 + t * kTileElems + lane * kLaneElems,
                                   kLaneElems, true);
        return;
      }
#pragma unroll
      for (uint32_t t = 0; t < kHeldTiles; ++t) {
        const uint32_t first = s0 + t * kTileElems + lane * kLaneElems;
        raw[t] = loadRaw8<Dtype>(src, begin + first, validIn(first, n), vector);
      }
    };
    if constexpr (kCanHold)
      if (held) loadSegment(0);
    // The lane's 8 values of the tile at t0 (its elements first.. of the row).
    auto tileValues = [&](uint32_t t0, uint32_t first, uint32_t valid, float* v) {
      if constexpr (kCanHold) {
        if (held) {  // constant indices: raw stays in registers
          const uint32_t t = t0 / kTileElems;
          unpackRaw8<Dtype>(t == 0 ? raw[0] : t == 1 ? raw[1] : t == 2 ? raw[2] : raw[3], v);
          return;
        }
      }
      load8<Dtype>(src, begin + first, valid, vector, v);
    };

    // A bf16/fp16 row that is neither smoothed nor rotated: pass 1 and the top-3 work on the raw
    // words' magnitude bits (format.h, "Top-3 and maxima on bf16/fp16 magnitude bits"). A held
    // row is read once; a longer one (segmented) is read in segments of kHeldElems, once for
    // pass 1 and again (from L2) for pass 2, each segment encoded as a held row is.
    bool plainHeld = false, segmented = false;
    if constexpr (kCanHold) {
      plainHeld = held && !mayRotate && !smoothed;           // uniform
      segmented = kLong && !held && !mayRotate && !smoothed;  // uniform
    }
    // Segments of the held (or segmented) row's passes: 1 unless segmented.
    const uint32_t segments = kLong && segmented ? (n + kHeldElems - 1) / kHeldElems : 1;

    // Pass 1: finiteness, the row's largest |value|, and, where the row may be rotated, the
    // adaptive statistic and the largest |value| after rotation.
    bool finite = true;
    float rowMax = 0.0f, rotatedMax = 0.0f;
    uint32_t statistic = 0;
    if constexpr (kCanHold) {
      if (plainHeld || segmented) {
        // NOTE: 6 instructions per lane-tile (4 doublings on the FMA pipe, 2 three-way 16x2
        // maxima) instead of ~80 (unpack, finiteness test and max per value), and one REDUX for
        // the warp's maximum.
        uint32_t laneMax = 0;
        for (uint32_t i = 0; i < segments; ++i) {
          if (segmented) loadSegment(i * kHeldElems);
          uint32_t m = 0;
#pragma unroll
          for (uint32_t t = 0; t < kHeldTiles; ++t)  // missing values were loaded as 0
            m = __vimax3_u16x2(__vimax3_u16x2(m, doubledMagnitudes(raw[t].x),
                                              doubledMagnitudes(raw[t].y)),
                               doubledMagnitudes(raw[t].z), doubledMagnitudes(raw[t].w));
          uint32_t segmentMax = max(halvedLow(m), halvedHigh(m));
          if (segmentMax >= kFirstNonFinite<Dtype>) {  // rare: NaN or Inf in the lane
            finite = false;
            segmentMax = largestFiniteBits<Dtype>(raw);
          }
          laneMax = max(laneMax, segmentMax);
        }
        finite = __all_sync(kFullMask, finite);
        rowMax = halfWordAsFloat<Dtype>(__reduce_max_sync(kFullMask, laneMax));
      }
    }
    for (uint32_t t0 = 0; !plainHeld && !segmented && t0 < n; t0 += kTileElems) {
      const uint32_t first = t0 + lane * kLaneElems;
      float v[kLaneElems];
      tileValues(t0, first, validIn(first, n), v);
      if constexpr (Chosen)
        if (smoothed) smooth8(v, dst + l.smooth + first, validIn(first, n));
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j) {
        if (isFiniteBits(floatToBits(v[j])))
          rowMax = maxf(rowMax, absf(v[j]));
        else
          finite = false;
      }
      if (mayRotate) {  // uniform across the warp
        const bool whole = t0 + (lane / groupLanes + 1) * h <= n;
        if (p.policy == kRotateAdaptive)
          statistic += groupStatistic(v, lane, groupLanes, p.log2Hadamard, whole);
        float y[kLaneElems];
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j) y[j] = v[j];
        hadamardWarp(y, lane, groupLanes);
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j)
          rotatedMax = maxf(rotatedMax, absf(whole ? y[j] : v[j]));
      }
    }
    if (!plainHeld && !segmented) {
      finite = __all_sync(kFullMask, finite);
      rowMax = warpMax(rowMax);
    }
    bool rotate = false;
    if (mayRotate && finite && rowMax < kMaxRotatedInput) {
      rotate = p.policy == kRotateAlways ||
               warpSum(statistic) >= p.threshold * (n / h);  // uniform: no divergent shuffle
    }
    if (rotate) rowMax = warpMax(rotatedMax);
    const float c = coarseScale(p.grid, rowMax);
    const bool fast = finite && p.grid != kInt8;  // uniform: hardware conversions, no specials

    // The block's top-3 magnitudes in every lane of its 8 (v: the lane's values).
    // NOTE: branch-free top-3 (format.h: top3of8, mergeTop3): 27 min/max per lane and 9 per merge
    // step, where offerTop3's branches cost about 4 times as many instructions.
    auto blockTop3 = [&](const float* v, float* t) {
      float a[kLaneElems];
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j)  // a non-finite value is offered as 0: no change
        a[j] = finite || isFiniteBits(floatToBits(v[j])) ? fabsf(v[j]) : 0.0f;
      top3of8(a, t);
#pragma unroll
      for (int d = 1; d < 8; d <<= 1) {
        const float o[3] = {__shfl_xor_sync(kFullMask, t[0], d),
                            __shfl_xor_sync(kFullMask, t[1], d),
                            __shfl_xor_sync(kFullMask, t[2], d)};
        mergeTop3(t, o);
      }
    };
    // The smallest key over lane groups of `lanes` (aligned, a power of two up to 8).
    auto smallestKey = [&](uint32_t key, int lanes) {
#pragma unroll
      for (int d = 1; d < 8; d <<= 1) {
        if (d >= lanes) break;
        key = min(key, __shfl_xor_sync(kFullMask, key, d));
      }
      return key;
    };
    // Codes of the lane's 8 values at element `first` of the row, scaled by their block's inverse
    // scale (blockScale(c, k).inv of the block's code k).
    uint8_t* const rowCodes = dst + l.codes + begin;
    auto storeCodes = [&](uint32_t grid, uint32_t first, uint32_t valid, const float* v,
                          float inv, bool fastCodes) {
      uint32_t packed[2] = {0, 0};
      if (fastCodes) {
        float scaled[kLaneElems];
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j) scaled[j] = mulRn(v[j], inv);
        quantize8Fast(grid, scaled, packed);
      } else {
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j) {
          const uint32_t u = floatToBits(v[j]);
          const uint32_t code =
              isFiniteBits(u) ? quantize(grid, mulRn(v[j], inv)) : specialCode(u);
          packed[j / 4] |= code << (8 * (j % 4));
        }
      }
      uint8_t* codes = rowCodes + first;
      if (valid == kLaneElems) {
        *reinterpret_cast<uint2*>(codes) = make_uint2(packed[0], packed[1]);
      } else {
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j)  // unrolled: the arrays stay in registers
          if (j < valid) codes[j] = static_cast<uint8_t>(packed[j / 4] >> (8 * (j % 4)));
      }
    };
    // The fine-scale code k of the block whose first element is `first` of the row.
    auto storeFine = [&](uint32_t first, uint32_t k) {
      dst[l.fine + (begin + first) / kBlockElems] = static_cast<uint8_t>(k);
    };
    __syncwarp();  // the previous row's last reads of the table are done

    // Pass 2 of a held row or of one segment (elements s0 .. s0 + sn - 1) of a segmented row,
    // from raw. `kind` is a SegmentKind: the common case, a whole segment of kHeldElems finite
    // values of a plain row on an E4M3 or E5M2 grid (every block exists, every lane holds 8
    // values), is compiled apart for each grid.
    // NOTE: without the tests that hold for it, the full segment's code is straight: each of them
    // would be a divergence region (BSSY, branch, BSYNC); together ~14% of the encode's
    // instructions and most of its instruction-fetch stalls under ncu (docs/kernels/fp8.md,
    // "Encoder").
    auto encodeSegment = [&](auto kind, uint32_t s0, uint32_t sn) {
      constexpr bool kFull = decltype(kind)::kFull;
      const uint32_t grid = kFull ? decltype(kind)::kGrid : p.grid;
      // NOTE: in three phases, so that each block's scale is searched by 2 lanes (4 E4M3
      // candidates each) rather than 8 (1 each): the start code once per segment and lane
      // instead of once per tile, one merge step instead of three, and (on E5M2 and INT8) the
      // scale table only over the codes the segment's blocks can use.
      // Phase 1: the top-3 of every block (block 4t + lane / 8 of the segment, in tile t).
      // Phase 2: lanes 8g + 2t and 8g + 2t + 1 search block 4t + g (its top-3 is in their
      // top[t]), k0 by startCodeNear (scales computed by the lane on E4M3, else from the table).
      const uint32_t mine = (lane & 7) >> 1;
      float t3[3];
      if (kFull || ((plainHeld || segmented) && finite)) {  // uniform
        // NOTE: on doubled magnitudes, tiles 2p and 2p + 1 in the halves of one triple: each
        // merge step's 3 shuffles and 7 min/max serve two tiles. The 8-lane butterfly takes its
        // step across half groups (lane ^ 4) first, where each lane keeps the pair of tiles its
        // block's searchers need (mine < 2: tiles 0-1) and sends the other, so that the two later
        // steps merge one triple instead of two (~27 ALU instructions per lane instead of ~45).
        // Tiles past the row's end were loaded as 0, as load8 reads.
        uint32_t pairTop[kHeldTiles / 2][3];
#pragma unroll
        for (uint32_t q = 0; q < kHeldTiles / 2; ++q) {
          const uint4 ra = raw[2 * q], rb = raw[2 * q + 1];
          const uint32_t a[4] = {doubledMagnitudes(ra.x), doubledMagnitudes(ra.y),
                                 doubledMagnitudes(ra.z), doubledMagnitudes(ra.w)};
          const uint32_t b[4] = {doubledMagnitudes(rb.x), doubledMagnitudes(rb.y),
                                 doubledMagnitudes(rb.z), doubledMagnitudes(rb.w)};
          top3of8Pair(a, b, pairTop[q]);
        }
        static_assert(kHeldTiles == 4, "two pairs of tiles, split across the half groups");
        const bool firstPair = mine < 2;  // == (lane & 4) == 0
        uint32_t top[3], send[3];
#pragma unroll
        for (int j = 0; j < 3; ++j) {
          top[j] = firstPair ? pairTop[0][j] : pairTop[1][j];
          send[j] = firstPair ? pairTop[1][j] : pairTop[0][j];
        }
#pragma unroll
        for (int d = 4; d >= 1; d >>= 1) {
          const uint32_t o[3] = {__shfl_xor_sync(kFullMask, d == 4 ? send[0] : top[0], d),
                                 __shfl_xor_sync(kFullMask, d == 4 ? send[1] : top[1], d),
                                 __shfl_xor_sync(kFullMask, d == 4 ? send[2] : top[2], d)};
          mergeTop3x2(top, o);
        }
        // NOTE: the lane's half brought down by a shift of 16 * (mine & 1): one shift and one mask
        // per magnitude where the two halvings and a select take three.
        const uint32_t halfShift = (mine & 1) << 4;
#pragma unroll
        for (int j = 0; j < 3; ++j)
          t3[j] = halfWordAsFloat<Dtype>(halvedLow(top[j] >> halfShift));
      } else {
        float top[kHeldTiles][3];
#pragma unroll
        for (uint32_t t = 0; t < kHeldTiles; ++t) {
          top[t][0] = top[t][1] = top[t][2] = 0.0f;
          if (t * kTileElems < sn) {  // uniform
            float v[kLaneElems];
            unpackRaw8<Dtype>(raw[t], v);
            if constexpr (Chosen) {
              const uint32_t first = s0 + t * kTileElems + lane * kLaneElems;
              if (smoothed) smooth8(v, dst + l.smooth + first, validIn(first, n));
            }
            blockTop3(v, top[t]);
          }
        }
#pragma unroll
        for (int j = 0; j < 3; ++j)
          t3[j] =
              mine == 0 ? top[0][j] : mine == 1 ? top[1][j] : mine == 2 ? top[2][j] : top[3][j];
      }
      const uint32_t blockFirst = s0 + mine * kTileElems + (lane >> 3) * kBlockElems;
      const bool exists = kFull || blockFirst < s0 + sn;
      const bool nonzero = exists && c != 0.0f && t3[0] != 0.0f;
      const float need = nonzero ? fineScaleNeeded(grid, c, t3[0]) : 0.0f;
      const uint32_t f = floorFineCode(need);
      const bool search = nonzero && p.candidates > 1;
      // The block's code: its start code k0 (startCodeNear: the fit of its guess f and the codes
      // beside it), then the search over the window after k0. scales(k): code k's (s, inv);
      // afterStart(k0, last) runs once k0 and the window's last code are known.
      // NOTE: the start code by two or three lookups instead of startCodeFrom's 1-3 IEEE
      // reciprocals (~110 instructions per lane and segment under ncu; docs/kernels/fp8.md,
      // "Encoder").
      auto blockCode = [&](auto scales, auto afterStart) {
        uint32_t k0 = 0;
        if (nonzero) {
          k0 = startCodeNear(grid, t3[0], f, [&](uint32_t k) { return scales(k).y; });
          if (k0 == kNoStartCode) k0 = startCodeFrom(grid, c, t3[0], need);  // rare
        }
        const uint32_t last = search ? lastCandidate(k0, p.candidates) : k0;
        afterStart(k0, last);
        uint32_t key = kNoCandidateKey;
        if (search) key = searchCandidates<2>(grid, scales, t3, need, k0, last, lane & 1);
        key = smallestKey(key, 2);
        return search ? key & 0xFFu : k0;
      };
      // A block of zeros needs no scale: its codes are 0 with any (it takes inv = 0).
      // NOTE: only a nonzero block reads scales, so c >= kMinCoarse and they are blockScaleOfRow's
      // (blockScale's bits, without its test s > 0).
      uint32_t kBlock = 0;
      float invBlock = 0.0f;
      if (numScaleRatios(grid) > 0) {  // uniform (E4M3; a constant in a whole segment's copy)
        // NOTE: each lane computes the scales it reads: 3 for the start code, its 4 candidates
        // and its block's code. A table shared by the warp would take two warp reductions for its
        // range, a fill of ~2 entries per lane and a __syncwarp before its first read, all on the
        // row's serial chain, for about as many reciprocals.
        auto scales = [&](uint32_t k) { return blockScaleOfRow(c, k); };
        kBlock = blockCode(scales, [](uint32_t, uint32_t) {});
        if (nonzero) invBlock = scales(kBlock).y;
      } else {
        // The other grids search every code of the window (up to p.candidates per block): the
        // warp fills a table over [lo, hi], the codes around each nonzero block's guess f (its
        // start code nearly always is f or f + 1) and the window after them.
        uint32_t lo = __reduce_min_sync(
            kFullMask, nonzero ? static_cast<uint32_t>(max(static_cast<int>(f) - 1, 0)) : 255u);
        uint32_t hi = __reduce_max_sync(
            kFullMask, nonzero ? lastCandidate(f + 1, search ? p.candidates : 1u) : 0u);
        auto fillTable = [&] {
          // NOTE: every lane stores, those past hi the entries after it (up to 255; the last
          // code stored by several lanes): they are this row's entries too, so no store is
          // predicated and the loop is the same for every lane.
#pragma unroll 1
          for (uint32_t base = lo; base <= hi; base += 32) {
            const uint32_t k = min(base + lane, 255u);
            table.sInv[k] = blockScaleOfRow(c, k);
          }
          __syncwarp();
        };
        fillTable();
        auto scales = [&](uint32_t k) { return table.sInv[k]; };
        kBlock = blockCode(scales, [&](uint32_t k0, uint32_t last) {
          // Where rounding put a start code outside the guesses, the table grows to its window.
          if (__any_sync(kFullMask, nonzero && (k0 < lo || last > hi))) {
            lo = __reduce_min_sync(kFullMask, nonzero ? k0 : 255u);
            hi = __reduce_max_sync(kFullMask, nonzero ? last : 0u);
            fillTable();
          }
        });
        if (nonzero) invBlock = scales(kBlock).y;
      }
      if ((lane & 1) == 0 && exists) storeFine(blockFirst, kBlock);
      // Phase 3: the codes, tile by tile; each lane fetches its block's inverse scale from the
      // searchers (one shuffle, where a code would cost a reciprocal or a table read too).
      // NOTE: the source lane 2t of the lane's group of 8 as the shuffle's width, so that the lane
      // index is an immediate: (lane & ~7) + 2t cost an integer-ALU instruction per tile.
#pragma unroll
      for (uint32_t t = 0; t < kHeldTiles; ++t) {
        if (kFull || t * kTileElems < sn) {  // uniform
          const float inv = __shfl_sync(kFullMask, invBlock, 2 * t, 8);
          const uint32_t first = s0 + t * kTileElems + lane * kLaneElems;
          const uint32_t valid = kFull ? kLaneElems : validIn(first, n);
          float v[kLaneElems];
          unpackRaw8<Dtype>(raw[t], v);
          if constexpr (Chosen && !kFull)
            if (smoothed) smooth8(v, dst + l.smooth + first, valid);
          storeCodes(grid, first, valid, v, inv, kFull || fast);
        }
      }
    };
    bool done = false;
    if constexpr (kCanHold) {
      if ((held && !rotate) || segmented) {  // uniform; a held row is one segment
        for (uint32_t i = 0; i < segments; ++i) {
          const uint32_t s0 = i * kHeldElems;
          if (segmented) {
            loadSegment(s0);
            __syncwarp();  // the previous segment's last reads of the table are done
          }
          const uint32_t sn = n - s0 < kHeldElems ? n - s0 : kHeldElems;
          const bool plainWhole = sn == kHeldElems && finite && (plainHeld || segmented);
          if (plainWhole && p.grid == kE4M3)  // uniform
            encodeSegment(SegmentKind<true, kE4M3>{}, s0, sn);
          else if (plainWhole && p.grid == kE5M2)
            encodeSegment(SegmentKind<true, kE5M2>{}, s0, sn);
          else
            encodeSegment(SegmentKind<false, 0>{}, s0, sn);
        }
        done = true;
      }
    }

    // Pass 2 of the other rows (longer, fp32, rotated): per 64-value block (8 lanes), the top-3
    // magnitudes, the fine scale, the codes.
    if (!done) fillScaleTable(table, c, lane);
    for (uint32_t t0 = 0; !done && t0 < n; t0 += kTileElems) {
      const uint32_t first = t0 + lane * kLaneElems, valid = validIn(first, n);
      float v[kLaneElems];
      tileValues(t0, first, valid, v);
      if constexpr (Chosen)
        if (smoothed) smooth8(v, dst + l.smooth + first, valid);
      if (rotate) {
        const bool whole = t0 + (lane / groupLanes + 1) * h <= n;
        float y[kLaneElems];
#pragma unroll
        for (uint32_t j = 0; j < kLaneElems; ++j) y[j] = v[j];
        hadamardWarp(y, lane, groupLanes);
        if (whole)
#pragma unroll
          for (uint32_t j = 0; j < kLaneElems; ++j) v[j] = y[j];
      }
      float t[3];
      blockTop3(v, t);
      const bool nonzero = c != 0.0f && t[0] != 0.0f;
      const float need = nonzero ? fineScaleNeeded(p.grid, c, t[0]) : 0.0f;
      const uint32_t k0 = nonzero ? startCodeFast(p.grid, t[0], need, table) : 0u;
      // NOTE: the candidates are spread over the block's 8 lanes (1 each for E4M3, at most 4
      // each otherwise), then the smallest key wins, as in the reference.
      const bool search = p.candidates > 1 && nonzero;
      uint32_t key = kNoCandidateKey;
      if (search)
        key = searchCandidates<8>(p.grid, [&](uint32_t k) { return table.sInv[k]; }, t, need, k0,
                                  lastCandidate(k0, p.candidates), lane & 7);
      key = smallestKey(key, 8);
      const uint32_t k = search ? key & 0xFFu : k0;
      storeCodes(p.grid, first, valid, v, table.sInv[k].y, fast);
      if ((lane & 7) == 0 && valid > 0) storeFine(first, k);
    }
    if (lane == 0) {
      *reinterpret_cast<float*>(dst + l.coarse + 4 * r) = c;
      dst[l.flags + r] = rotate ? 1 : 0;
    }
  }
}

// The parameters of the frame as far as the host knows them: the smoothing area where the frame
// has one; the row length (auto) and the smoothing decision come from the device, except where no
// candidate has enough rows to measure: then the row length is the fallback, known here (and
// such a frame, below 16 * 8 * 512 values, is too small for a smoothing area).
static_assert(kShapeMinRows * kShapeSampleDivisor <= kSmoothMinRows,
              "a frame too small to measure a row length has no smoothing area");
Params hostFrameParams(const Params& req, uint64_t count) {
  Params p = req;
  p.smoothing = req.smoothing && smoothCapacity(count, p.shape, p.rowElems, p.log2Hadamard) != 0;
  p.smoothApplied = 0;
  if (p.shape == kShapeAuto && numMeasuredCandidates(count, p.log2Hadamard) == 0)
    p.rowElems = kAutoFallbackRowElems;
  return p;
}

// Where the parts of an encode's scratch lie (byte offsets; bytes 0: no scratch): the choice, the
// row-length sample where one is measured, the smoothing sample's column sums.
struct ScratchParts {
  uint64_t sample, levels, levelWords, bytes;
};
ScratchParts scratchParts(const Params& p, uint64_t count) {
  ScratchParts s{};
  const bool measure = p.shape == kShapeAuto && numMeasuredCandidates(count, p.log2Hadamard) > 0;
  if (!measure && !p.smoothing) return s;
  uint64_t at = sizeof(EncodeChoice);
  if (measure) s.sample = at, at += sizeof(ShapeSample);
  s.levels = at;
  s.levelWords = p.smoothing ? smoothCapacity(count, p.shape, p.rowElems, p.log2Hadamard) : 0;
  s.bytes = at + 4 * s.levelWords;
  return s;
}

template <int Dtype>
void launchEncode(const Params& req, const EncodeFrames& frames, int n, uint64_t count, bool vector,
                  DeviceStatus* status, cudaStream_t stream) {
  const Params p = hostFrameParams(req, count);
  const Layout l = frameLayout(count, p);
  const FrameHeader header = makeHeader(p, Dtype, count);
  const dim3 grid(gridFor(l.rowSlots), n);
  const ScratchParts parts = scratchParts(p, count);
  if (parts.bytes == 0) {  // nothing to decide on the device: the one-pass encode alone
    const bool programmatic = programmaticLaunchSupported();
    if (p.rowElems > kHeldElems)
      launchFp8Kernel(encodeKernel<Dtype, false, true>, grid, stream, programmatic, p, l, header,
                      frames, count, vector, status);
    else
      launchFp8Kernel(encodeKernel<Dtype, false, false>, grid, stream, programmatic, p, l, header,
                      frames, count, vector, status);
    return;
  }
  CCLZ_REQUIRE(reinterpret_cast<uintptr_t>(frames.scratch) % 16 == 0, cclzInvalidArgument,
               "the fp8 encode's scratch must be 16-byte aligned");
  const SampleParts sampled{parts.sample, parts.levels, l.coarse, l.frameBytes - l.coarse,
                            l.smooth};
  if (parts.sample) {
    // NOTE: the first sampling kernel zeroes the counters and the side data's unused slots (rows
    // the choice did not need, the smoothing area of a frame not smoothed) in place of two
    // memsets: two fewer launches on the chain.
    launchShapeKernels(Dtype, frames, n, count, vector, p.log2Hadamard, sampled, stream);
  } else {
    // NOTE: the side data's unused slots (the smoothing area of a frame not smoothed) are zero; a
    // memset of the side data is cheaper than finding them.
    for (int f = 0; f < n; ++f) {
      CCLZ_CUDA_CHECK(cudaMemsetAsync(frames.scratch + f * frames.scratchStride, 0,
                                      sizeof(EncodeChoice), stream));
      CCLZ_CUDA_CHECK(
          cudaMemsetAsync(frames.dst[f] + l.coarse, 0, l.frameBytes - l.coarse, stream));
    }
  }
  if (p.smoothing)
    launchSmoothKernel(Dtype, frames, n, count, vector, p.shape == kShapeCaller ? p.rowElems : 0u,
                       static_cast<uint32_t>(parts.levelWords), parts.sample != 0, sampled, stream);
  // The row length is the caller's, or chosen on the device (up to kAutoMaxRowElems).
  // NOTE: programmatic after the sampling kernels, as the one-pass encode is after whatever came
  // before it: the choice it reads is the last of them's, which its wait covers.
  const bool programmatic = programmaticLaunchSupported();
  if (p.shape == kShapeCaller && p.rowElems <= kHeldElems)
    launchFp8Kernel(encodeKernel<Dtype, true, false>, grid, stream, programmatic, p, l, header,
                    frames, count, vector, status);
  else
    launchFp8Kernel(encodeKernel<Dtype, true, true>, grid, stream, programmatic, p, l, header,
                    frames, count, vector, status);
}

void launchEncodeOfDtype(const Params& p, int dtype, const EncodeFrames& frames, int n,
                         uint64_t count, bool vector, DeviceStatus* status, cudaStream_t stream) {
  switch (dtype) {
    case cclzBfloat16:
      launchEncode<cclzBfloat16>(p, frames, n, count, vector, status, stream);
      break;
    case cclzFloat16:
      launchEncode<cclzFloat16>(p, frames, n, count, vector, status, stream);
      break;
    default:
      launchEncode<cclzFloat32>(p, frames, n, count, vector, status, stream);
  }
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

uint64_t encodeScratchBytes(const Params& req, uint64_t count) {
  return scratchParts(hostFrameParams(req, count), count).bytes;
}

uint64_t encodeBatchScratchBytes(const Params& p, uint64_t count, int n) {
  const uint64_t one = encodeScratchBytes(p, count);
  return (one + 15) / 16 * 16 * static_cast<uint64_t>(n);
}

void encodeDevice(const Params& p, int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, uint8_t* scratch,
                  cudaStream_t stream) {
  EncodeFrames frames{};
  frames.src[0] = src;
  frames.dst[0] = dst;
  frames.encodedBytesOut[0] = encodedBytesOut;
  frames.scratch = scratch;
  launchEncodeOfDtype(p, dtype, frames, 1, count, aligned16(src), status, stream);
}

// NOTE: the frames' sampling kernels are latency-bound (a few blocks each, ~13 us of chain at any
// size): as one launch for every frame they cost what one frame's do.
void encodeBatchDevice(const Params& p, int dtype, const FrameBatch& batch, uint64_t count,
                       DeviceStatus* status, uint8_t* scratch, cudaStream_t stream) {
  CCLZ_REQUIRE(batch.n >= 1 && batch.n <= kMaxBatchFrames, cclzInvalidArgument,
               "an fp8 encode batch holds 1 to " + std::to_string(kMaxBatchFrames) + " frames");
  EncodeFrames frames{};
  bool vector = true;
  for (int f = 0; f < batch.n; ++f) {
    frames.src[f] = batch.src[f];
    frames.dst[f] = batch.dst[f];
    frames.encodedBytesOut[f] = batch.encodedBytesOut[f];
    vector = vector && aligned16(batch.src[f]);
  }
  frames.scratch = scratch;
  frames.scratchStride = (encodeScratchBytes(p, count) + 15) / 16 * 16;
  launchEncodeOfDtype(p, dtype, frames, batch.n, count, vector, status, stream);
}

}  // namespace cclz::fp8
