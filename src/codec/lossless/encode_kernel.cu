// Lossless encode on the device: one warp per chunk, no block-wide barrier
// after the start.
//
// A warp loads its chunk (lane l: groups l, l+32, ...; the lane's symbols stay in registers),
// writes the raw planes straight to the frame, finds the chunk's top symbol, adds up for every
// lane the bits under all 8 static codes at once (packed 16-bit costs), picks the cheapest code,
// learns where its block goes from its predecessors (a warp-wide decoupled look-back), codes the
// lanes into a warp-private shared-memory copy of the block and copies it out. The bytes equal
// ref.cpp's.
#include <cuda_runtime.h>

#include <algorithm>

#include "codec/lossless/device.cuh"
#include "codec/lossless/encode_lane.cuh"
#include "codec/lossless/encode_split.h"
#include "codec/lossless/kernel_path.h"
#include "codec/pdl.cuh"

namespace cclz::lossless {
namespace {

using namespace device;

// A chunk's state: flag (bits 62-63), the call's scratch epoch (48-61), the value (0-47: a size
// or an offset in bytes). A state whose epoch is not the call's was left by an earlier call on
// the same scratch and reads as nothing published (flag 0).
constexpr uint64_t kStateAggregate = 1ull << 62;  // the chunk's block size is known
constexpr uint64_t kStateInclusive = 2ull << 62;  // the end offset of its block is known
constexpr uint64_t kStateEpoch = ((1ull << 14) - 1) << 48;
constexpr uint64_t kStateValue = (1ull << 48) - 1;
constexpr int kEncodeBlocksPerSM = 8;

__device__ void writeHeader(const EncodeArgs& a, uint64_t frameBytes) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kLosslessFrameVersion;
  h.codec = cclzCodecLossless;
  h.dtype = static_cast<uint8_t>(a.dtype);
  h.count = a.count;
  h.frameBytes = frameBytes;
  h.chunkElems = a.chunkElems;
  h.numChunks = static_cast<uint32_t>(a.layout.numChunks);
  h.checksum = headerChecksum(h);
  *reinterpret_cast<FrameHeader*>(a.dst) = h;
  if (a.encodedBytesOut) *a.encodedBytesOut = frameBytes;
  a.status->encodedBytes = frameBytes;
}

// Every warp of the grid, once, when it is done with the scratch (its last chunk taken, its last
// look-back and publication made). The last warp out zeroes the two counters for the next call;
// the chunk states stay, marked with this call's epoch. A call on memset scratch (epoch 0) zeroes
// them too: its scratch may be a handle's, whose next call takes an epoch and no memset (a call
// captured in a graph, replayed between direct calls).
__device__ void leaveScratch(const EncodeArgs& a, uint32_t lane) {
  if (lane != 0) return;
  // NOTE: no fence before the count. The one atomic on a counter that must come before it is
  // the one that took this warp's (or its slot's) last chunk, and its result was read before this
  // point (the loop ended on it), so it was performed first. The chunk states and the frame reach
  // the next kernel by the kernel boundary. The fence (an ERRBAR waiting on the warp's block copy)
  // was 4.5% of the 4 MiB split kernel's stall samples, at the end of every chunk's chain.
  const uint32_t warps = gridDim.x * (blockDim.x / 32);
  if (atomicAdd(a.warpsDone, 1u) + 1 == warps) {  // no warp takes a chunk any more
    atomicExch(a.workCounter, 0u);
    atomicExch(a.warpsDone, 0u);
  }
}

// The whole warp: the offset of chunk k's block, found from its predecessors' states (a
// decoupled look-back); then lane 0 publishes chunk k's end offset (unless `publish` is false: the
// split encoder's other warps, which find the same offset). Chunk k's own size was published
// before.
// - First round: lane j reads the state of chunk k-1-j. If one of them has its end offset, the
//   sizes of the chunks after it are added to it.
// - Otherwise, with `sum32` null (one level), the next round reads the 32 chunks before those.
// - With `sum32` (two levels): otherwise chunk k publishes the sum of its own size and its 31
//   predecessors' (at sum32 + k), and each later round takes 32 such sums at once: lane j reads
//   the state and the sum of the chunk that ends its lane's 32 chunks, and takes the end offset
//   where there is one, the sum where not. Every chunk of the call must then take two levels (a
//   short last chunk need not: no chunk waits for it), and look back without waiting for its own
//   code (encodeSplitKernel's look-back warp): a sum is published only after its chunk's first
//   round.
// NOTE: why two levels. Where all chunks publish their sizes at nearly the same time (a 4 MiB
// call's 512 chunks run at once), a chunk found no end offset nearer than chunk 0's, so the last
// one walked back 32 chunks per L2 round trip: 16 rounds at 4 MiB, 36% of the split kernel's
// stall samples. With two levels every chunk publishes a sum or an end
// offset after its first round, which waits only for sizes, so a round of sums reaches 1024
// chunks back. Measured where it pays (docs/kernels/lossless.md, "Encoder"): the
// split kernel with 4 warps per chunk from 256 chunks on (auto's choice up to 4 chunks per SM).
// Elsewhere chunks run staggered, the first round nearly always finds an end offset, and the
// sums cost 4-12% (at 16-64 MiB, with 2 warps per chunk).
template <bool kMayNotPublish = false>
__device__ uint64_t lookBack(uint64_t* state, uint64_t* sum32, uint64_t epochBits, uint64_t k,
                             uint64_t size, uint32_t lane, bool publish = true) {
  const bool publishes = !kMayNotPublish || publish;
  uint64_t exclusive = 0;
  int64_t base = static_cast<int64_t>(k) - 1;
  int64_t stride = 1;  // chunks per lane: 1 in the first round, 32 after
  while (base >= 0) {
    const int64_t j = base - stride * static_cast<int64_t>(lane);
    uint64_t v = kStateInclusive | epochBits;  // before chunk 0: an end offset of zero
    uint64_t s = 0;
    if (j >= 0) {
      v = *reinterpret_cast<volatile uint64_t*>(state + j);
      if (stride > 1) s = *reinterpret_cast<volatile uint64_t*>(sum32 + j);
    }
    const uint32_t flag = (v & kStateEpoch) == epochBits ? static_cast<uint32_t>(v >> 62) : 0u;
    const bool hasSum = (s & kStateEpoch) == epochBits && (s >> 62) == 1;
    const uint32_t inclusive = __ballot_sync(kFullMask, flag == 2);
    const uint32_t nearest = inclusive ? __ffs(inclusive) - 1 : 32u;
    // What the lane adds: its chunk's size or end offset (first round), its 32 chunks' sum or
    // its chunk's end offset (later rounds). A lane nearer than the nearest end offset without
    // it has had nothing published yet: look again.
    const bool known = stride == 1 ? flag != 0 : (flag == 2 || hasSum);
    if (__any_sync(kFullMask, !known && lane <= nearest)) {
      __nanosleep(64);
      continue;
    }
    const uint64_t mine = lane > nearest ? 0 : (flag == 2 || stride == 1 ? v : s) & kStateValue;
    uint64_t sum = mine;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(kFullMask, sum, d);
    exclusive += sum;
    if (nearest < 32) break;
    if (sum32 && stride == 1) {
      // This chunk's and its 31 predecessors' sizes (all but lane 31's chunk, k-32).
      const uint64_t k32 = __shfl_sync(kFullMask, mine, 31);
      if (lane == 0 && publishes)
        atomicExch(reinterpret_cast<unsigned long long*>(sum32 + k),
                   kStateAggregate | epochBits | (size + sum - k32));
    }
    base -= 32 * stride;
    stride = sum32 ? 32 : 1;
  }
  if (lane == 0 && publishes)
    atomicExch(reinterpret_cast<unsigned long long*>(state + k),
               kStateInclusive | epochBits | (exclusive + size));
  return exclusive;
}

// The hot path of a whole chunk without escapes, in kRounds passes over kRoundGroups groups of
// the lane (a loop that is not unrolled), each pass's groups picked from sym by selects (sym
// itself stays as it is: rotated in place, it went to local memory). NOTE: why: the general
// kernel's hot path was 48 KiB of unrolled code, and its warps waited on the instruction cache
// (no_inst 21% of the stall samples, docs/kernels/lossless.md, "Encoder"). Two
// passes: 256 MiB +1.1-1.8%, the real tensors +2.8%. Four brought no_inst down to 3%, but cost 22%
// more instructions and 11% of the speed (docs/kernels/lossless.md, "Encoder").
constexpr int kRounds = 2;
constexpr int kRoundGroups = static_cast<int>(kMaxGroupsPerLane) / kRounds;

__device__ __forceinline__ void roundGroups(const uint32_t (&sym)[kMaxGroupsPerLane][2], int r,
                                            uint32_t (&out)[kRoundGroups][2]) {
#pragma unroll
  for (int j = 0; j < kRoundGroups; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint32_t v = sym[j][h];
#pragma unroll
      for (int q = 1; q < kRounds; ++q) v = r == q ? sym[q * kRoundGroups + j][h] : v;
      out[j][h] = v;
    }
}

template <int D>
__device__ __forceinline__ void laneCostsByRounds(const EncodeTables& tables,
                                                  const uint32_t (&sym)[kMaxGroupsPerLane][2],
                                                  uint32_t top, uint32_t (&packed)[4]) {
  packed[0] = packed[1] = packed[2] = packed[3] = 0;
#pragma unroll 1
  for (int r = 0; r < kRounds; ++r) {
    uint32_t cur[kRoundGroups][2], part[4];
    roundGroups(sym, r, cur);
    laneCostsNoEscapes<D>(tables, cur, top, part);
#pragma unroll
    for (int i = 0; i < 4; ++i) packed[i] += part[i];
  }
}

__device__ __forceinline__ void codeLaneByRounds(const uint32_t* code,
                                                 const uint32_t (&sym)[kMaxGroupsPerLane][2],
                                                 uint32_t top, uint32_t offsets, LaneWriter& w) {
#pragma unroll 1
  for (int r = 0; r < kRounds; ++r) {
    uint32_t cur[kRoundGroups][2];
    roundGroups(sym, r, cur);
    codeLane<true, true, kRoundGroups>(code, cur, top, offsets, kMaxChunkElems, 0, kRoundGroups, w);
  }
}

// One chunk, by the whole warp, from the source (docs/formats.md; the bytes equal ref.cpp's).
// kFull: a whole chunk of kMaxChunkElems from a 16-byte aligned source.
template <int D, bool kFull>
__device__ __forceinline__ void encodeChunk(const EncodeArgs& a, const EncodeTables& tables,
                                            uint8_t* stage, uint64_t k, uint32_t n, uint32_t lane) {
  using Word = typename Elements<D>::Word;
  uint32_t* stageWords = reinterpret_cast<uint32_t*>(stage);
  const uint32_t chunkElems = a.chunkElems;
  const uint32_t groupsPerLane = kFull ? kMaxGroupsPerLane : chunkElems / (kGroup * kLanes);
  const uint32_t offsets = familyOffsets(D);
  const uint64_t first = k * chunkElems;
  const uint8_t* in = static_cast<const uint8_t*>(a.src) + first * sizeof(Word);
  uint8_t* planeA = a.dst + a.layout.planeAOffset + first;
  uint16_t* planeB = reinterpret_cast<uint16_t*>(a.dst + a.layout.planeBOffset) + first;

  // ---- Split: raw planes to the frame, symbols to registers, the top and bottom symbol. ----
  uint32_t sym[kMaxGroupsPerLane][2];
  uint32_t top, bottom;
  splitLane<D, kFull, false>(a, in, n, lane, groupsPerLane, planeA, planeB, sym, top, bottom);
  top = warpMax(top);
  bottom = warpMin(bottom);
  // A symbol escapes when top - symbol >= D: the chunk has escapes when its smallest does.
  const bool escapes = top - bottom >= offsets;

  // ---- The code: every lane's bits under the 8 codes, the cheapest for the chunk. ----
  uint32_t mode = kModeConstant, table = 0, width = 0, base = 0, myBits = 0, prefix = 0;
  uint32_t blockBytes = kBlockAlign;
  if (top != bottom) {
    uint32_t packed[4];  // 16-bit costs of codes 0..7
    if (kFull && !escapes)
      laneCostsByRounds<D>(tables, sym, top, packed);
    else
      laneCosts<kFull, D == cclzFloat16>(tables, sym, top, offsets, n, lane, groupsPerLane, packed);
    uint32_t best = 0xffffffffu;
#pragma unroll
    for (uint32_t t = 0; t < kTables; ++t) {
      const uint32_t total = warpSum((packed[t / 2] >> (16 * (t % 2))) & 0xFFFFu);
      if (total < best) best = total, table = t;  // the lowest code on ties, as ref.cpp
    }
#pragma unroll
    for (uint32_t t = 0; t < kTables;
         ++t)  // (a register array indexed at run time is local memory)
      if (t == table) myBits = (packed[t / 2] >> (16 * (t % 2))) & 0xFFFFu;
    base = warpMin(myBits);
    width = bitWidth(warpMax(myBits) - base);
    prefix = warpInclusiveScan(myBits, lane) - myBits;
    const uint32_t coded = streamsOffset(width) + (best + 7) / 8;
    mode = coded < kBlockHeaderBytes + n ? kModeHuffman : kModeStored;
    blockBytes = static_cast<uint32_t>(
        alignUp(mode == kModeHuffman ? coded : kBlockHeaderBytes + n, kBlockAlign));
  }
  if (lane == 0)  // later chunks may count this one while it is still being written
    atomicExch(reinterpret_cast<unsigned long long*>(a.chunkState + k),
               (k == 0 ? kStateInclusive : kStateAggregate) | a.epochBits | blockBytes);

  // ---- The block, in the warp's shared memory. ----
  for (uint32_t i = lane * 16; i < blockBytes; i += 32 * 16)
    *reinterpret_cast<uint4*>(stage + i) = make_uint4(0, 0, 0, 0);
  __syncwarp();
  if (mode == kModeConstant) {
    if (lane == 0) stageWords[0] = kModeConstant | (top << 8);
  } else if (mode == kModeStored) {
    if (lane == 0) stage[0] = kModeStored;
#pragma unroll
    for (int j = 0; j < static_cast<int>(kMaxGroupsPerLane); ++j) {
      const uint32_t g = lane + kLanes * j;
      const uint32_t valid =
          kFull ? kGroup : (j < static_cast<int>(groupsPerLane) ? groupValid(n, g) : 0);
      if (valid == kGroup) {  // 4-byte aligned: the block header is 4 bytes
        stageWords[1 + 2 * g] = sym[j][0];
        stageWords[2 + 2 * g] = sym[j][1];
      } else {
        for (uint32_t i = 0; i < valid; ++i)
          stage[kBlockHeaderBytes + g * kGroup + i] = static_cast<uint8_t>(symbolAt(sym, j, i));
      }
    }
  } else {
    if (lane == 0) {
      stageWords[0] =
          kModeHuffman | ((table | (escapes ? kEscapeFlag : 0)) << 8) | (top << 16) | (width << 24);
      stageWords[1] = base;
    }
    if (width) {  // this lane's size delta, w bits at bit 64 + lane * w
      const uint32_t bit = 8 * kHeaderBytes + lane * width, delta = myBits - base;
      atomicOr(&stageWords[bit / 32], delta << (bit % 32));
      if (bit % 32 + width > 32) atomicOr(&stageWords[bit / 32 + 1], delta >> (32 - bit % 32));
    }
    // The lane's stream, from its bit offset (LaneWriter: whole words stored, the last OR-ed).
    LaneWriter w(stageWords, 8 * streamsOffset(width) + prefix);
    const uint32_t* code = tables.code[table];
    if (kFull && !escapes)
      codeLaneByRounds(code, sym, top, offsets, w);
    else
      codeLane<kFull, false>(code, sym, top, offsets, n, lane, groupsPerLane, w);
    __syncwarp();
    w.finish();
  }
  __syncwarp();

  // ---- Place the block after its predecessors and copy it out. ----
  const uint64_t start =
      k == 0 ? 0 : lookBack(a.chunkState, nullptr, a.epochBits, k, blockBytes, lane);
  uint8_t* out = a.dst + a.layout.blocksOffset + start;
  for (uint32_t i = lane * 16; i < blockBytes; i += 32 * 16)
    *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(stage + i);
  if (lane == 0) {
    reinterpret_cast<uint64_t*>(a.dst + a.layout.tableOffset)[k] = start + blockBytes;
    if (k + 1 == a.layout.numChunks) writeHeader(a, a.layout.blocksOffset + start + blockBytes);
  }
  if (k == 0) {  // the alignment gaps of the frame are zero, as in the reference
    const Layout& l = a.layout;
    const uint64_t planeBEnd = l.planeBOffset + (D == cclzFloat32 ? 2 * a.count : 0);
    for (uint64_t i = l.tableOffset + 8 * l.numChunks + lane; i < l.planeAOffset; i += 32)
      a.dst[i] = 0;
    for (uint64_t i = l.planeAOffset + a.count + lane; i < l.planeBOffset; i += 32) a.dst[i] = 0;
    for (uint64_t i = planeBEnd + lane; i < l.blocksOffset; i += 32) a.dst[i] = 0;
  }
  __syncwarp();  // the stage is rewritten by the next chunk
}

// The staged kernel's shared memory per warp: a whole chunk of input, which is also the stage
// its block is built in once the input is split (the block is at most kStageBytes).
template <int D>
constexpr uint32_t stagedEncodeWarpBytes() {
  return std::max<uint32_t>(kStageBytes, kMaxChunkElems * sizeof(typename Elements<D>::Word));
}

// The stages start on a 128-byte line (the dynamic shared array's alignment, which pads the
// static part before it: the code tables and the split kernel's exchange), and each is whole
// lines. NOTE: measured (docs/kernels/lossless.md, "Encoder"):
// the static part ended 16-80 bytes past a line, so every 512-byte row of a warp's 16-byte
// copies into the stage, and of its reads from it, touched 5 lines, not 4. Aligned: bf16 8-64
// MiB +3-9% (668 -> 728 GB/s at 8 MiB), fp32 16-256 MiB +8-9% (1790 -> 1945 at 256 MiB), bf16
// 4 MiB 504 -> 525 queued; the general kernel (256 MiB bf16) has no stage and did not move.
constexpr uint32_t kStageAlign = 128;
static_assert(stagedEncodeWarpBytes<cclzBfloat16>() % kStageAlign == 0 &&
                  stagedEncodeWarpBytes<cclzFloat16>() % kStageAlign == 0 &&
                  stagedEncodeWarpBytes<cclzFloat32>() % kStageAlign == 0,
              "every stage starts on a line");

// The split kernel copies chunk k's input to the slot's stage (cp.async, committed) if it is a
// whole chunk from an aligned source; returns whether it did. The kThreadsPerChunk threads of the
// chunk's warps take part (lane: the thread's index among them).
__device__ bool stagesChunk(const EncodeArgs& a, uint64_t k) {
  return k < a.layout.numChunks && a.srcAligned16 && a.chunkElems == kMaxChunkElems &&
         a.count - k * a.chunkElems >= kMaxChunkElems;
}
template <int D, uint32_t kThreadsPerChunk>
__device__ bool stageInput(const EncodeArgs& a, uint8_t* stage, uint64_t k, uint32_t lane) {
  using Word = typename Elements<D>::Word;
  const uint64_t first = k * a.chunkElems;
  if (!stagesChunk(a, k)) return false;
  const uint8_t* in = static_cast<const uint8_t*>(a.src) + first * sizeof(Word);
  for (uint32_t i = lane * 16; i < kMaxChunkElems * sizeof(Word); i += kThreadsPerChunk * 16)
    lossless::device::copyAsync16(stage + i, in + i);
  lossless::device::copyAsyncCommit();
  return true;
}

// The block's code tables of D's family, from the constant bank into shared memory (every
// thread of the block takes part; the caller synchronizes).
template <int D>
__device__ __forceinline__ void fillTables(EncodeTables& tables) {
  const int fam = family(D);
  const uint32_t offsets = familyOffsets(D);
  for (uint32_t i = threadIdx.x; i <= offsets; i += blockDim.x) {
    const uint32_t* c = kDeviceCodes.cost[fam][i];
    tables.cost[i] = make_uint4(c[0], c[1], c[2], c[3]);
    for (uint32_t t = 0; t < kTables; ++t)
      tables.code[t][i] = encoderEntry(kDeviceCodes.code[fam][t][i]);
  }
  for (uint32_t i = threadIdx.x; i <= offsets; i += blockDim.x) {
    uint32_t lo, hi;
    costbytes::entry(kDeviceCodes.cost[fam], i, lo, hi);
    tables.cost8[i] = make_uint2(lo, hi);
  }
}

// The general kernel: warps take chunks from a counter, in order. NOTE: at most 64 registers (8
// blocks, 32 warps per multiprocessor): the encoder is latency bound at 16 warps (8.3 cycles per
// issued instruction at 115 registers; docs/kernels/lossless.md, "Encoder"). It loads a lane's 16
// groups in four dependent batches (to stay within 64 registers), so it waits on DRAM four times
// per chunk (fp32: eight), which at 4 MiB (~4 warps per SM) nothing hides: the staged split
// kernel below takes small messages.
template <int D>
__global__ void __launch_bounds__(kThreads, kEncodeBlocksPerSM) encodeKernel(EncodeArgs a) {
  // NOTE: launched programmatic where it can be (codec/pdl.cuh): the kernel waits for the one
  // before it before it touches global memory, and lets the next one start as its blocks end.
  waitForPreviousKernel();
  __shared__ EncodeTables tables;
  __shared__ __align__(16) uint8_t stageAll[kWarpsPerBlock][kStageBytes];
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint8_t* stage = stageAll[warp];
  fillTables<D>(tables);
  __syncthreads();
  if (a.layout.numChunks == 0) {  // an empty tensor: the header alone
    if (blockIdx.x == 0 && threadIdx.x == 0) writeHeader(a, a.layout.blocksOffset);
    leaveScratch(a, lane);
    return;
  }
  while (true) {
    // Chunks are taken in order, so a warp only ever waits for chunks already being encoded.
    uint32_t taken = 0;
    if (lane == 0) taken = atomicAdd(a.workCounter, 1u);
    const uint64_t k = __shfl_sync(kFullMask, taken, 0);
    if (k >= a.layout.numChunks) {
      leaveScratch(a, lane);
      return;
    }
    const uint64_t first = k * a.chunkElems;
    const uint32_t n =
        static_cast<uint32_t>(min(static_cast<uint64_t>(a.chunkElems), a.count - first));
    // Whole default-size chunks from an aligned source take the branch-free path; the last
    // chunk, other chunk sizes and unaligned sources the general one (same bytes).
    if (n == kMaxChunkElems && a.srcAligned16)
      encodeChunk<D, true>(a, tables, stage, k, n, lane);
    else
      encodeChunk<D, false>(a, tables, stage, k, n, lane);
  }
}

// ---- The split staged encoder (kernel_path.h, CCLZ_LOSSLESS_ENCODE_WARPS = 2 or 4). ----
// kParts warps encode one chunk: part p's lane l takes lane l's groups p * 16/kParts ... (the
// arithmetic: encode_split.h). A block of kWarpsPerBlock warps holds kWarpsPerBlock / kParts
// chunk slots, each with its own stage, exchange area and named barrier.

// What the parts of a chunk tell each other, in shared memory.
template <int kParts>
struct SplitExchange {
  uint4 packed[kParts][kLanes];          // each thread's costs under the 8 codes
  uint32_t top[kParts], bottom[kParts];  // each part's largest and smallest symbol
  uint64_t start;                        // the block's offset (the look-back warp's)
  uint32_t blockBytes;                   // the block's size, for the look-back warp
};

// kEarly's look-back warp (the block's fifth warp) and part 0 meet on barrier 3 (part 0 hands
// over the block's size), the look-back warp and the 4 parts on barrier 4 (it hands over the
// block's offset, before the copy-out). The side that hands over only arrives: a barrier's
// arrival orders the thread's earlier shared-memory stores before the reads of the threads that
// wait on it (the producer-consumer use of named barriers); checked on the device by the frames
// of every 4-warp call in the GPU tests (LosslessGpuScratch.ManyChunksAtOnce* included).
__device__ __forceinline__ void handOverSize() { asm volatile("bar.arrive 3, 64;" ::: "memory"); }
__device__ __forceinline__ void waitForSize() { asm volatile("bar.sync 3, 64;" ::: "memory"); }
__device__ __forceinline__ void handOverStart() { asm volatile("bar.arrive 4, 160;" ::: "memory"); }
__device__ __forceinline__ void waitForStart() { asm volatile("bar.sync 4, 160;" ::: "memory"); }

// The barrier of one slot's kParts warps (barrier 0 is __syncthreads's). NOTE: a named barrier
// of 64 (128) threads, not __syncthreads: the slots of a block go at their own pace. Immediate
// ids (1 and 2), so that ptxas counts the barriers the kernel uses (a register id counts all 16).
template <int kParts>
__device__ __forceinline__ void partsSync(uint32_t slot) {
  static_assert(kWarpsPerBlock / kParts <= 2, "two slots per block at most");
  if (kWarpsPerBlock / kParts == 1 || slot == 0)
    asm volatile("bar.sync 1, %0;" ::"n"(32 * kParts) : "memory");
  else
    asm volatile("bar.sync 2, %0;" ::"n"(32 * kParts) : "memory");
}

// One whole staged chunk (its input committed to the stage by stageInput<D, 32 * kParts>), by
// the slot's kParts warps; the bytes equal ref.cpp's, as encodeChunk's. kEarly: the look-back
// before the code, two levels (below).
template <int D, int kParts, bool kEarly>
__device__ __forceinline__ void encodeChunkSplit(const EncodeArgs& a, const EncodeTables& tables,
                                                 uint8_t* stage, SplitExchange<kParts>& ex,
                                                 uint32_t slot, uint64_t k, uint32_t part,
                                                 uint32_t lane) {
  using Word = typename Elements<D>::Word;
  constexpr int kG = static_cast<int>(splitGroupsPerPart(kParts));
  constexpr uint32_t kChunkThreads = 32 * kParts;
  constexpr uint32_t n = kMaxChunkElems;
  uint32_t* stageWords = reinterpret_cast<uint32_t*>(stage);
  const uint32_t offsets = familyOffsets(D);
  const uint32_t thread = part * 32 + lane;
  const uint32_t firstElem = splitGroup(0, part, kG, 0) * kGroup;  // the part's first element
  const uint64_t first = k * kMaxChunkElems;
  uint8_t* planeA = a.dst + a.layout.planeAOffset + first + firstElem;
  uint16_t* planeB = reinterpret_cast<uint16_t*>(a.dst + a.layout.planeBOffset) + first + firstElem;

  // ---- Split the part's groups; the chunk's top and bottom symbol from every part's. ----
  lossless::device::copyAsyncWaitAll();
  partsSync<kParts>(slot);  // every thread's copies have landed
  uint32_t sym[kG][2];
  uint32_t top, bottom;
  splitLane<D, true, true, kG>(a, stage + firstElem * sizeof(Word), n, lane, kG, planeA, planeB,
                               sym, top, bottom);
  top = warpMax(top);
  bottom = warpMin(bottom);
  if (lane == 0) ex.top[part] = top, ex.bottom[part] = bottom;
  partsSync<kParts>(slot);  // and every thread has read its input: the stage is free
#pragma unroll
  for (int q = 0; q < kParts; ++q) top = max(top, ex.top[q]), bottom = min(bottom, ex.bottom[q]);
  const bool escapes = top - bottom >= offsets;

  // ---- The code: the lane's bits under the 8 codes are the sum of its parts'. ----
  uint32_t mode = kModeConstant, table = 0, width = 0, base = 0, myBits = 0, prefix = 0;
  uint32_t partOffset = 0;  // the bits of the lane's earlier parts, under the chosen code
  uint32_t blockBytes = kBlockAlign;
  if (top != bottom) {  // the same for every part: the barrier below is reached by all
    uint32_t packed[4];
    if (!escapes)
      laneCostsNoEscapes<D>(tables, sym, top, packed);
    else
      laneCosts<true, D == cclzFloat16, kG>(tables, sym, top, offsets, n, lane, kG, packed);
    ex.packed[part][lane] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    partsSync<kParts>(slot);
    uint32_t total[4] = {0, 0, 0, 0}, before[4] = {0, 0, 0, 0};
#pragma unroll
    for (int q = 0; q < kParts; ++q) {
      const uint4 c = ex.packed[q][lane];
      addPacked(total, c.x, c.y, c.z, c.w);
      if (q < static_cast<int>(part)) addPacked(before, c.x, c.y, c.z, c.w);
    }
    // From here on every part computes the same choice for the chunk (encodeChunk's).
    uint32_t best = 0xffffffffu;
#pragma unroll
    for (uint32_t t = 0; t < kTables; ++t) {
      const uint32_t sum = warpSum(packedField(total, t));
      if (sum < best) best = sum, table = t;  // the lowest code on ties, as ref.cpp
    }
#pragma unroll
    for (uint32_t t = 0; t < kTables; ++t)  // (a register array indexed at run time is local)
      if (t == table) myBits = packedField(total, t), partOffset = packedField(before, t);
    base = warpMin(myBits);
    width = bitWidth(warpMax(myBits) - base);
    prefix = warpInclusiveScan(myBits, lane) - myBits;
    const uint32_t coded = streamsOffset(width) + (best + 7) / 8;
    mode = coded < kBlockHeaderBytes + n ? kModeHuffman : kModeStored;
    blockBytes = static_cast<uint32_t>(
        alignUp(mode == kModeHuffman ? coded : kBlockHeaderBytes + n, kBlockAlign));
  }
  if (part == 0 && lane == 0)  // later chunks may count this one while it is still being written
    atomicExch(reinterpret_cast<unsigned long long*>(a.chunkState + k),
               (k == 0 ? kStateInclusive : kStateAggregate) | a.epochBits | blockBytes);
  // kEarly (4 warps per chunk and 256 chunks or more: every chunk of the message runs at once):
  // the block's place is found by the block's fifth warp (encodeSplitKernel) while the parts
  // code: part 0 hands it the block's size here, and it publishes the end offset as soon as it
  // has it, so that later chunks do not wait for this one's code. NOTE: measured. Part 0 looking
  // back here, before its code (docs/kernels/lossless.md, "Encoder"): bf16 4 MiB
  // 438-443 -> 467-476 GB/s queued, but the other parts waited for it at the barrier before the
  // code (two thirds of the kernel's barrier stalls, 35% of all). The fifth warp
  // (docs/kernels/lossless.md, "Encoder"): 476-478 -> 504-509 queued, 2 MiB
  // +5-12%, fp32 4 MiB +10%, fp16 4 MiB +16%. Below 256 chunks (1 MiB) two levels lost 5%, the
  // early look-back with one level 7-8% at 512 KiB; a uniform branch between the two placements in
  // one kernel made ptxas spill (-9-15% at 1 MiB), hence a kernel each. With 2 warps per chunk
  // (8-128 MiB) the early look-back lost 4-12%.
  if (kEarly && part == 0) {
    if (lane == 0) ex.blockBytes = blockBytes;
    handOverSize();
  }

  // ---- The block, in the slot's stage: each part writes its groups. ----
  for (uint32_t i = thread * 16; i < blockBytes; i += kChunkThreads * 16)
    *reinterpret_cast<uint4*>(stage + i) = make_uint4(0, 0, 0, 0);
  partsSync<kParts>(slot);
  if (mode == kModeConstant) {
    if (thread == 0) stageWords[0] = kModeConstant | (top << 8);
  } else if (mode == kModeStored) {
    if (thread == 0) stage[0] = kModeStored;
#pragma unroll
    for (int j = 0; j < kG; ++j) {  // 4-byte aligned: the block header is 4 bytes
      const uint32_t g = splitGroup(lane, part, kG, j);
      stageWords[1 + 2 * g] = sym[j][0];
      stageWords[2 + 2 * g] = sym[j][1];
    }
  } else {
    if (thread == 0) {
      stageWords[0] =
          kModeHuffman | ((table | (escapes ? kEscapeFlag : 0)) << 8) | (top << 16) | (width << 24);
      stageWords[1] = base;
    }
    if (part == 0 && width) {  // this lane's size delta, w bits at bit 64 + lane * w
      const uint32_t bit = 8 * kHeaderBytes + lane * width, delta = myBits - base;
      atomicOr(&stageWords[bit / 32], delta << (bit % 32));
      if (bit % 32 + width > 32) atomicOr(&stageWords[bit / 32 + 1], delta >> (32 - bit % 32));
    }
    // The part's segment of the lane's stream. LaneWriter's rule holds for any disjoint
    // segments, so for the 32 * kParts of them: a word is stored whole only by the segment that
    // reaches its end; the others' partial words are OR-ed in after the barrier.
    LaneWriter w(stageWords, splitSegmentBit(width, prefix, partOffset));
    const uint32_t* code = tables.code[table];
    if (!escapes)
      codeLane<true, true, kG>(code, sym, top, offsets, n, lane, kG, w);
    else
      codeLane<true, false, kG>(code, sym, top, offsets, n, lane, kG, w);
    partsSync<kParts>(slot);
    w.finish();
  }
  if constexpr (kEarly)
    waitForStart();  // the parts' barrier too
  else
    partsSync<kParts>(slot);

  // ---- Place the block after its predecessors and copy it out. ----
  // NOTE: after the code, every part looks back (the same offset; only part 0 publishes it)
  // rather than part 0 alone and a barrier: the look-back is a chain of global loads, a barrier
  // would add to it.
  const uint64_t start =
      kEarly   ? ex.start
      : k == 0 ? 0
               : lookBack<true>(a.chunkState, nullptr, a.epochBits, k, blockBytes, lane, part == 0);
  uint8_t* out = a.dst + a.layout.blocksOffset + start;
  for (uint32_t i = thread * 16; i < blockBytes; i += kChunkThreads * 16)
    *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(stage + i);
  if (thread == 0) {
    reinterpret_cast<uint64_t*>(a.dst + a.layout.tableOffset)[k] = start + blockBytes;
    if (k + 1 == a.layout.numChunks) writeHeader(a, a.layout.blocksOffset + start + blockBytes);
  }
  if (k == 0) {  // the alignment gaps of the frame are zero, as in the reference
    const Layout& l = a.layout;
    const uint64_t planeBEnd = l.planeBOffset + (D == cclzFloat32 ? 2 * a.count : 0);
    for (uint64_t i = l.tableOffset + 8 * l.numChunks + thread; i < l.planeAOffset;
         i += kChunkThreads)
      a.dst[i] = 0;
    for (uint64_t i = l.planeAOffset + a.count + thread; i < l.planeBOffset; i += kChunkThreads)
      a.dst[i] = 0;
    for (uint64_t i = planeBEnd + thread; i < l.blocksOffset; i += kChunkThreads) a.dst[i] = 0;
  }
}

// The split kernel's block: kWarpsPerBlock warps, and with kEarly a fifth, the look-back warp;
// 6 blocks of 5 warps per SM keep 64 registers a thread.
template <bool kEarly>
constexpr int kSplitThreads = kEarly ? kThreads + 32 : kThreads;
template <bool kEarly>
constexpr int kSplitBlocksPerSM = kEarly ? 6 : kEncodeBlocksPerSM;

// The staged kernel: kParts warps per chunk, one chunk per slot. The slot starts copying its
// chunk's input to its stage (cp.async) before the block's code tables are filled, and splits it
// from there with one wait, so no group waits on DRAM. A chunk that is not staged (a short last
// chunk, an unaligned source, another chunk size) is encoded by the slot's first warp alone with
// the general code, the others idle. NOTE: the slot's chunk is its place in the grid, not a chunk
// counter's next value. Blocks are dispatched in increasing index order (CUB's single-pass scan
// relies on the same), so a chunk waits in its look-back only for chunks of blocks already running.
// A counter cost each slot two L2 atomics (its chunk, then the one that found none left) and each
// warp a third (leaveScratch's count), on the chain of every 4 MiB call, where every slot has one
// chunk. This kernel leaves the scratch's counters as it found them, zero, and needs no
// leaveScratch. kEarly: blocks of kSplitThreads (the 4 parts and the look-back warp).
template <int D, int kParts, bool kEarly>
__global__ void __launch_bounds__(kSplitThreads<kEarly>, kSplitBlocksPerSM<kEarly>)
    encodeSplitKernel(EncodeArgs a) {
  static_assert(kWarpsPerBlock % kParts == 0, "a block holds whole slots");
  static_assert(!kEarly || kParts == kWarpsPerBlock, "the look-back warp serves one slot");
  waitForPreviousKernel();  // as encodeKernel
  constexpr uint32_t kSlots = kWarpsPerBlock / kParts;
  constexpr uint32_t kChunkThreads = 32 * kParts;
  __shared__ EncodeTables tables;
  __shared__ SplitExchange<kParts> exchange[kSlots];
  // stagedEncodeWarpBytes<D>() per slot
  extern __shared__ __align__(kStageAlign) uint8_t stagedAll[];
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (kEarly && warp == kWarpsPerBlock) {  // the look-back warp
    const uint64_t k = blockIdx.x;
    fillTables<D>(tables);
    __syncthreads();
    if (!stagesChunk(a, k)) return;  // part 0 encodes it alone (encodeChunk), or no chunk
    SplitExchange<kParts>& ex = exchange[0];
    waitForSize();
    const uint64_t start = k == 0 ? 0
                                  : lookBack(a.chunkState, a.chunkState + a.layout.numChunks,
                                             a.epochBits, k, ex.blockBytes, lane);
    if (lane == 0) ex.start = start;
    handOverStart();
    return;
  }
  const uint32_t slot = warp / kParts, part = warp % kParts, thread = part * 32 + lane;
  uint8_t* stage = stagedAll + slot * stagedEncodeWarpBytes<D>();
  const uint64_t k = uint64_t{blockIdx.x} * kSlots + slot;
  const bool staged = stageInput<D, kChunkThreads>(a, stage, k, thread);
  fillTables<D>(tables);
  __syncthreads();
  if (k >= a.layout.numChunks) return;  // the last block's second slot, with kParts 2
  if (staged) {
    encodeChunkSplit<D, kParts, kEarly>(a, tables, stage, exchange[slot], slot, k, part, lane);
  } else if (part == 0) {
    const uint64_t first = k * a.chunkElems;
    const uint32_t n =
        static_cast<uint32_t>(min(static_cast<uint64_t>(a.chunkElems), a.count - first));
    encodeChunk<D, false>(a, tables, stage, k, n, lane);
  }
}

// The split staged kernel: one block per kWarpsPerBlock / kParts chunks (a message with no
// chunks takes the general kernel). NOTE: every chunk has its slot in the grid (numChunks <
// 2^31, a grid's x dimension takes 2^31 - 1 blocks).
template <int D, int kParts, bool kEarly = false>
void launchSplit(const EncodeArgs& args, cudaStream_t stream) {
  constexpr uint64_t kSlots = kWarpsPerBlock / kParts;
  const auto blocks = static_cast<unsigned>((args.layout.numChunks + kSlots - 1) / kSlots);
  constexpr int kShared = kSlots * stagedEncodeWarpBytes<D>();  // fp32, 2 warps: 32 KiB
  static std::atomic<uint64_t> configured{0};
  lossless::device::ensureSharedMemoryLimit(encodeSplitKernel<D, kParts, kEarly>, kShared,
                                            configured);
  launchKernel(encodeSplitKernel<D, kParts, kEarly>, blocks, kSplitThreads<kEarly>, kShared, stream,
               programmaticLaunchSupported(), args);
}

template <int D>
void launchEncode(const EncodeArgs& args, cudaStream_t stream) {
  const uint64_t chunks = args.layout.numChunks;
  const uint64_t warps = chunks ? chunks : 1;
  const unsigned blocks = static_cast<unsigned>(
      std::min<uint64_t>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock, 1u << 20));
  const bool wholeChunks = args.chunkElems == kMaxChunkElems && args.srcAligned16;
  if (chunks > 0 && useStagedKernels(kernelPathFromEnvironment(), Direction::Encode, D, wholeChunks,
                                     chunks, multiprocessorCount())) {
    const int warpsPerChunk =
        encodeWarpsPerChunk(encodeWarpsFromEnvironment(), chunks, multiprocessorCount());
    if (warpsPerChunk == 2) {
      launchSplit<D, 2>(args, stream);
    } else if (chunks >= 256) {  // 4 warps, the look-back before the code (encodeChunkSplit)
      launchSplit<D, 4, true>(args, stream);
    } else {
      launchSplit<D, 4>(args, stream);
    }
  } else {
    // As many blocks as are resident at once; the warps loop over the chunks. Against one chunk
    // per warp: bf16 256 MiB 1255 -> 1325-1354 GB/s, the same from 4 to 64 MiB and for fp32
    // (docs/kernels/lossless.md, "Encoder"). The decoder measured the other way.
    const unsigned resident = std::min<unsigned>(
        blocks, static_cast<unsigned>(multiprocessorCount()) * kEncodeBlocksPerSM);
    launchKernel(encodeKernel<D>, resident, kThreads, 0, stream, programmaticLaunchSupported(),
                 args);
  }
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void encodeDevice(uint32_t chunkElems, int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, uint8_t* scratch,
                  uint32_t scratchEpoch, cudaStream_t stream) {
  EncodeArgs args{src,
                  count,
                  dst,
                  encodedBytesOut,
                  status,
                  reinterpret_cast<uint32_t*>(scratch),
                  reinterpret_cast<uint32_t*>(scratch + 4),
                  reinterpret_cast<uint64_t*>(scratch + 8),
                  uint64_t{scratchEpoch} << 48,
                  frameLayout(dtype, count, chunkElems),
                  chunkElems,
                  dtype,
                  reinterpret_cast<uintptr_t>(src) % 16 == 0};
  CCLZ_REQUIRE(args.layout.numChunks < (1u << 31), cclzInvalidArgument, "too many chunks");
  CCLZ_REQUIRE(scratchEpoch < (1u << 14), cclzInternalError, "scratch epoch out of range");
  // NOTE: a state's value has 48 bits (kStateValue): frames stay far below 256 TiB.
  // Scratch of the handle (an epoch) needs no memset: the last call left its counters zero (the
  // general kernels' leaveScratch; the split kernel does not use them) and its states marked with
  // its epoch. That is one launch fewer per call.
  if (scratchEpoch == 0)
    CCLZ_CUDA_CHECK(cudaMemsetAsync(scratch, 0, encodeScratchBytes(args.layout.numChunks), stream));
  switch (dtype) {
    case cclzBfloat16:
      launchEncode<cclzBfloat16>(args, stream);
      break;
    case cclzFloat16:
      launchEncode<cclzFloat16>(args, stream);
      break;
    case cclzFloat32:
      launchEncode<cclzFloat32>(args, stream);
      break;
    default:
      CCLZ_FAIL(cclzNotSupported, "the lossless codec takes bf16, fp16 or fp32");
  }
}

}  // namespace cclz::lossless
