// Which kernels run the lossless payload on the device (docs/kernels/lossless.md, "Kernel
// families: general and staged"). Both give the same frames and accept the same frames; they
// differ only in speed.
//   general: one warp per chunk, warps loop over chunks; the decoder reads the raw planes from
//            global memory a group ahead, the encoder loads its chunk four groups at a time.
//   staged:  one chunk per warp (decode) or per slot of 4 warps (encode), every chunk given its
//            place in the grid; the chunk's raw planes (decode) or its input (encode) are staged
//            in shared memory with one cp.async wait, so no group waits on DRAM. More shared
//            memory per block: made for small messages, where the kernels are latency-bound
//            (4 MiB of bf16: 512 chunks, ~4 warps per SM), and faster up to larger ones than
//            that (stagedChunksPerSM below).
// Both families, and both encoder forms below, are taken by the automatic choice.
//
// CCLZ_LOSSLESS_PATH (read once per process) picks a family: auto (default: staged when the
// message has at most stagedChunksPerSM chunks per multiprocessor), general or staged. The tests
// force `general` on their small messages, so that both families are checked byte for byte
// against the CPU reference (tests/codec/CMakeLists.txt).
//
// The staged decoder, and the general decoder for bf16 and fp16, decode each whole coded chunk
// (4096 elements) with the pair-window loop (decode_window.cuh: ~2.5x fewer instructions per
// symbol and a shorter dependent chain than the lane loop, which takes short chunks, other chunk
// sizes and the general fp32 decoder; docs/kernels/lossless.md, "Decoder").
//
// CCLZ_LOSSLESS_ENCODE_WARPS (read once per process): auto (default), 2 or 4 warps per chunk in
// the staged encoder, which split every lane's 16 groups into that many parts, one warp each
// (encode_split.h): the costs, the code and the lanes' sizes are combined in shared memory
// and each part codes its groups at its bit offset inside the lane's stream. Same frames, byte
// for byte; the general kernels and the decoders do not read it. auto takes 4 while a message has
// at most kFourWarpChunksPerSM chunks per multiprocessor, 2 above (encodeWarpsPerChunk). The
// tests force each on every small message, where auto takes 4 only (docs/kernels/lossless.md,
// "Encoder").
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "codec/lossless/format.h"

namespace cclz::lossless {

enum class KernelPath { General, Staged, Auto };
enum class Direction { Encode, Decode };

// auto's rule for chunks the staged kernels do not take whole (another chunk size; an encode from
// a source that is not 16-byte aligned, which the slot's first warp encodes alone): staged while
// every chunk fits on the GPU at once at the staged kernels' occupancy (
// docs/kernels/lossless.md, "Kernel families: general and staged").
constexpr uint64_t kStagedChunksPerSM = 8;
constexpr uint64_t kAlwaysStaged = ~uint64_t{0};

// auto's rule: the most chunks per multiprocessor for which the staged kernels run. Default
// 4096-element chunks, measured on the H200 against the general kernels on Gaussian data, queued
// and timed alone, and on the real bf16 tensors tiled to 16-256 MiB
// (docs/kernels/lossless.md, "Kernel families: general and staged"):
//   encode bf16: with 4 warps per chunk, staged ahead up to 32 MiB (31 chunks per SM; +5%, real
//                tensors +35%), level at 48, behind from 64 (-6%; real tensors +10%); with 2 warps
//                per chunk above 4 chunks per SM (encodeWarpsPerChunk), ahead up to 128 MiB
//                (+4%) and level at 256 (-0.5%; docs/kernels/lossless.md, "Kernel families: general
//                and staged"): 128.
//   encode fp16, fp32: staged ahead at every size up to 256 MiB, or level there. With 4 warps
//                per chunk: fp32 +36% at 8 MiB, +14% at 64, +2.5% at 256; fp16 +28% at 8 MiB,
//                +14% at 64, -1% at 256. With 2 above 4 chunks per SM, at 256 MiB: fp32 +12%,
//                fp16 +14%. (The general kernel loads an fp32 chunk in eight batches, bf16 in
//                four.) Always.
//   decode bf16: staged ahead up to 16 MiB (15.5 per SM, +10%), behind from 24 MiB: 16.
//   decode fp16: staged ahead at every size (+22% at 256 MiB). Every Gaussian fp16 chunk has
//                escapes (64 of 64 counted on the CPU; bf16 and fp32 none), and the staged
//                kernel's window loop likely takes them in fewer steps (not profiled): always.
//   decode fp32: ahead at 12 MiB (5.8 per SM, +10%), behind at 16 MiB (7.8 per SM, -2.5%; its
//                staged blocks take 72 KiB of shared memory): 6.
// wholeChunks: the chunks have the default size and (encode) the source is 16-byte aligned.
constexpr uint64_t stagedChunksPerSM(Direction direction, int dtype, bool wholeChunks) {
  if (!wholeChunks) return kStagedChunksPerSM;
  if (dtype == cclzFloat16) return kAlwaysStaged;
  const bool fp32 = dtype == cclzFloat32;
  if (direction == Direction::Encode) return fp32 ? kAlwaysStaged : 128;
  return fp32 ? 6 : 16;
}

// Parses CCLZ_LOSSLESS_PATH's value; throws cclzInvalidArgument on anything else.
KernelPath parseKernelPath(const char* value);

// The environment's choice, parsed once (an invalid value fails every call that asks).
KernelPath kernelPathFromEnvironment();

// Parses CCLZ_LOSSLESS_ENCODE_WARPS's value (warps per chunk in the staged encoder: 2 or 4; 0 for
// auto or nothing); throws cclzInvalidArgument on anything else.
int parseEncodeWarps(const char* value);

// auto's warps per chunk: 4 while every chunk of the message is in flight at once (a
// multiprocessor holds 8 four-warp slots), then 2, whose 16 slots per multiprocessor keep more
// chunks' loads in flight. Measured on the H200, staged bf16 encode, 4 / 2 warps, queued: 2 MiB
// 313 / 285 GB/s, 4 MiB 416 / 421, 8 MiB 575 / 601, 64 MiB 1026 / 1183, 256 MiB 1129 / 1399;
// fp32 and fp16 alike (docs/kernels/lossless.md, "Kernel families: general and staged").
constexpr uint64_t kFourWarpChunksPerSM = 4;
inline int encodeWarpsPerChunk(int configured, uint64_t numChunks, int sms) {
  if (configured != 0) return configured;
  return numChunks <= kFourWarpChunksPerSM * static_cast<uint64_t>(sms) ? 4 : 2;
}

// The environment's choice, parsed once (an invalid value fails every call that asks).
int encodeWarpsFromEnvironment();

// True if a message of numChunks chunks takes the staged kernels in that direction on a device of
// `sms` multiprocessors (wholeChunks: as stagedChunksPerSM).
inline bool useStagedKernels(KernelPath path, Direction direction, int dtype, bool wholeChunks,
                             uint64_t numChunks, int sms) {
  if (path != KernelPath::Auto) return path == KernelPath::Staged;
  const uint64_t perSM = stagedChunksPerSM(direction, dtype, wholeChunks);
  return perSM == kAlwaysStaged || numChunks <= perSM * static_cast<uint64_t>(sms);
}

}  // namespace cclz::lossless
