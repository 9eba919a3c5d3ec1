// The fp8 encoder's decisions from the data (codec/fp8/shape.h): small kernels over a sample,
// run before the encode on its stream, whose integer statistics are exact in any order, so they
// decide as the CPU reference does. The row length: shapeSampleKernel (the sample's levels, once)
// then shapeStatsKernel (one block per candidate; the last one chooses). The smoothing:
// smoothKernel. docs/kernels/fp8.md ("Row length and smoothing") has the chain and its costs.
#include "codec/fp8/device.cuh"

namespace cclz::fp8 {
namespace {

// Reads a word another block of this grid wrote (before its __threadfence): from L2, not L1.
__device__ __forceinline__ uint64_t loadShared64(const uint64_t* p) {
  return __ldcg(reinterpret_cast<const unsigned long long*>(p));
}

constexpr int kShapeThreads = 1024;

__device__ __forceinline__ uint64_t warpSum64(uint64_t v) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += __shfl_xor_sync(kFullMask, v, d);
  return v;
}

// ---- shapeSampleKernel: the sample's levels, once -----------------------------------------

constexpr int kSampleThreads = 1024;
constexpr uint32_t kSampleBlockElems = kSampleThreads * kLaneElems;  // 8 consecutive per thread
constexpr uint32_t kCenterPerThread = kShapeCenterElems / kSampleThreads;
constexpr uint64_t kZeroBlockBytes = 4 * 16 * kSampleThreads;  // 4 16-byte stores per thread
constexpr uint64_t kMaxZeroBlocks = 132;
static_assert(kCenterPerThread * kSampleThreads == kShapeCenterElems &&
                  kCenterPerThread <= kLaneElems && kSampleThreads >= 256,
              "the center's values spread evenly; a thread per histogram bin");

// Adds the binades (fp32 exponent fields) of a lane's N values that have a magnitude to the
// block's histogram, and their number to `counted` (shapeCenter's inputs). Lanes of a warp with
// the same binade add once (__match_any_sync): typical data has a few binades, and threads adding
// one by one into the same shared words would serialize. Missing values were loaded as 0 (no
// magnitude).
template <uint32_t N>
__device__ __forceinline__ void addBinades(const float* v, uint32_t lane, uint32_t* histogram,
                                           uint32_t* counted) {
  uint32_t withMagnitude = 0;
#pragma unroll
  for (uint32_t j = 0; j < N; ++j) {
    const bool has = hasMagnitude(v[j]);
    const uint32_t binade = has ? floatToBits(v[j]) << 1 >> 24 : 256u;
    const uint32_t same = __match_any_sync(kFullMask, binade);
    if (has && lane == __ffs(same) - 1) atomicAdd(&histogram[binade], __popc(same));
    withMagnitude += has ? 1u : 0u;
  }
  withMagnitude = __reduce_add_sync(kFullMask, withMagnitude);
  if (lane == 0 && withMagnitude) atomicAdd(counted, withMagnitude);
}

// The smallest bin b of a 256-bin histogram whose running count (bins 0..b) reaches `need`, by
// one warp: lane l sums bins 8l..8l+7, an inclusive scan over the lanes finds the lane holding b,
// which walks its 8 bins. 256 if all the bins together hold fewer than need. Every lane returns it.
__device__ uint32_t warpFirstBinReaching(const uint32_t* histogram, uint32_t need, uint32_t lane) {
  uint32_t mine = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) mine += histogram[8 * lane + k];
  uint32_t seen = mine;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const uint32_t other = __shfl_up_sync(kFullMask, seen, d);
    if (lane >= static_cast<uint32_t>(d)) seen += other;
  }
  const uint32_t reached = __ballot_sync(kFullMask, seen >= need);
  if (reached == 0) return 256;
  const uint32_t at = __ffs(reached) - 1;
  uint32_t bin = 0;
  if (lane == at) {
    uint32_t before = seen - mine, b = 8 * lane;
    for (int k = 0; k < 8; ++k, ++b) {
      before += histogram[b];
      if (before >= need) break;
    }
    bin = b;
  }
  return __shfl_sync(kFullMask, bin, at);
}

// shapeCenter(histogram, counted) by one warp: the smallest binade b with 2 * seen >= counted,
// i.e. seen >= ceil(counted / 2) (always reached: the bins hold counted values).
__device__ uint32_t warpShapeCenter(const uint32_t* histogram, uint32_t counted, uint32_t lane) {
  return warpFirstBinReaching(histogram, (counted + 1) / 2, lane) * 8 + 4;
}

