// The fp8 encoder's decisions from the data (codec/fp8/shape.h): small kernels over a sample,
// run before the encode on its stream, whose integer statistics are exact in any order.
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

// The sample's center (shapeCenter) from the binades of its first min(count, kShapeCenterElems)
// values with a magnitude, by the whole block. Lanes of a warp with the same binade add once
// (__match_any_sync): typical data has a few binades, and 1024 threads adding one by one into
// the same shared words would serialize. The median is found by one warp's scan of the 256 bins.
template <int Dtype>
__device__ uint32_t blockShapeCenter(const void* src, uint64_t count, uint32_t* histogram,
                                     uint32_t* counted) {
  const uint32_t lane = threadIdx.x % 32;
  for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) histogram[b] = 0;
  if (threadIdx.x == 0) *counted = 0;
  __syncthreads();
  const uint32_t centerElems =
      static_cast<uint32_t>(count < kShapeCenterElems ? count : kShapeCenterElems);
  const uint32_t warpStride = blockDim.x;
  for (uint32_t base = threadIdx.x - lane; base < centerElems; base += warpStride) {
    const uint32_t i = base + lane;  // the whole warp iterates together
    const float v = i < centerElems ? loadAsFloat(src, Dtype, i) : 0.0f;
    const bool has = i < centerElems && hasMagnitude(v);
    const uint32_t binade = has ? floatToBits(v) << 1 >> 24 : 256u;
    const uint32_t same = __match_any_sync(kFullMask, binade);
    if (has && lane == __ffs(same) - 1) atomicAdd(&histogram[binade], __popc(same));
    const uint32_t withMagnitude = __ballot_sync(kFullMask, has);
    if (lane == 0 && withMagnitude) atomicAdd(counted, __popc(withMagnitude));
  }
  __syncthreads();
  // Warp 0: lane l sums bins 8l..8l+7, an inclusive scan over the lanes finds the lane holding
  // the median, which walks its 8 bins: the smallest b with 2 * seen >= counted, as shapeCenter.
  __shared__ uint32_t center;
  if (threadIdx.x < 32) {
    uint32_t mine = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) mine += histogram[8 * lane + k];
    uint32_t seen = mine;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const uint32_t other = __shfl_up_sync(kFullMask, seen, d);
      if (lane >= static_cast<uint32_t>(d)) seen += other;
    }
    const uint32_t total = *counted;
    const uint32_t reached = __ballot_sync(kFullMask, 2 * seen >= total);
    if (lane == __ffs(reached) - 1) {  // reached != 0: the last lane's seen is total
      uint32_t before = seen - mine, b = 8 * lane;
      for (int k = 0; k < 8; ++k, ++b) {
        before += histogram[b];
        if (2 * before >= total) break;
      }
      center = b * 8 + 4;
    }
  }
  __syncthreads();
  return center;
}

// chooseRowElems (shape.h) by one warp: each lane scores candidates lane, lane + 32, ... once
// (a score costs a few fp64 divisions: on one thread the 2 x 57 of them were a long serial
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

// Block c measures candidate row length c (ShapeStats over the sample: the column sums of the
// levels in shared memory, integer atomics, so exact in any order); the last block to finish
// chooses the row length, as chooseRowElemsRef does from the same integers.
template <int Dtype>
__global__ void __launch_bounds__(kShapeThreads)
    shapeKernel(const void* src, uint64_t count, uint32_t log2H, EncodeChoice* choice) {
  __shared__ uint32_t column[kAutoMaxRowElems];  // <= 128 rows x 128: no overflow
  __shared__ uint32_t histogram[256], counted;
  __shared__ unsigned long long total, sumSq, sumColSq;
  __shared__ bool last;
  const uint32_t c = blockIdx.x, rowElems = shapeCandidate(c, log2H), lane = threadIdx.x % 32;
  const uint32_t rows = static_cast<uint32_t>(shapeSampleElems(count) / rowElems);
  for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x) column[j] = 0;
  if (threadIdx.x == 0) total = sumSq = sumColSq = 0;
  // NOTE: every block finds the same center (a few thousand values from L2) rather than waiting
  // for one that would publish it.
  const uint32_t center = blockShapeCenter<Dtype>(src, count, histogram, &counted);
  if (rows >= kShapeMinRows) {  // uniform
    // Consecutive threads take consecutive values, so a warp's 32 column atomics hit 32 banks;
    // a thread has 8 loads in flight; each warp adds its sums of squares once.
    const uint32_t n = rows * rowElems;
    uint64_t mySq = 0;
    for (uint32_t base = threadIdx.x; base < n; base += kLaneElems * blockDim.x) {
      float v[kLaneElems];
#pragma unroll
      for (uint32_t k = 0; k < kLaneElems; ++k) {
        const uint32_t i = base + k * blockDim.x;
        v[k] = i < n ? loadAsFloat(src, Dtype, i) : 0.0f;
      }
#pragma unroll
      for (uint32_t k = 0; k < kLaneElems; ++k) {
        const uint32_t i = base + k * blockDim.x;
        if (i >= n) break;
        const uint32_t z = shapeLevel(v[k], center);
        atomicAdd(&column[i % rowElems], z);
        mySq += z * z;
      }
    }
    mySq = warpSum64(mySq);
    if (lane == 0) atomicAdd(&sumSq, mySq);
    __syncthreads();
    uint64_t myTotal = 0, myColSq = 0;
    for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x) {
      const uint64_t sum = column[j];
      myTotal += sum;
      myColSq += sum * sum;
    }
    myTotal = warpSum64(myTotal);
    myColSq = warpSum64(myColSq);
    if (lane == 0) atomicAdd(&total, myTotal), atomicAdd(&sumColSq, myColSq);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    ShapeStats st{};
    st.rows = rows;
    if (rows >= kShapeMinRows) st.total = total, st.sumSq = sumSq, st.sumColSq = sumColSq;
    choice->stats[c] = st;
    __threadfence();
    last = atomicAdd(&choice->shapeBlocksDone, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (last && threadIdx.x < 32) {
    __threadfence();
    const uint32_t chosen = warpChooseRowElems(choice->stats, gridDim.x, log2H);
    if (threadIdx.x == 0) choice->rowElems = chosen;
  }
}

