// The sum of plain fp8 frames in one pass (FrameSum, codec/device.h): a reduce-scatter's decode
// stage once every frame of its piece is in (the fused NVLink paths, the pipeline's decode step).
// The n steps of ReduceStep write the fp32 accumulator after every frame but the last and read it
// before every frame but the first: with bf16 frames 5 + 9 (n - 2) + 7 bytes a value, 30 at four
// ranks. Here each value's n codes are read and its sum written once (n + 2 bytes: 6 at four
// ranks), the frames' values added in registers in rank order.
//
// Layout as the plain decode's (decodePiece, decode_device.cuh): a warp takes 512-value tiles, a
// lane 16 consecutive values of each frame (one 16-byte load of codes), and the values are the
// bits decodePiece hands to a reduce step: the decoded value rounded to the dtype, back in fp32.
#include <algorithm>

#include "codec/fp8/decode_device.cuh"

namespace cclz::fp8 {
namespace {

constexpr int kSumBlocksPerSM = 4;

// What every block reads of each frame's header before it decodes.
struct FrameView {
  Layout layout;
  uint32_t rowElems;
  double invRowElems;
};

// A lane's 16 values of one frame's piece as a decode stores them, back in fp32 (the value a
// reduce step adds), into v. False for a bad row (reported: the piece takes no part in the sum,
// as the steps skip it). Codes past t.valid decode as 0.
template <int Dtype>
__device__ __forceinline__ bool pieceValues(const PieceLoad& t, uint32_t grid,
                                            const float* codeTable, float* v,
                                            DeviceStatus* status) {
  float s;
  if (!pieceScale(t, status, &s)) return false;
  const uint32_t words[4] = {t.codes.x, t.codes.y, t.codes.z, t.codes.w};
  if (pieceIsRare(words, grid, t.valid)) {  // NaN and Inf keep their value
    rarePieceValues<Dtype>(words, codeTable, s, v);
#pragma unroll
    for (uint32_t j = 0; j < kPieceElems; ++j) v[j] = asStored<Dtype>(v[j]);
    return true;
  }
  commonPieceValues(words, grid, codeTable, s, v);
  const float maxFinite = dtypeMaxFinite(Dtype);
#pragma unroll
  for (uint32_t j = 0; j < kPieceElems; j += 2) {
    if constexpr (Dtype == cclzFloat32) {
      v[j] = saturate(v[j], maxFinite), v[j + 1] = saturate(v[j + 1], maxFinite);
    } else {
      const uint32_t pair = packSaturated2<Dtype>(v[j], v[j + 1]);
      v[j] = unpackHalfWord<Dtype>(pair & 0xFFFFu), v[j + 1] = unpackHalfWord<Dtype>(pair >> 16);
    }
  }
  return true;
}

// The lane's sums of its 16 values stored at element `first` of the dtype: sum / divisor,
// rounded as reduce::storeElement rounds it.
template <int Dtype>
__device__ __forceinline__ void storeSums(void* store, uint64_t first, uint32_t valid,
                                          const float* sum, float divisor) {
  if (valid == kPieceElems) {
    if constexpr (Dtype == cclzFloat32) {
      uint4* out = reinterpret_cast<uint4*>(static_cast<uint32_t*>(store) + first);
#pragma unroll
      for (uint32_t q = 0; q < 4; ++q)
        out[q] = make_uint4(storedBits<Dtype>(sum[4 * q], divisor),
                            storedBits<Dtype>(sum[4 * q + 1], divisor),
                            storedBits<Dtype>(sum[4 * q + 2], divisor),
                            storedBits<Dtype>(sum[4 * q + 3], divisor));
    } else {
      uint32_t w[kPieceElems / 2];
#pragma unroll
      for (uint32_t k = 0; k < kPieceElems / 2; ++k)
        w[k] = storedBits<Dtype>(sum[2 * k], divisor) |
               (storedBits<Dtype>(sum[2 * k + 1], divisor) << 16);
      uint4* out = reinterpret_cast<uint4*>(static_cast<uint16_t*>(store) + first);
      out[0] = make_uint4(w[0], w[1], w[2], w[3]);
      out[1] = make_uint4(w[4], w[5], w[6], w[7]);
    }
    return;
  }
#pragma unroll
  for (uint32_t j = 0; j < kPieceElems; ++j) {
    if (j >= valid) continue;
    if constexpr (Dtype == cclzFloat32)
      static_cast<uint32_t*>(store)[first + j] = storedBits<Dtype>(sum[j], divisor);
    else
      static_cast<uint16_t*>(store)[first + j] =
          static_cast<uint16_t>(storedBits<Dtype>(sum[j], divisor));
  }
}

// Every block checks the n headers (thread r frame r) and builds the value table of their grid,
// then its warps take tiles, tile + warps, ... : per tile each frame's piece is loaded (two frames
// at a time, both in flight together), decoded and added in rank order.
template <int Dtype>
__global__ void __launch_bounds__(kThreads, kSumBlocksPerSM)
    sumKernel(FrameSum s, uint64_t count, DeviceStatus* status) {
  static_assert(kThreads >= 256 && kThreads >= kMaxSumFrames, "one thread per code and frame");
  __shared__ FrameView views[kMaxSumFrames];
  __shared__ uint32_t grids[kMaxSumFrames];
  __shared__ uint32_t headerError;
  waitForPreviousKernel();
  if (threadIdx.x == 0) headerError = kFrameOk;
  __syncthreads();
  if (threadIdx.x < s.n) {
    const uint8_t* src = s.frames[threadIdx.x];
    uint32_t err = kFrameTruncated;
    Params p;
    if (s.frameBytes >= kFrameHeaderBytes) {
      const FrameHeader header = *reinterpret_cast<const FrameHeader*>(src);
      err = checkFrameHeader(header, s.frameBytes);
      if (err == kFrameOk) err = checkFrameMatches(header, cclzCodecFp8, Dtype, count);
      if (err == kFrameOk) err = checkFp8Header(header, &p);
      // Only plain frames: a rotated row's values depend on its neighbours'.
      if (err == kFrameOk && (p.policy != kRotateNever || p.smoothApplied != 0))
        err = kFrameMismatch;
    }
    if (err == kFrameOk) {
      views[threadIdx.x] = FrameView{frameLayout(count, p), p.rowElems, 1.0 / p.rowElems};
      grids[threadIdx.x] = p.grid;
    } else {
      atomicCAS(&headerError, 0u, err);
    }
  }
  __syncthreads();
  if (headerError == kFrameOk && threadIdx.x < s.n && grids[threadIdx.x] != grids[0])
    atomicCAS(&headerError, 0u, static_cast<uint32_t>(kFrameMismatch));
  __syncthreads();
  if (headerError != kFrameOk) {
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicCAS(&status->decodeError, 0u, headerError);
    return;
  }
  const uint32_t grid = grids[0];
  float* codeTable = sharedCodeTable;
  const uint8_t code = static_cast<uint8_t>(threadIdx.x);
  codeTable[threadIdx.x] = isSpecialCode(code) ? 0.0f : codeValue(grid, code);
  __syncthreads();

  const uint32_t lane = threadIdx.x & 31;
  const uint64_t tiles = (count + kPlainTileElems - 1) / kPlainTileElems;
  const uint64_t warps = static_cast<uint64_t>(gridDim.x) * blockDim.x / 32;
  for (uint64_t tile = (static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       tile < tiles; tile += warps) {
    float sum[kPieceElems];
#pragma unroll
    for (uint32_t j = 0; j < kPieceElems; ++j) sum[j] = 0.0f;
    uint32_t valid = 0;
#pragma unroll 1
    for (int r = 0; r < s.n; r += 2) {
      const bool second = r + 1 < s.n;
      const FrameView& va = views[r];
      const PieceLoad a =
          loadPiece(s.frames[r], va.layout, va.rowElems, va.invRowElems, count, tile, lane);
      PieceLoad b;
      b.valid = 0;
      if (second) {
        const FrameView& vb = views[r + 1];
        b = loadPiece(s.frames[r + 1], vb.layout, vb.rowElems, vb.invRowElems, count, tile,
                      lane);
      }
      valid = a.valid;
      if (valid == 0) break;  // the lane's values lie past the end
      float v[kPieceElems];
      if (pieceValues<Dtype>(a, grid, codeTable, v, status))
#pragma unroll
        for (uint32_t j = 0; j < kPieceElems; ++j) sum[j] = accumulateRn(sum[j], v[j]);
      if (second && pieceValues<Dtype>(b, grid, codeTable, v, status))
#pragma unroll
        for (uint32_t j = 0; j < kPieceElems; ++j) sum[j] = accumulateRn(sum[j], v[j]);
    }
    if (valid > 0) storeSums<Dtype>(s.store, tile * kPlainTileElems + lane * kPieceElems, valid,
                                    sum, s.divisor);
  }
}

}  // namespace

void sumDevice(const FrameSum& sum, int dtype, uint64_t count, DeviceStatus* status,
               cudaStream_t stream) {
  CCLZ_REQUIRE(sum.n >= 1 && sum.n <= kMaxSumFrames, cclzInternalError,
               "fp8 sum: 1 to kMaxSumFrames frames");
  const uint64_t tiles = (count + kPlainTileElems - 1) / kPlainTileElems;
  const unsigned blocks =
      std::min(gridFor(tiles), static_cast<unsigned>(kSumBlocksPerSM * multiprocessorCount()));
  const bool programmatic = programmaticLaunchSupported();
  switch (dtype) {
    case cclzBfloat16:
      launchFp8Kernel(sumKernel<cclzBfloat16>, blocks, stream, programmatic, sum, count, status);
      break;
    case cclzFloat16:
      launchFp8Kernel(sumKernel<cclzFloat16>, blocks, stream, programmatic, sum, count, status);
      break;
    default:
      launchFp8Kernel(sumKernel<cclzFloat32>, blocks, stream, programmatic, sum, count, status);
  }
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cclz::fp8
