// The fused NVLink all-gather's kernels (fused_nvlink_kernel.h). The barriers and the peers'
// pointers are NCCL's device API (nccl_device.h); the decode is the fp8 decoder's own device
// function (codec/fp8/decode_device.cuh), so the bytes are the decode kernel's.
#include "collective/fused_nvlink_kernel.h"

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

#include <nccl_device.h>

#include <algorithm>

#include "codec/fp8/decode_device.cuh"
#include "codec/frame.h"
#include "common/error.h"

namespace cclz {
namespace {

// Blocks of the decode kernel for frames of `count` values: the plain decode's grid (two tiles
// of 512 values a warp), at most what is resident at once (fp8::kDecodeBlocksPerSM per SM).
unsigned decodeGrid(uint64_t count) {
  const uint64_t warps = (count + 2 * fp8::kPlainTileElems - 1) / (2 * fp8::kPlainTileElems);
  const unsigned blocks = fp8::gridFor(warps);
  const unsigned resident = static_cast<unsigned>(fp8::kDecodeBlocksPerSM * multiprocessorCount());
  return std::min(blocks, resident);
}

// NCCL's LSA barrier wait (ncclLsaBarrierSession::wait, unicast: the only kind made here),
// with one addition: it gives up once *abortFlag is set (host-mapped memory the host sets before
// it aborts the communicator), so that a rank whose peers never come (a mismatched call, an
// aborted peer) ends its kernel instead of spinning for ever. Returns false then, for every
// thread of the CTA. The epoch advances as NCCL's wait advances it, whatever happens, so that
// the session's destructor writes back what NCCL's own would.
// NOTE: this reads the session's members (team, epoch, ucInbox): NCCL 2.28's implementation in
// nccl_device/impl/lsa_barrier__{types,funcs}.h, checked against 2.28.9; other versions take
// NCCL's own wait, without the bound (CCLZ_FUSED_BOUNDED_WAIT).
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0) && NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
#define CCLZ_FUSED_BOUNDED_WAIT 1
#endif
__device__ __forceinline__ bool waitOrAbort(ncclLsaBarrierSession<ncclCoopCta>& barrier,
                                            ncclCoopCta cta, const volatile uint32_t* abortFlag) {
#ifdef CCLZ_FUSED_BOUNDED_WAIT
  bool aborted = false;
  const ncclTeam team = barrier.team;
  for (int i = threadIdx.x; i < team.nRanks - 1 && !aborted; i += blockDim.x) {
    const int peer = i + (team.rank <= i ? 1 : 0);
    cuda::atomic_ref<uint32_t> inbox(*barrier.ucInbox(team.rank, peer));
    // NOTE: the host-mapped flag is read once per 1024 polls of the inbox (a read over PCIe is
    // a microsecond; the inbox, in this GPU's memory, much less).
    for (uint32_t polls = 1;; ++polls) {
      const uint32_t got = inbox.load(cuda::memory_order_acquire);
      if (got - (barrier.epoch + 1) <= uint32_t(-1) >> 1) break;
      if (polls % 1024 == 0 && *abortFlag) {
        aborted = true;
        break;
      }
    }
  }
  barrier.epoch += 1;
  return !__syncthreads_or(aborted);
#else
  (void)abortFlag;
  barrier.wait(cta, cuda::memory_order_acq_rel);
  return true;
#endif
}

// Pushes a frame (`bytes`, a multiple of 16) into every peer's window at offset `slot` with
// 16-byte stores over NVLink, peers me+1, me+2, ... in turn (so that at any moment the ranks
// write to different peers): peer d's frame is at src + d * srcStride in this rank's memory
// (srcStride 0: one frame for all). With sizeInHeader `bytes` is the slot's room, and each frame
// moves only the bytes its header says (frameBytes, rounded up to 16; the room where the header
// says less than a header or more than the room: the decoder then rejects the frame). Then every
// CTA meets the same CTA of every peer at an LSA barrier: once the whole kernel has ended on a
// rank, each CTA's wait has acquired what the same CTA of every peer released, so every peer's
// frame is in this rank's window.
// NOTE: stores, not loads, cross NVLink: a store needs no round trip, so a few CTAs keep the
// links busy, and the frames are then decoded from local memory.
__global__ void __launch_bounds__(kPushThreads)
    pushFrameKernel(ncclDevComm comm, ncclWindow_t window, const uint8_t* frames,
                    uint64_t srcStride, uint64_t slot, uint64_t bytes, bool sizeInHeader,
                    const volatile uint32_t* abortFlag) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> barrier(cta, comm, ncclTeamTagLsa{}, blockIdx.x);
  const int n = comm.nRanks, me = comm.rank;
  const uint64_t stride = uint64_t(gridDim.x) * blockDim.x;
  constexpr int kUnroll = 4;  // loads in flight per thread before its stores
  for (int k = 1; k < n; ++k) {
    const int peer = (me + k) % n;
    const uint8_t* frame = frames + peer * srcStride;
    uint64_t words = bytes / 16;
    if (sizeInHeader) {
      const uint64_t told = reinterpret_cast<const FrameHeader*>(frame)->frameBytes;
      if (told >= kFrameHeaderBytes && told <= bytes) words = (told + 15) / 16;
    }
    const auto* src = reinterpret_cast<const uint4*>(frame);
    // The LSA team is the whole communicator: the peer's world rank is its LSA rank.
    auto* dst = static_cast<uint4*>(ncclGetPeerPointer(window, slot, peer));
    uint64_t i = uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    for (; i + (kUnroll - 1) * stride < words; i += kUnroll * stride) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) dst[i + u * stride] = v[u];
    }
    for (; i < words; i += stride) dst[i] = src[i];
  }
  // NOTE: acquire-release at system scope: the arrival releases this CTA's stores to the peers
  // (arrive syncs the CTA first), the wait acquires the same CTA's of every peer.
  barrier.arrive(cta, cuda::memory_order_acq_rel);
  waitOrAbort(barrier, cta, abortFlag);
}

