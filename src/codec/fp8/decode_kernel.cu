// The fp8 decode and decode-and-accumulate on the device, one pass. Frames without rotation or
// smoothing (the E4M3/E5M2 default) take 512-value tiles a warp (decodePlain): 16 consecutive
// codes a lane where bf16 or fp16 is stored; where fp32 is (the decode into fp32, decode-and-
// accumulate, a reduce step that writes the accumulator) 4 groups of 4 a lane, so that each warp
// store writes whole L2 lines (decodeTileGroups). The others take one warp per 256-value tile
// (the rotation's butterflies span the warp).
#include <algorithm>

#include "codec/fp8/decode_device.cuh"

namespace cclz::fp8 {
namespace {

// The decode kernel: one frame (decodeFrame, decode_device.cuh).
template <int Dtype, int Mode>
// NOTE: 4 blocks (32 warps) per SM: at most 64 registers (without the bound ptxas takes 77 and
// the general path, INT8's, is 9% slower; docs/kernels/fp8.md, "Decoder").
__global__ void __launch_bounds__(kThreads, kDecodeBlocksPerSM)
    decodeKernel(const uint8_t* src, uint64_t srcBytes, uint64_t count, void* dst, ReduceStep r,
                 DeviceStatus* status) {
  // NOTE: launched programmatic where it can be (decodeDevice), as the encode is. The plain
  // decode (a resident grid) lets the next kernel start once it has waited for the one before.
  // Decode-and-accumulate (a full grid, one wave at 4 MiB) lets the next one start only as its
  // blocks end: letting it start early costs 10% at 4 MiB (docs/kernels/fp8.md, "Small messages
  // and programmatic dependent launch").
  waitForPreviousKernel();
  if constexpr (Mode == kStore) letNextKernelStart();
  decodeFrame<Dtype, Mode>(src, srcBytes, count, dst, r, status);
}

// The decode's grid: two plain tiles a warp (the general path's loop takes whatever grid it
// gets). A plain decode (kStore) takes at most the blocks that are resident at once, and its warps
// loop: every block checks the header and builds its code table before it decodes, and at one
// step per warp that preamble is most of a block's time. Full grid -> resident grid on the H200:
// at 256 MiB bf16 1702 -> 2320 GB/s, fp16 1702 -> 2314, INT8 716 -> 874; into fp32 (whole-line
// stores, decodeTileGroups) 2159 -> 2388 at 64 MiB, 2383 -> 2751 at 256 MiB. Decode-and-
// accumulate keeps the full grid: the resident one measures the same (docs/kernels/fp8.md,
// "Decoder").
unsigned decodeGrid(int mode, uint64_t count) {
  const unsigned blocks = gridFor((count + 2 * kPlainTileElems - 1) / (2 * kPlainTileElems));
  if (mode != kStore) return blocks;
  return std::min(blocks, static_cast<unsigned>(kDecodeBlocksPerSM * multiprocessorCount()));
}

}  // namespace

void decodeDevice(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst,
                  const ReduceStep* reduce, DeviceStatus* status, cudaStream_t stream) {
  const ReduceStep r = reduce ? *reduce : ReduceStep{};
  const int mode = !reduce ? kStore : (r.fromZero || r.store) ? kReduce : kAccumulate;
  const unsigned blocks = decodeGrid(mode, count);
  const bool programmatic = programmaticLaunchSupported();
#define CCLZ_FP8_DECODE(DT, MODE)                                                           \
  launchFp8Kernel(decodeKernel<DT, MODE>, blocks, stream, programmatic, src, srcBytes, count, \
                  dst, r, status)
#define CCLZ_FP8_DECODE_DTYPE(DT)        \
  (mode == kStore        ? CCLZ_FP8_DECODE(DT, kStore)      \
   : mode == kAccumulate ? CCLZ_FP8_DECODE(DT, kAccumulate) \
                         : CCLZ_FP8_DECODE(DT, kReduce))
  switch (dtype) {
    case cclzBfloat16:
      CCLZ_FP8_DECODE_DTYPE(cclzBfloat16);
      break;
    case cclzFloat16:
      CCLZ_FP8_DECODE_DTYPE(cclzFloat16);
      break;
    default:
      CCLZ_FP8_DECODE_DTYPE(cclzFloat32);
  }
#undef CCLZ_FP8_DECODE_DTYPE
#undef CCLZ_FP8_DECODE
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cclz::fp8