// Zeroes, over the frame's blocks, what the later kernels of the encode need zero (the frame's
// side data, sideBytes from `side`) and the choice's counters, in place of two memsets. The side
// data with 16-byte stores between byte-wise ends (the frame may start anywhere).
__device__ void zeroForLaterKernels(EncodeChoice* choice, uint8_t* side, uint64_t sideBytes) {
  const uint64_t thread = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const uint64_t threads = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  if (thread == 0) choice->smoothApplied = choice->shapeBlocksDone = choice->smoothBlocksDone = 0;
  const uint64_t misaligned = reinterpret_cast<uintptr_t>(side) % 16;
  const uint64_t head = std::min<uint64_t>(sideBytes, misaligned ? 16 - misaligned : 0);
  const uint64_t words = (sideBytes - head) / 16;
  uint4* aligned = reinterpret_cast<uint4*>(side + head);
  for (uint64_t i = thread; i < words; i += threads) aligned[i] = make_uint4(0, 0, 0, 0);
  for (uint64_t i = thread; i < head; i += threads) side[i] = 0;
  for (uint64_t i = head + 16 * words + thread; i < sideBytes; i += threads) side[i] = 0;
}

// Block b turns sample values [8192 b, 8192 b + 8192) into their levels (shapeLevel, one byte
// each) and the sums of their squares per 64 values; every block finds the center itself from
// the first kShapeCenterElems values (a few KB from L2, not worth a kernel of its own).
// NOTE: all of a thread's loads are issued before the histogram's shared atomics (which the
// compiler does not move loads past): the block waits for memory once, not once per round. 1024
// threads, so that each adds only 4 of the center's values (4 __match_any_sync in a row, the
// block's 32 warps overlapping them, where 256 threads would have 16 in a row each).
template <int Dtype>
__global__ void __launch_bounds__(kSampleThreads)
    shapeSampleKernel(EncodeFrames frames, uint64_t count, bool vector, SampleParts parts) {
  __shared__ uint32_t histogram[256], counted, center;
  letNextKernelStart();  // shapeStatsKernel's blocks may wait on the SMs meanwhile
  const void* src = frames.source();
  EncodeChoice* choice = frames.choice();
  auto* sample = reinterpret_cast<ShapeSample*>(frames.scratchPart(parts.sample));
  uint8_t* side = frames.frame() + parts.side;
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t sampleElems = static_cast<uint32_t>(shapeSampleElems(count));
  if (blockIdx.x * kSampleBlockElems >= sampleElems) {  // a block that only zeroes
    zeroForLaterKernels(choice, side, parts.sideBytes);
    return;
  }
  const uint32_t centerElems =
      static_cast<uint32_t>(count < kShapeCenterElems ? count : kShapeCenterElems);
  const uint32_t first = blockIdx.x * kSampleBlockElems + threadIdx.x * kLaneElems;
  const uint32_t valid = validIn(first, sampleElems);
  float v[kLaneElems], head[kLaneElems];
  load8<Dtype>(src, first, valid, vector, v);
  const uint32_t h = threadIdx.x * kCenterPerThread;
  load8<Dtype>(src, h, min(kCenterPerThread, validIn(h, centerElems)), false, head);
  if (threadIdx.x < 256) histogram[threadIdx.x] = 0;
  if (threadIdx.x == 0) counted = 0;
  zeroForLaterKernels(choice, side, parts.sideBytes);
  __syncthreads();
  addBinades<kCenterPerThread>(head, lane, histogram, &counted);
  __syncthreads();
  if (threadIdx.x < 32) {
    const uint32_t c = warpShapeCenter(histogram, counted, lane);
    if (lane == 0) center = c;
  }
  __syncthreads();
  const uint32_t c = center;
  uint32_t packed[2] = {0, 0}, squares = 0;
#pragma unroll
  for (uint32_t j = 0; j < kLaneElems; ++j) {
    const uint32_t z = j < valid ? shapeLevel(v[j], c) : 0u;
    packed[j / 4] |= z << (8 * (j % 4));
    squares += z * z;
  }
  uint8_t* out = sample->z + first;
  if (valid == kLaneElems) {
    *reinterpret_cast<uint2*>(out) = make_uint2(packed[0], packed[1]);
  } else {
    for (uint32_t j = 0; j < valid; ++j)
      out[j] = static_cast<uint8_t>(packed[j / 4] >> (8 * (j % 4)));
  }
  // Lanes 8q..8q+7 hold 64 consecutive values (one chunk; a partial last chunk is never read).
#pragma unroll
  for (int d = 1; d < 8; d <<= 1) squares += __shfl_xor_sync(kFullMask, squares, d);
  if (lane % 8 == 0 && valid != 0) sample->chunkSq[first / kBlockElems] = squares;
}

