// The fused NVLink all-gather's kernels (fused_nvlink.cpp runs them; docs/collectives.md, "Fused
// NVLink paths"): a C++17 CUDA unit apart from the host code (C++20), with nothing of the
// collective layer's headers.
#pragma once

#include "transport/nccl/nccl_symmetric.h"

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

#include <cuda_runtime_api.h>

#include <cstdint>

#include "codec/device.h"

namespace cclz {

// The push kernel's CTAs: stores over NVLink need few to keep the links busy, and few leave the
// GPU to the encodes and decodes that run beside it (which the peers' barriers wait for).
constexpr int kFusedPushCtas = 32;
constexpr int kPushThreads = 512;
// The LSA barriers the device communicator holds: one per push CTA (a barrier session is per
// CTA, and CTA i of every rank meets CTA i of its peers), and the closing kernel's own, which
// runs on another stream while a later piece's push may be waiting at its barriers.
constexpr int kFusedCloseBarrier = kFusedPushCtas;
constexpr int kFusedBarriers = kFusedPushCtas + 1;
// The barrier that stands for the push where the encodes stored the frames themselves
// (CCLZ_FUSED=direct): the push CTAs' first, which no push kernel then uses.
constexpr int kFusedArrivalBarrier = 0;

// Decode blocks an SM holds beside a push: half the decode's own bound, so that wherever the
// scheduler puts them, the push CTAs find room (32 SMs left empty, or two blocks' registers free
// on every SM).
constexpr int kDecodeBlocksBesidePush = 2;

// Blocks of the push kernel and of the decode kernel for frames of `count` values: the same on
// every rank for the same count on the same GPU model. fusedDecodeGridBesidePush: a decode that
// runs while a push kernel may be resident (the own frame's, queued on another stream): at most
// kDecodeBlocksBesidePush blocks for each SM that the push CTAs leave.
unsigned fusedPushGrid();
unsigned fusedDecodeGrid(uint64_t count);
unsigned fusedDecodeGridBesidePush(uint64_t count);

// Frames from .. to - 1 of a decode (frame k: rank (me + k) % n; frame 0: this rank's own).
struct FrameRange {
  int from, to;
};

// A piece, after this rank's frames were encoded:
// 1. launchFusedPush: peer d's frame (`bytes`, a multiple of 16, at frames + d * srcStride in
//    this rank's device memory; srcStride 0: the same frame for every peer) stored into peer d's
//    window at offset `slot` (this rank's slot, the same offset on every rank), then an LSA
//    barrier per CTA. Once it has ended, every peer's frame is in this rank's window. Frames of
//    a variable size (sizeInHeader: the lossless codec's) move as many bytes as their headers
//    say, at most `bytes`, the slot's room, read on the GPU: the host never learns the size.
// 2. The frames decoded from local memory: launchFusedDecode for an fp8 all-gather (the frames
//    of `frames`, rank r's at base + r * slotStride, decoded into out + r * rankStride, 16-byte
//    aligned, count values of dtype each; status: the decode's error word); the codec's own
//    decode per frame for a lossless one; the codec's own decode-and-reduce steps for a
//    reduce-scatter. An fp8 all-gather's own frame needs no push: it is decoded while the push
//    runs (FrameRange{0, 1}, after the encode), the peers' after it.
// 3. launchFusedClose: one CTA's LSA barrier (kFusedCloseBarrier); once it has ended, no peer
//    reads the piece's slots any more, and a later piece may be pushed into them.
// abortFlag (host-mapped memory, as a device pointer): once the host sets it non-zero, a kernel
// waiting in a barrier gives up and ends (the output is then undefined).
void launchFusedPush(unsigned grid, cudaStream_t stream, const ncclDevComm& comm,
                     ncclWindow_t window, const uint8_t* frames, uint64_t srcStride, uint64_t slot,
                     uint64_t bytes, bool sizeInHeader, const volatile uint32_t* abortFlag);
void launchFusedDecode(int dtype, unsigned grid, cudaStream_t stream, const uint8_t* base,
                       uint64_t slotStride, uint64_t frameBytes, uint64_t count, int me, int n,
                       FrameRange frames, uint8_t* out, uint64_t rankStride, DeviceStatus* status);
void launchFusedClose(cudaStream_t stream, const ncclDevComm& comm,
                      const volatile uint32_t* abortFlag);
// In place of launchFusedPush where this rank's encodes stored its frames in the peers' windows
// themselves (CCLZ_FUSED=direct): one CTA's LSA barrier (kFusedArrivalBarrier), queued after those
// encodes. Once it has ended, every peer's encodes of the piece have ended, so its frames are in
// this rank's window.
void launchFusedArrival(cudaStream_t stream, const ncclDevComm& comm,
                        const volatile uint32_t* abortFlag);

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL_DEVICE_API