// Block i adds the levels of sample row i (smoothSampleRow) into the column sums; the last block
// to finish writes the shifts into the frame's smoothing area and the decision into `choice`, as
// chooseSmoothingRef does. rowElems is the caller's, or (0) the shape kernel's choice.
template <int Dtype>
__global__ void __launch_bounds__(kThreads)
    smoothKernel(const void* src, uint64_t count, uint32_t fixedRowElems, EncodeChoice* choice,
                 uint32_t* levels, uint8_t* shiftsOut) {
  __shared__ uint32_t histogram[256];
  __shared__ uint32_t median;
  __shared__ bool last;
  const uint32_t rowElems = fixedRowElems ? fixedRowElems : choice->rowElems;
  const bool eligible = smoothEligible(count, rowElems);
  if (eligible) {
    const uint64_t begin = smoothSampleRow(blockIdx.x, count / rowElems) * rowElems;
    for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x)
      atomicAdd(&levels[j], magnitudeLevel(loadAsFloat(src, Dtype, begin + j)));
  }
  __syncthreads();
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
  for (uint32_t b = threadIdx.x; b < 256; b += blockDim.x) histogram[b] = 0;
  __syncthreads();
  for (uint32_t j = threadIdx.x; j < rowElems; j += blockDim.x)
    atomicAdd(&histogram[columnBinade(__ldcg(&levels[j]))], 1u);
  __syncthreads();
  if (threadIdx.x == 0) median = medianBinade(histogram, rowElems);
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

void launchShapeKernel(int dtype, const void* src, uint64_t count, uint32_t log2H,
                       EncodeChoice* choice, cudaStream_t stream) {
  const unsigned blocks = numShapeCandidates(log2H);
  if (dtype == cclzBfloat16)
    shapeKernel<cclzBfloat16><<<blocks, kShapeThreads, 0, stream>>>(src, count, log2H, choice);
  else if (dtype == cclzFloat16)
    shapeKernel<cclzFloat16><<<blocks, kShapeThreads, 0, stream>>>(src, count, log2H, choice);
  else
    shapeKernel<cclzFloat32><<<blocks, kShapeThreads, 0, stream>>>(src, count, log2H, choice);
}

void launchSmoothKernel(int dtype, const void* src, uint64_t count, uint32_t fixedRowElems,
                        EncodeChoice* choice, uint32_t* levels, uint8_t* shiftsOut,
                        cudaStream_t stream) {
#define CCLZ_FP8_SMOOTH(DT)                                  \
  smoothKernel<DT><<<kSmoothMinRows, kThreads, 0, stream>>>( \
      src, count, fixedRowElems, choice, levels, shiftsOut)
  if (dtype == cclzBfloat16)
    CCLZ_FP8_SMOOTH(cclzBfloat16);
  else if (dtype == cclzFloat16)
    CCLZ_FP8_SMOOTH(cclzFloat16);
  else
    CCLZ_FP8_SMOOTH(cclzFloat32);
#undef CCLZ_FP8_SMOOTH
}

}  // namespace cclz::fp8