// chooseRowElems (shape.h) by one warp: each lane scores candidates lane, lane + 32, ... once
// (a score costs a few fp64 divisions: on one thread the 2 x 57 of them would be a long serial
// chain), then the best score, its bar and the first candidate at the bar, as chooseRowElems.
// `stats` were written by other blocks of this grid (read from L2).
__device__ uint32_t warpChooseRowElems(const ShapeStats* stats, uint32_t n, uint32_t log2H) {
  constexpr uint32_t kPerLane = (kMaxShapeCandidates + 31) / 32;
  const uint32_t lane = threadIdx.x % 32;
  double score[kPerLane];
  double best = -1.0;
#pragma unroll
  for (uint32_t k = 0; k < kPerLane; ++k) {
    const uint32_t i = lane + 32 * k;
    score[k] = -1.0;
    if (i < n) {
      ShapeStats s{};
      s.total = loadShared64(&stats[i].total);
      s.sumSq = loadShared64(&stats[i].sumSq);
      s.sumColSq = loadShared64(&stats[i].sumColSq);
      s.rows = __ldcg(&stats[i].rows);
      score[k] = channelStructure(s, shapeCandidate(i, log2H));
    }
    best = score[k] > best ? score[k] : best;
  }
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const double other = __shfl_xor_sync(kFullMask, best, d);
    best = other > best ? other : best;
  }
  if (!(best >= kShapeMinStructure)) return kAutoFallbackRowElems;
  const double bar = mulRnD(kShapeNearBest, best);
#pragma unroll
  for (uint32_t k = 0; k < kPerLane; ++k) {
    const uint32_t atBar = __ballot_sync(kFullMask, lane + 32 * k < n && score[k] >= bar);
    if (atBar) return shapeCandidate(__ffs(atBar) - 1 + 32 * k, log2H);
  }
  return kAutoFallbackRowElems;  // not reached: the best passes its own bar
}

// ---- shapeStatsKernel: one block per candidate --------------------------------------------

// The most sample rows a thread of shapeStatsKernel takes, over every candidate (multiples of 64
// cover every Hadamard size's candidates): its loads are all issued at once.
constexpr uint32_t mostRowsPerLane() {
  uint32_t most = 0;
  for (uint32_t r = kAutoMinRowElems; r <= kAutoMaxRowElems; r += kBlockElems) {
    const uint32_t rows = kShapeSampleElems / r, lanes = kShapeThreads / (r / kColumnGroupElems);
    most = std::max(most, (rows + lanes - 1) / lanes);
  }
  return most;
}
static_assert(mostRowsPerLane() <= kMaxRowsPerLane, "a thread's rows fit its loads");