// Frames k = from .. to - 1 of rank r = (me + k) % n (frameBytes, count values each, at
// base + r * slotStride of this rank's own window, where the pushes put them) decoded into
// out + r * rankStride (16-byte aligned: decodeFrame stores 16 bytes at a time): frame 0 is the
// rank's own. status: the decode's error word.
template <int Dtype>
__global__ void __launch_bounds__(fp8::kThreads, fp8::kDecodeBlocksPerSM)
    decodeFramesKernel(const uint8_t* base, uint64_t slotStride, uint64_t frameBytes,
                       uint64_t count, int me, int n, int from, int to, uint8_t* out,
                       uint64_t rankStride, DeviceStatus* status) {
  for (int k = from; k < to; ++k) {
    const int r = (me + k) % n;
    if (k > from) __syncthreads();  // decodeFrame's shared header and table are reused
    fp8::decodeFrame<Dtype, fp8::kStore>(base + r * slotStride, frameBytes, count,
                                         out + r * rankStride, ReduceStep{}, status);
  }
}

// One CTA's barrier (`index`): once it has ended on a rank, everything every peer queued before
// its own arrival has ended. The closing barrier (kFusedCloseBarrier): every peer's decode of the
// piece, so no peer reads the piece's slots any more and a later piece may be pushed into them.
// The arrival barrier (kFusedArrivalBarrier): every peer's encodes that stored their frames here.
// NOTE: acquire-release at system scope, as the push's: a kernel's stores are complete when it
// ends, and the arrival after it (stream order) releases them to the peers.
__global__ void barrierKernel(ncclDevComm comm, int index, const volatile uint32_t* abortFlag) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> barrier(cta, comm, ncclTeamTagLsa{}, index);
  barrier.arrive(cta, cuda::memory_order_acq_rel);
  waitOrAbort(barrier, cta, abortFlag);
}

}  // namespace

unsigned fusedDecodeGrid(uint64_t count) { return decodeGrid(count); }

unsigned fusedDecodeGridBesidePush(uint64_t count) {
  const int free = std::max(1, multiprocessorCount() - kFusedPushCtas);
  return std::min(decodeGrid(count), static_cast<unsigned>(free * kDecodeBlocksBesidePush));
}

unsigned fusedPushGrid() {
  return static_cast<unsigned>(std::min(multiprocessorCount(), kFusedPushCtas));
}

void launchFusedPush(unsigned grid, cudaStream_t stream, const ncclDevComm& comm,
                     ncclWindow_t window, const uint8_t* frames, uint64_t srcStride, uint64_t slot,
                     uint64_t bytes, bool sizeInHeader, const volatile uint32_t* abortFlag) {
  CCLZ_REQUIRE(bytes % 16 == 0 && slot % 16 == 0 && srcStride % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(frames) % 16 == 0 &&
                   grid <= unsigned(kFusedPushCtas),
               cclzInternalError, "fused push: frames and slots are whole 16-byte words");
  pushFrameKernel<<<grid, kPushThreads, 0, stream>>>(comm, window, frames, srcStride, slot, bytes,
                                                     sizeInHeader, abortFlag);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void launchFusedDecode(int dtype, unsigned grid, cudaStream_t stream, const uint8_t* base,
                       uint64_t slotStride, uint64_t frameBytes, uint64_t count, int me, int n,
                       FrameRange frames, uint8_t* out, uint64_t rankStride, DeviceStatus* status) {
  CCLZ_REQUIRE(0 <= frames.from && frames.from < frames.to && frames.to <= n, cclzInternalError,
               "fused decode: a range of frames outside the ranks'");
  switch (dtype) {
    case cclzBfloat16:
      decodeFramesKernel<cclzBfloat16>
          <<<grid, fp8::kThreads, 0, stream>>>(base, slotStride, frameBytes, count, me, n,
                                               frames.from, frames.to, out, rankStride, status);
      break;
    case cclzFloat16:
      decodeFramesKernel<cclzFloat16>
          <<<grid, fp8::kThreads, 0, stream>>>(base, slotStride, frameBytes, count, me, n,
                                               frames.from, frames.to, out, rankStride, status);
      break;
    default:
      decodeFramesKernel<cclzFloat32>
          <<<grid, fp8::kThreads, 0, stream>>>(base, slotStride, frameBytes, count, me, n,
                                               frames.from, frames.to, out, rankStride, status);
  }
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void launchFusedClose(cudaStream_t stream, const ncclDevComm& comm,
                      const volatile uint32_t* abortFlag) {
  barrierKernel<<<1, 32, 0, stream>>>(comm, kFusedCloseBarrier, abortFlag);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

void launchFusedArrival(cudaStream_t stream, const ncclDevComm& comm,
                        const volatile uint32_t* abortFlag) {
  barrierKernel<<<1, 32, 0, stream>>>(comm, kFusedArrivalBarrier, abortFlag);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL_DEVICE_API
