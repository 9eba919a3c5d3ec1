// Which kernels run the version 2 payload on the device (bench/notes/lossless-kernels.md,
// "Round 3"). Both give the same frames and accept the same frames; they differ only in speed.
//   general: one warp per chunk, warps loop over chunks; the decoder reads the raw planes from
//            global memory a group ahead, the encoder loads its chunk four groups at a time.
//   staged:  one warp per chunk, every chunk in flight at once; the chunk's raw planes (decode)
//            or its input (encode) are staged in shared memory with one cp.async wait, so no
//            group waits on DRAM. More shared memory per block: meant for small messages, where
//            the kernels are latency-bound (4 MiB of bf16: 512 chunks, ~4 warps per SM).
// CCLZ_LOSSLESS_PATH (read once per process) picks one: auto (default: staged when the message
// has at most kStagedChunksPerSM chunks per multiprocessor), general or staged. Measured on the
// H200 (bench/results/2026-11-23-codec-round3-h200): staged is 3-10% faster at 1-4 MiB and
// 15-20% slower from 64 MiB up; auto takes the faster of the two at every size measured.
//
// CCLZ_LOSSLESS_WINDOW (read once per process): on (default) or off. On, the staged decoder
// decodes each whole coded chunk (4096 elements) with the pair-window loop
// (decode_v2_window.cuh: ~2.5x fewer instructions per symbol and a shorter dependent chain,
// which is what bounds small messages); off, with the lane loop the general kernel also uses
// (the staged decoder of round 3, kept for comparison in one run). Same frames accepted, same
// output; the general kernels and the encoders do not read it. (bench/notes/lossless-kernels.md,
// "Round 4".)
//
// CCLZ_LOSSLESS_ENCODE_WARPS (read once per process): 1, 2 or 4 (default) warps per chunk in the
// staged encoder. 1 is round 3's staged kernel (one warp per chunk); 2 and 4 split every lane's
// 16 groups into that many parts, one warp each (encode_v2_split.cuh): the costs, the code and
// the lanes' sizes are combined in shared memory and each part codes its groups at its bit
// offset inside the lane's stream, so a chunk's serial work per thread is halved (quartered).
// Same frames, byte for byte; the general kernels and the decoders do not read it. 4 is the
// default because it measured fastest at 1-4 MiB and no slower above (1 MiB 78 -> 104 GB/s,
// 4 MiB 252 -> 269; bench/results/2026-11-23-s8-splits-h200, bench/notes/lossless-kernels.md,
// "Round 5").
#pragma once

#include <cstdint>

namespace cclz::lossless::v2 {

enum class KernelPath { General, Staged, Auto };

// auto's rule: staged while every chunk fits on the GPU at once at the staged kernels'
// occupancy (at least 12 warps per multiprocessor for fp32 decode, 20 for bf16). Measured
// crossover: staged wins at 4 MiB of bf16 (512 chunks), general at 16 MiB (2048 chunks).
constexpr uint64_t kStagedChunksPerSM = 8;

// Parses CCLZ_LOSSLESS_PATH's value; throws cclzInvalidArgument on anything else.
KernelPath parseKernelPath(const char* value);

// The environment's choice, parsed once (an invalid value fails every call that asks).
KernelPath kernelPathFromEnvironment();

// Parses CCLZ_LOSSLESS_WINDOW's value (true: the window loop); throws cclzInvalidArgument on
// anything but on, off or nothing.
bool parseWindowLoop(const char* value);

// The environment's choice, parsed once (an invalid value fails every call that asks).
bool windowLoopFromEnvironment();

// Parses CCLZ_LOSSLESS_ENCODE_WARPS's value (warps per chunk in the staged encoder: 1, 2 or 4);
// throws cclzInvalidArgument on anything but those or nothing.
int parseEncodeWarps(const char* value);

// The environment's choice, parsed once (an invalid value fails every call that asks).
int encodeWarpsFromEnvironment();

// True if a message of numChunks chunks takes the staged kernels on a device of `sms`
// multiprocessors.
inline bool useStagedKernels(KernelPath path, uint64_t numChunks, int sms) {
  if (path == KernelPath::Auto) return numChunks <= kStagedChunksPerSM * static_cast<uint64_t>(sms);
  return path == KernelPath::Staged;
}

}  // namespace cclz::lossless::v2