// Block c measures candidate row length c (ShapeStats) from the levels shapeSampleKernel left:
// each thread adds 16 columns of every split.lanes-th row in 16-bit halves (columnSplit,
// evenLevels), the column sums meet in shared memory (integer atomics, exact in any order), and
// the sum of squares comes from the per-64 sums. The last block to finish chooses the row
// length, as chooseRowElemsRef does from the same integers. The grid is the measured candidates.
// NOTE: 64 KB of levels per block instead of 128-256 KB of values, 4-5 16-byte loads per thread in
// flight together, 8 shared atomics per thread instead of one per value.
__global__ void __launch_bounds__(kShapeThreads)
    shapeStatsKernel(uint64_t count, uint32_t log2H, EncodeFrames frames, uint64_t sampleAt) {
  __shared__ uint32_t columns[kAutoMaxRowElems / 2];  // two columns' sums per word, 16 bits each
  // Per-warp partial sums, added by warp 0 at the end. NOTE: not 64-bit shared atomics: sm_90
  // has none (a CAS loop, ATOMS.CAST.SPIN.64), and 32 warps spinning on one word make a quarter
  // of the kernel's stall samples under ncu (docs/kernels/fp8.md, "Row length and smoothing").
  constexpr uint32_t kWarps = kShapeThreads / 32;
  __shared__ uint64_t warpSq[kWarps], warpTotal[kWarps], warpColSq[kWarps];
  __shared__ bool last;
  EncodeChoice* choice = frames.choice();
  const auto* sample = reinterpret_cast<const ShapeSample*>(frames.scratchPart(sampleAt));
  const uint32_t c = blockIdx.x, rowElems = shapeCandidate(c, log2H), lane = threadIdx.x % 32;
  const uint32_t rows = static_cast<uint32_t>(shapeSampleElems(count) / rowElems);
  const ColumnSplit split = columnSplit(rowElems, kShapeThreads);
  for (uint32_t j = threadIdx.x; j < rowElems / 2; j += blockDim.x) columns[j] = 0;
  const uint32_t warp = threadIdx.x / 32;
  letNextKernelStart();  // smoothKernel's blocks may wait on the SMs meanwhile
  __syncthreads();
  waitForPreviousKernel();      // shapeSampleKernel's levels and zeroed counters
  if (rows >= kShapeMinRows) {  // uniform (the host launches measured candidates only)
    const uint32_t g = threadIdx.x % split.groups, f = threadIdx.x / split.groups;
    if (f < split.lanes) {
      const uint4* z = reinterpret_cast<const uint4*>(sample->z) + g;
      const uint32_t rowWords = rowElems / kColumnGroupElems;
      // NOTE: every load first (rows past the last read row f again, and count as 0), then the
      // sums: one wait for L2, not one per row.
      uint4 q[kMaxRowsPerLane];
#pragma unroll
      for (uint32_t i = 0; i < kMaxRowsPerLane; ++i) {
        const uint32_t r = f + i * split.lanes;
        q[i] = __ldcg(z + (r < rows ? r : f) * rowWords);
      }
      uint32_t even[4] = {0, 0, 0, 0}, odd[4] = {0, 0, 0, 0};
#pragma unroll
      for (uint32_t i = 0; i < kMaxRowsPerLane; ++i) {
        const uint32_t keep = f + i * split.lanes < rows ? 0xFFFFFFFFu : 0u;
        const uint32_t w[4] = {q[i].x & keep, q[i].y & keep, q[i].z & keep, q[i].w & keep};
#pragma unroll
        for (int k = 0; k < 4; ++k) even[k] += evenLevels(w[k]), odd[k] += oddLevels(w[k]);
      }
      // Consecutive threads hold consecutive groups: a warp's atomics hit consecutive words.
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        atomicAdd(&columns[(2 * k) * split.groups + g], even[k]);
        atomicAdd(&columns[(2 * k + 1) * split.groups + g], odd[k]);
      }
    }
    uint64_t mySq = 0;
    const uint32_t chunks = rows * rowElems / kBlockElems;
    for (uint32_t q = threadIdx.x; q < chunks; q += blockDim.x) mySq += __ldcg(&sample->chunkSq[q]);
    mySq = warpSum64(mySq);
    if (lane == 0) warpSq[warp] = mySq;
    __syncthreads();
    uint64_t myTotal = 0, myColSq = 0;
    for (uint32_t j = threadIdx.x; j < rowElems / 2; j += blockDim.x) {
      myTotal += halvesSum(columns[j]);
      myColSq += halvesSquared(columns[j]);
    }
    myTotal = warpSum64(myTotal);
    myColSq = warpSum64(myColSq);
    if (lane == 0) warpTotal[warp] = myTotal, warpColSq[warp] = myColSq;
  }
  __syncthreads();
  if (warp == 0) {
    static_assert(kWarps == 32, "a lane per warp's partial");
    ShapeStats st{};
    st.rows = rows;
    if (rows >= kShapeMinRows) {  // uniform
      st.total = warpSum64(warpTotal[lane]);
      st.sumSq = warpSum64(warpSq[lane]);
      st.sumColSq = warpSum64(warpColSq[lane]);
    }
    if (lane == 0) {
      choice->stats[c] = st;
      __threadfence();
      last = atomicAdd(&choice->shapeBlocksDone, 1u) == gridDim.x - 1;
    }
  }
  __syncthreads();
  if (last && threadIdx.x < 32) {
    __threadfence();
    const uint32_t chosen = warpChooseRowElems(choice->stats, gridDim.x, log2H);
    if (threadIdx.x == 0) choice->rowElems = chosen;
  }
}

// ---- smoothKernel: the smoothing shifts ---------------------------------------------------

