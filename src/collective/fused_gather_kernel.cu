// The fused NVLink all-gather's kernel (fused_gather_kernel.h). The barriers and the peers'
// pointers are NCCL's device API (nccl_device.h); the decode is the fp8 decoder's own device
// function (codec/fp8/decode_device.cuh), so the bytes are the decode kernel's.
#include "collective/fused_gather_kernel.h"

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

#include <nccl_device.h>

#include <algorithm>

#include "codec/fp8/decode_device.cuh"
#include "common/error.h"

namespace cclz {
namespace {

// Blocks of the gather kernel for frames of `count` values: the plain decode's grid (two tiles
// of 512 values a warp), at most what is resident at once (fp8::kDecodeBlocksPerSM per SM) and
// kFusedMaxCtas. NOTE: resident, because a CTA waits in the barrier for the same CTA of every peer;
// a grid that does not fit at once would leave the later CTAs to start only as earlier ones end.
// Every rank computes the same grid from the same count (ranks with GPUs of different SM counts
// would not: the fused path assumes one GPU model).
unsigned gatherGrid(uint64_t count) {
  const uint64_t warps = (count + 2 * fp8::kPlainTileElems - 1) / (2 * fp8::kPlainTileElems);
  const unsigned blocks = fp8::gridFor(warps);
  const unsigned resident = static_cast<unsigned>(fp8::kDecodeBlocksPerSM * multiprocessorCount());
  return std::min({blocks, resident, static_cast<unsigned>(kFusedMaxCtas)});
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

// One piece: every rank's frame (frameBytes, count values each) at offset 0 of its window,
// decoded into out + r * rankStride for rank r (16-byte aligned: decodeFrame stores 16 bytes at
// a time). status: the decode's error word. abortFlag: waitOrAbort's.
template <int Dtype>
__global__ void __launch_bounds__(fp8::kThreads, fp8::kDecodeBlocksPerSM)
    gatherDecodeKernel(ncclDevComm comm, ncclWindow_t window, uint64_t frameBytes, uint64_t count,
                       uint8_t* out, uint64_t rankStride, DeviceStatus* status,
                       const volatile uint32_t* abortFlag) {
  ncclCoopCta cta;
  ncclLsaBarrierSession<ncclCoopCta> barrier(cta, comm, ncclTeamTagLsa{}, blockIdx.x);
  // NOTE: acquire-release at system scope: each rank's arrival releases the frame its encode
  // kernels wrote before this kernel (stream order), and the wait acquires the peers' frames
  // before they are loaded over NVLink.
  barrier.arrive(cta, cuda::memory_order_acq_rel);
  if (!waitOrAbort(barrier, cta, abortFlag)) return;
  const int n = comm.nRanks, me = comm.rank;
  for (int k = 0; k < n; ++k) {
    const int r = (me + k) % n;
    // The LSA team is the whole communicator: the peer's world rank is its LSA rank.
    const auto* src = static_cast<const uint8_t*>(ncclGetPeerPointer(window, 0, r));
    if (k) __syncthreads();  // decodeFrame's shared header and table are reused
    fp8::decodeFrame<Dtype, fp8::kStore>(src, frameBytes, count, out + r * rankStride, ReduceStep{},
                                         status);
  }
  // Every CTA's loads of the peers' slots are done before its arrival (release); this rank's next
  // encode comes after the whole kernel, so after every peer's CTAs have arrived.
  __syncthreads();  // a CTA that met a bad header may have left decodeFrame early
  barrier.arrive(cta, cuda::memory_order_acq_rel);
  waitOrAbort(barrier, cta, abortFlag);
}

}  // namespace

unsigned fusedGatherGrid(uint64_t count) { return gatherGrid(count); }

void launchFusedGather(int dtype, unsigned grid, cudaStream_t stream, const ncclDevComm& comm,
                       ncclWindow_t window, uint64_t frameBytes, uint64_t count, uint8_t* out,
                       uint64_t rankStride, DeviceStatus* status,
                       const volatile uint32_t* abortFlag) {
  switch (dtype) {
    case cclzBfloat16:
      gatherDecodeKernel<cclzBfloat16><<<grid, fp8::kThreads, 0, stream>>>(
          comm, window, frameBytes, count, out, rankStride, status, abortFlag);
      break;
    case cclzFloat16:
      gatherDecodeKernel<cclzFloat16><<<grid, fp8::kThreads, 0, stream>>>(
          comm, window, frameBytes, count, out, rankStride, status, abortFlag);
      break;
    default:
      gatherDecodeKernel<cclzFloat32><<<grid, fp8::kThreads, 0, stream>>>(
          comm, window, frameBytes, count, out, rankStride, status, abortFlag);
  }
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL_DEVICE_API