// The sample's columns in segments of 64: 8 threads read a segment of a row (8 values each), the
// block's 32 such groups take 4 of the kSmoothMinRows rows each.
constexpr uint32_t kSmoothSegment = 8 * kLaneElems;
constexpr uint32_t kSmoothGroups = kThreads / 8;
constexpr uint32_t kSmoothRowsPerGroup = kSmoothMinRows / kSmoothGroups;
// A block per segment, at most kSmoothMinRows (128): a row of more segments goes grid-stride.
constexpr uint32_t kMaxSmoothBlocks = kSmoothMinRows;
static_assert(kSmoothRowsPerGroup * kSmoothGroups == kSmoothMinRows && kThreads == 256,
              "whole rows per group; one histogram bin per thread");

// medianBinade(histogram, rowElems) by one warp: the smallest b with at least (rowElems + 1) / 2
// of the columns at or below it (255 if the bins hold fewer).
__device__ uint32_t warpMedianBinade(const uint32_t* histogram, uint32_t rowElems, uint32_t lane) {
  const uint32_t b = warpFirstBinReaching(histogram, (rowElems + 1) / 2, lane);
  return b == 256 ? 255 : b;
}

// The column sums of the smoothing sample (magnitudeLevel of kSmoothMinRows rows, smoothSampleRow)
// for segments blockIdx.x, blockIdx.x + gridDim.x, ... of the row, written whole into `levels`
// (exact integers: no atomics, no zeroing); the last block to finish writes the shifts into the
// frame's smoothing area and the decision into `choice`, as chooseSmoothingRef does. rowElems is
// the caller's, or (0) the shape kernels' choice.
// NOTE: a block's loads of a segment (4 rows x 16 bytes per thread) are in flight together, and
// the sums meet by shuffles and one shared array, rather than one block per row adding every
// value into global memory (kSmoothMinRows atomics on each column's word).
template <int Dtype>
__global__ void __launch_bounds__(kThreads)
    smoothKernel(EncodeFrames frames, uint64_t count, bool vector, uint32_t fixedRowElems,
                 SampleParts parts) {
  __shared__ uint32_t partial[kThreads / 32][kSmoothSegment];
  __shared__ uint32_t histogram[256];
  __shared__ bool last;
  const uint32_t lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const uint32_t group = threadIdx.x / 8, part = threadIdx.x % 8;
  const void* src = frames.source();
  EncodeChoice* choice = frames.choice();
  auto* levels = reinterpret_cast<uint32_t*>(frames.scratchPart(parts.levels));
  uint8_t* shiftsOut = frames.frame() + parts.smooth;
  waitForPreviousKernel();  // the shape kernels' choice (this kernel may start before they end)
  const uint32_t rowElems = fixedRowElems ? fixedRowElems : choice->rowElems;
  const bool eligible = smoothEligible(count, rowElems);
  const uint64_t wholeRows = count / rowElems;
  for (uint32_t seg = blockIdx.x; eligible && seg < rowElems / kSmoothSegment; seg += gridDim.x) {
    const uint32_t column = seg * kSmoothSegment + part * kLaneElems;
    float v[kSmoothRowsPerGroup][kLaneElems];
#pragma unroll
    for (uint32_t k = 0; k < kSmoothRowsPerGroup; ++k) {
      const uint64_t row = smoothSampleRow(group + k * kSmoothGroups, wholeRows);
      load8<Dtype>(src, row * rowElems + column, kLaneElems, vector, v[k]);
    }
    uint32_t sum[kLaneElems];
#pragma unroll
    for (uint32_t j = 0; j < kLaneElems; ++j) {
      sum[j] = 0;
#pragma unroll
      for (uint32_t k = 0; k < kSmoothRowsPerGroup; ++k) sum[j] += magnitudeLevel(v[k][j]);
      sum[j] += __shfl_xor_sync(kFullMask, sum[j], 8);  // the warp's 4 groups
      sum[j] += __shfl_xor_sync(kFullMask, sum[j], 16);
    }
    if (lane < 8) {
#pragma unroll
      for (uint32_t j = 0; j < kLaneElems; ++j) partial[warp][part * kLaneElems + j] = sum[j];
    }
    __syncthreads();
    if (threadIdx.x < kSmoothSegment) {
      uint32_t total = 0;
#pragma unroll
      for (uint32_t w = 0; w < kThreads / 32; ++w) total += partial[w][threadIdx.x];
      levels[seg * kSmoothSegment + threadIdx.x] = total;
      __threadfence();  // before the block counts itself done: the last block reads them
    }
    __syncthreads();  // partial is read before the next segment writes it
  }
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(&choice->smoothBlocksDone, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  if (!eligible) {
    if (threadIdx.x == 0) choice->smoothApplied = 0;
    return;
  }
  histogram[threadIdx.x] = 0;
  __syncthreads();
  for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x) {
    // Lanes with the same binade add once: most columns share a few binades. Whole warps take
    // part (rowElems is a multiple of 64).
    const uint32_t binade = columnBinade(__ldcg(&levels[j]));
    const uint32_t same = __match_any_sync(kFullMask, binade);
    if (lane == __ffs(same) - 1) atomicAdd(&histogram[binade], __popc(same));
  }
  __syncthreads();
  __shared__ uint32_t median;
  if (warp == 0) {
    const uint32_t m = warpMedianBinade(histogram, rowElems, lane);
    if (lane == 0) median = m;
  }
  __syncthreads();
  bool any = false;
  for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x) {
    const uint32_t shift = smoothShift(columnBinade(__ldcg(&levels[j])), median);
    shiftsOut[j] = static_cast<uint8_t>(shift);
    any = any || shift != 0;
  }
  any = __syncthreads_or(any);
  if (threadIdx.x == 0) choice->smoothApplied = any ? 1 : 0;
}

}  // namespace

void launchShapeKernels(int dtype, const EncodeFrames& frames, int n, uint64_t count, bool vector,
                        uint32_t log2H, const SampleParts& parts, cudaStream_t stream) {
  const bool overlap = programmaticLaunchSupported();  // before any launch: it may throw
  // The sample's blocks (8 at most), and more that only zero where the side data is large (256
  // MiB of bf16: 1.3 MB, 21 blocks of 64 KB), so that the zeroing keeps to the time of the sample.
  const uint64_t sampleBlocks =
      (shapeSampleElems(count) + kSampleBlockElems - 1) / kSampleBlockElems;
  const uint64_t zeroBlocks =
      std::min<uint64_t>((parts.sideBytes + kZeroBlockBytes - 1) / kZeroBlockBytes, kMaxZeroBlocks);
  const dim3 grid(static_cast<unsigned>(std::max(sampleBlocks, zeroBlocks)), n);
#define CCLZ_FP8_SAMPLE(DT) \
  shapeSampleKernel<DT><<<grid, kSampleThreads, 0, stream>>>(frames, count, vector, parts)
  if (dtype == cclzBfloat16)
    CCLZ_FP8_SAMPLE(cclzBfloat16);
  else if (dtype == cclzFloat16)
    CCLZ_FP8_SAMPLE(cclzFloat16);
  else
    CCLZ_FP8_SAMPLE(cclzFloat32);
#undef CCLZ_FP8_SAMPLE
  // NOTE: launched to start while shapeSampleKernel runs (programmatic dependent launch): the
  // launch latency between the two overlaps the first one's work.
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(numMeasuredCandidates(count, log2H), n);
  config.blockDim = dim3(kShapeThreads);
  config.stream = stream;
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  if (overlap) config.attrs = &early, config.numAttrs = 1;
  CCLZ_CUDA_CHECK(
      cudaLaunchKernelEx(&config, shapeStatsKernel, count, log2H, frames, parts.sample));
}

void launchSmoothKernel(int dtype, const EncodeFrames& frames, int n, uint64_t count, bool vector,
                        uint32_t fixedRowElems, uint32_t columns, bool afterShapeKernels,
                        const SampleParts& parts, cudaStream_t stream) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(std::clamp<uint32_t>(columns / kSmoothSegment, 1, kMaxSmoothBlocks), n);
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  cudaLaunchAttribute early{};
  early.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  early.val.programmaticStreamSerializationAllowed = 1;
  if (afterShapeKernels && programmaticLaunchSupported())
    config.attrs = &early, config.numAttrs = 1;
#define CCLZ_FP8_SMOOTH(DT) \
  CCLZ_CUDA_CHECK(          \
      cudaLaunchKernelEx(&config, smoothKernel<DT>, frames, count, vector, fixedRowElems, parts))
  if (dtype == cclzBfloat16)
    CCLZ_FP8_SMOOTH(cclzBfloat16);
  else if (dtype == cclzFloat16)
    CCLZ_FP8_SMOOTH(cclzFloat16);
  else
    CCLZ_FP8_SMOOTH(cclzFloat32);
#undef CCLZ_FP8_SMOOTH
}

}  // namespace cclz::fp8
