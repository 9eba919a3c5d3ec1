// Lossless decode on the device: one warp per chunk, each lane decodes one
// stream, no block-wide barrier.
//
// A warp checks the frame header once, then for each of its chunks: checks the chunk-table
// entry, stages the block in its shared memory (cp.async), reads the 32 size deltas (one per
// lane; a warp scan gives each lane its stream's bit offset), copies the chunk's static decode
// table to shared memory when it differs from the previous chunk's, and each lane decodes its
// groups with the raw planes read straight from the frame a group ahead. Every check of
// ref.cpp is made here too; the first error goes to DeviceStatus::decodeError. Reads stay
// inside the frame, writes inside the count elements of the destination.
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "codec/lossless/decode_window.cuh"
#include "codec/lossless/device.cuh"
#include "codec/lossless/kernel_path.h"
#include "codec/pdl.cuh"

namespace cclz::lossless {
namespace {

using namespace device;

struct DecodeArgs {
  const uint8_t* src;
  uint64_t srcBytes;
  void* dst;
  uint64_t count;
  DeviceStatus* status;
  Layout layout;
  uint32_t chunkElems;
  int dtype;
  bool letNextStartEarly;  // the kernel lets the next one start at once (codec/pdl.cuh)
};

// A warp's staged block as its copy and the readers before the lane's stream see it.
// PlainStage: bytes in order (the lane-loop kernels, and fp16's window kernels).
// SwizzledStage: the window kernels' for bf16 and fp32 (window::swizzledStage), where a whole
// chunk's 16-byte units are swizzled in each 128-byte row of the block's shared memory for the
// window loop (window::swizzledStageOffset says why), and a short last chunk, which the lane
// loop decodes, is staged in order.
struct PlainStage {
  uint8_t* bytes;
  __device__ uint8_t* unit(uint32_t i) const { return bytes + i; }  // i: a multiple of 16
  __device__ uint32_t word(uint32_t i) const { return reinterpret_cast<const uint32_t*>(bytes)[i]; }
  __device__ uint32_t byte(uint32_t i) const { return bytes[i]; }
};
struct SwizzledStage {
  uint8_t* bytes;  // the stage
  uint32_t at;     // its offset from the block's shared memory, a multiple of 128
  bool swizzled;   // a whole chunk
  // Where byte i of the block lies, from the stage's start.
  __device__ uint32_t offset(uint32_t i) const {
    return swizzled ? window::swizzledStageOffset(at + i) - at : i;
  }
  __device__ uint8_t* unit(uint32_t i) const { return bytes + offset(i); }
  __device__ uint32_t word(uint32_t i) const {
    return *reinterpret_cast<const uint32_t*>(bytes + offset(4 * i));
  }
  __device__ uint32_t byte(uint32_t i) const { return bytes[offset(i)]; }
};

template <typename Stage>
__device__ __forceinline__ Stage stageOf(uint8_t* stage, const uint8_t* base, uint32_t n) {
  if constexpr (std::is_same_v<Stage, SwizzledStage>)
    return {stage, static_cast<uint32_t>(stage - base), n == kMaxChunkElems};
  else
    return {stage};
}

// Whether the kernel swizzles its stages: the window loop for bf16 and fp32.
template <int D, bool kWindow>
constexpr bool kSwizzledStage = (kWindow && window::swizzledStage(D));

// The bytes of a warp's stage: the block at its largest, rounded up to whole 128-byte rows where
// the stage is swizzled.
template <int D, bool kWindow>
constexpr uint32_t stageBytes() {
  return kSwizzledStage<D, kWindow> ? (kStageBytes + 127) / 128 * 128 : kStageBytes;
}

// Lane 0: the frame header, as decodeRef checks it, and the handle's chunking.
__device__ uint32_t checkHeader(const DecodeArgs& a, uint64_t* frameBytes) {
  if (a.srcBytes < kFrameHeaderBytes) return kFrameTruncated;
  FrameHeader h;
  const uint32_t checksum = lossless::device::headerChecksumFromGlobal(a.src, &h);
  uint32_t err = checkFrameHeaderSum(h, checksum, a.srcBytes);
  if (err == kFrameOk) err = checkFrameMatches(h, cclzCodecLossless, a.dtype, a.count);
  if (err == kFrameOk) err = checkLosslessHeader(h);
  if (err != kFrameOk) return err;
  if (h.chunkElems != a.chunkElems) return kFrameMismatch;
  *frameBytes = h.frameBytes;
  return kFrameOk;
}

// Reads a lane's stream from the staged block, least significant bit first. Reads past the
// staged words repeat the last one: such bits only ever feed a code that ends past the lane's
// stream, which the size check rejects.
// NOTE: the decoder was bound by the integer ALU pipe (its LOP3, SHF, ISETP, PRMT...
// filled ~90% of that pipe at 256 MiB), so the reader takes table entries whole: a 64-bit shift by
// an entry is two wrap-mode funnel shifts, which use the entry's low 5 bits (the code length)
// and ignore its offset byte, and `bits` subtracts whole entries too. Its low byte is the count
// of valid bits (0..63; entries are multiples of 256 above their 5 length bits, so they never
// disturb it); the bits above are garbage.
struct BitReader {
  PlainStage stage;
  uint32_t lastWord;
  uint32_t next;    // next word to load
  uint32_t lo, hi;  // the buffer: valid bits at positions 0..count-1 of hi:lo
  uint32_t bits;    // count in the low byte (see above)

  __device__ BitReader(PlainStage s, uint32_t blockBytes, uint32_t bitPos)
      : stage(s), lastWord(blockBytes / 4 - 1), next(bitPos / 32) {
    lo = stage.word(min(next++, lastWord)) >> (bitPos % 32);
    hi = 0;
    bits = 32 - bitPos % 32;
  }
  // Keeps at least 32 bits: two symbols of at most 16 (three of at most 10, without escapes).
  // Without a branch, since the lanes of a warp need refills at different times. The count is
  // below 64, so it is below 32 when its bit 5 is clear; the shifts take it modulo 32.
  __device__ void refill() {
    const uint32_t w = stage.word(min(next, lastWord));
    const bool need = (bits & 32u) == 0;
    lo |= need ? __funnelshift_l(0u, w, bits) : 0u;  // w << count
    hi |= need ? __funnelshift_l(w, 0u, bits) : 0u;  // w >> (32 - count), 0 for count 0
    next += need;
    bits += need ? 32 : 0;
  }
  // The next kCodeBits bits: a decode table index.
  __device__ uint32_t peek() const { return lo & ((1u << kCodeBits) - 1); }
  // Drops the bits of table entry e (its length, bits 0..4; at most 18).
  __device__ void consume(uint32_t e) {
    lo = __funnelshift_r(lo, hi, e);
    hi = __funnelshift_r(hi, 0u, e);
    bits -= e;
  }
  __device__ uint32_t consumed(uint32_t bitPos) const {
    return 32 * next - bitPos - (bits & 0xFFu);
  }
};

// One symbol. kEscapes: the chunk has escapes (its header says so); `check` gathers what the
// end-of-stream test needs: without escapes the largest entry (an escape entry has bit 15, and
// the offset field orders the others), with escapes the largest offset field.
template <bool kEscapes>
__device__ inline uint32_t decodeSymbol(BitReader& r, const uint16_t* table, uint32_t top,
                                        uint32_t& check) {
  const uint32_t e = table[r.peek()];
  uint32_t sym = top - entryOffset(e);
  if constexpr (kEscapes) {
    // The escaped symbol's 8 bits end where the entry's length does.
    const uint32_t escaped = __funnelshift_r(r.lo, r.hi, e - kEscapeBits);
    sym = entryIsEscape(e) ? escaped : sym;
    check = max(check, e & 0x3F00u);
  } else {
    check = max(check, e);
  }
  r.consume(e);
  return sym & 0xFFu;
}

// A whole group of a chunk without escapes: its 8 symbols in two words, in element order.
// NOTE: no escape code means no code over kCodeBits = 10 bits, so a refill (>= 32 bits) lasts
// three symbols; the entries of four symbols are combined at once: two byte permutes pair them
// as 16-bit halves (one 3-input max gathers the check: the largest entry, as decodeSymbol's),
// a third takes their offset bytes, and top - d for all four is one subtraction from top in
// every byte, which never borrows when every d <= top (a d above top, or an escape entry, makes
// the check fail the chunk). checkHalves: the running max of the 16-bit halves.
__device__ __forceinline__ void decodeGroupNoEscapes(BitReader& r, const uint16_t* table,
                                                     uint32_t top4, uint32_t& checkHalves,
                                                     uint32_t (&sym)[2]) {
  uint32_t e[kGroup];
#pragma unroll
  for (int i = 0; i < kGroup; ++i) {
    if (i % 3 == 0) r.refill();
    e[i] = table[r.peek()];
    r.consume(e[i]);
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const uint32_t p01 = __byte_perm(e[4 * h], e[4 * h + 1], 0x5410);
    const uint32_t p23 = __byte_perm(e[4 * h + 2], e[4 * h + 3], 0x5410);
    checkHalves = __vimax3_u16x2(checkHalves, p01, p23);
    sym[h] = top4 - __byte_perm(p01, p23, 0x7531);
  }
}

// The staged kernel's shared memory per warp: the block, the decode table, plane A, plane B.
template <int D, bool kWindow>
constexpr uint32_t stagedWarpBytes() {
  return stageBytes<D, kWindow>() + (2u << kCodeBits) + kMaxChunkElems * (D == cclzFloat32 ? 3 : 1);
}

// kStaged false: the general kernel (blocks that keep every multiprocessor busy, warps loop over
// the chunks, raw planes read from the frame a group ahead).
// kStaged true: the staged kernel (kernel_path.h): one warp per chunk, the grid covers every
// chunk. Before the frame header is checked, the warp already has its chunk's raw planes on the
// way to shared memory (cp.async) and its chunk-table entries on the way to registers; both lie
// inside the given bytes whatever the header says (blocksOffset <= srcBytes). So the header,
// the table entries and the planes cost one memory latency together, the block one more, and
// the lanes then decode from shared memory only. NOTE: at 4 MiB of bf16 (~4 warps per SM) a
// group's decode (~400 cycles of dependent lookups) does not cover a DRAM load issued one group
// ahead, so the general kernel waits on memory in every group.
// kWindow (the staged kernel; the general one for bf16 and fp16; kernel_path.h): whole coded
// chunks take the pair-window loop (decode_window.cuh) instead of the lane loop; every other
// chunk, and every check before the lane's stream, is the same code. The general kernel then reads
// the raw planes from the frame an iteration ahead, the staged one from its shared memory.
template <int D, bool kStaged, bool kWindow>
__device__ __forceinline__ void decodeChunks(const DecodeArgs& a) {
  // A corrupt lane's window reads past its block, inside the block's shared memory: the staged
  // kernel's into the warp's plane A, which follows its stage (below); the general kernel's into
  // the next warp's stage, or the room after the last one (GeneralShared). Such a lane fails its
  // size check, and the chunk is reported.
  static_assert(kWindowOverread <= kMaxChunkElems);
  // NOTE: launched programmatic where it can be (codec/pdl.cuh): this kernel waits for the kernel
  // before it before it touches global memory. Then a grid of at most one block per
  // multiprocessor (latency-bound: bf16 up to 4 MiB) lets the next kernel start: queued back to
  // back, 4 MiB 418 -> 502 GB/s, 1 MiB +13%. A larger one lets it start only as its blocks end:
  // with all of a 16 MiB grid resident, the next kernel's blocks waiting beside it cost 12-19%
  // (docs/kernels/lossless.md, "Small messages and programmatic dependent launch").
  waitForPreviousKernel();
  if (a.letNextStartEarly) letNextKernelStart();
  constexpr int kSplit = D == cclzFloat16 ? cclzBfloat16 : D;
  using Joiner = lossless::device::Joiner<kSplit>;
  using E = Elements<D>;
  using Word = typename E::Word;
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr uint32_t kStage = stageBytes<D, kWindow>();
  uint8_t* stage;
  uint16_t* table;
  const uint8_t* rawA = nullptr;            // staged: the chunk's plane A in shared memory
  const uint16_t* rawB = nullptr;           // staged: its plane B (fp32)
  uint64_t stagedBegin = 0, stagedEnd = 0;  // staged: the chunk's chunk-table entries
  const uint8_t* stagedBase = nullptr;      // the block's shared memory (the window loop)
  if constexpr (kStaged) {
    extern __shared__ __align__(16) uint8_t stagedAll[];  // stagedWarpBytes<D, kWindow>() per warp
    const uint64_t k = blockIdx.x * uint64_t{kWarpsPerBlock} + warp;
    if (k >= a.layout.numChunks) return;  // the whole warp
    stagedBase = stagedAll;
    uint8_t* toA;
    if constexpr (kWindow) {
      // NOTE: the four decode tables first, so that each lies at a multiple of 2 KiB from
      // stagedAll and the window loop forms an entry's address with one LOP3
      // ((window & 0x7FE) | table offset); then per warp its stage and its planes, plane A
      // right after the stage, where a corrupt lane's window over-read lands. A swizzled stage
      // is whole 128-byte rows.
      constexpr uint32_t kTableBytes = 2u << kCodeBits;
      constexpr uint32_t kWarpBytes = stagedWarpBytes<D, kWindow>() - kTableBytes;
      static_assert(!kSwizzledStage<D, kWindow> ||
                    (kWarpsPerBlock * kTableBytes % 128 == 0 && kWarpBytes % 128 == 0));
      table = reinterpret_cast<uint16_t*>(stagedAll + warp * kTableBytes);
      stage = stagedAll + kWarpsPerBlock * kTableBytes + warp * kWarpBytes;
      toA = stage + kStage;
    } else {
      stage = stagedAll + warp * stagedWarpBytes<D, kWindow>();
      table = reinterpret_cast<uint16_t*>(stage + kStage);
      toA = stage + kStage + (2u << kCodeBits);
    }
    uint8_t* toB = toA + kMaxChunkElems;
    rawA = toA;
    rawB = reinterpret_cast<const uint16_t*>(toB);
    const uint64_t first = k * a.chunkElems;
    const uint32_t n =
        static_cast<uint32_t>(min(static_cast<uint64_t>(a.chunkElems), a.count - first));
    if (a.layout.blocksOffset <= a.srcBytes) {  // the table and the planes are inside the input
      const uint8_t* planeA = a.src + a.layout.planeAOffset + first;
      for (uint32_t i = lane * 16; i < n; i += 32 * 16)
        lossless::device::copyAsync16(toA + i, planeA + i);
      if constexpr (E::kHasPlaneB) {
        const uint8_t* planeB = a.src + a.layout.planeBOffset + 2 * first;
        for (uint32_t i = lane * 16; i < 2 * n; i += 32 * 16)
          lossless::device::copyAsync16(toB + i, planeB + i);
      }
      const uint64_t* entries = reinterpret_cast<const uint64_t*>(a.src + a.layout.tableOffset);
      stagedBegin = k ? entries[k - 1] : 0;
      stagedEnd = entries[k];
    }
    lossless::device::copyAsyncCommit();  // waited for with the block's staging
  } else {
    // The four decode tables first, each at a multiple of 2 KiB from the base (the window loop
    // forms an entry's address with one LOP3), then the warps' stages, then room for a corrupt
    // lane's window over-read past the last stage (one past another stage lands in the next),
    // all in whole 128-byte rows where the stages are swizzled in rows.
    constexpr bool kSwizzled = kSwizzledStage<D, kWindow>;
    struct GeneralShared {
      uint16_t table[kWarpsPerBlock][1u << kCodeBits];
      uint8_t stage[kWarpsPerBlock][kStage];
      uint8_t overread[!kWindow    ? 16
                       : kSwizzled ? (kWindowOverread + 127) / 128 * 128
                                   : kWindowOverread];
    };
    static_assert(!kSwizzled || sizeof(GeneralShared) % 128 == 0);
    __shared__ __align__(16) GeneralShared shared;
    stage = shared.stage[warp];
    table = shared.table[warp];
    stagedBase = reinterpret_cast<const uint8_t*>(&shared);
  }
  using Stage = std::conditional_t<kSwizzledStage<D, kWindow>, SwizzledStage, PlainStage>;
  const uint32_t chunkElems = a.chunkElems;
  const int fam = family(D);

  uint64_t frameBytes = 0;
  uint32_t err = kFrameOk;
  if (lane == 0) err = checkHeader(a, &frameBytes);
  err = __shfl_sync(kFullMask, err, 0);
  if (err != kFrameOk) {
    if (lane == 0 && blockIdx.x == 0 && warp == 0) lossless::device::reportError(a.status, err);
    // The staged planes must land before the block's shared memory goes to another block.
    if constexpr (kStaged) lossless::device::copyAsyncWaitAll();
    return;
  }
  frameBytes = __shfl_sync(kFullMask, frameBytes, 0);
  const uint64_t blocksBytes = frameBytes - a.layout.blocksOffset;
  const uint64_t* chunkTable = reinterpret_cast<const uint64_t*>(a.src + a.layout.tableOffset);
  const uint8_t* planeAll = a.src + a.layout.planeAOffset;
  const uint16_t* planeBAll = reinterpret_cast<const uint16_t*>(a.src + a.layout.planeBOffset);
  uint32_t cachedTable = ~0u;  // the code whose decode table is in shared memory

  // The staged kernel's warps take one chunk each (its grid covers them all).
  const uint64_t warps =
      kStaged ? a.layout.numChunks : static_cast<uint64_t>(gridDim.x) * kWarpsPerBlock;
  for (uint64_t k = blockIdx.x * uint64_t{kWarpsPerBlock} + warp; k < a.layout.numChunks;
       k += warps) {
    const uint64_t first = k * chunkElems;
    const uint32_t n =
        static_cast<uint32_t>(min(static_cast<uint64_t>(chunkElems), a.count - first));
    uint64_t begin, end;
    if constexpr (kStaged)
      begin = stagedBegin, end = stagedEnd;
    else
      begin = k ? chunkTable[k - 1] : 0, end = chunkTable[k];
    if (end < begin || end > blocksBytes || (end - begin) % kBlockAlign != 0 ||
        (k + 1 == a.layout.numChunks && end != blocksBytes) || end - begin > maxBlockBytes(n)) {
      if (lane == 0) lossless::device::reportError(a.status, kFrameBadChunkTable);
      continue;
    }
    const uint32_t blockBytes = static_cast<uint32_t>(end - begin);
    const uint8_t* block = a.src + a.layout.blocksOffset + begin;
    const Stage staged = stageOf<Stage>(stage, stagedBase, n);
    for (uint32_t i = lane * 16; i < blockBytes; i += 32 * 16)
      lossless::device::copyAsync16(staged.unit(i), block + i);
    lossless::device::copyAsyncCommit();
    const uint8_t* planeA = planeAll + first;
    const uint16_t* planeB = planeBAll + first;
    Word* out = static_cast<Word*>(a.dst) + first;
    const uint32_t groupsPerLane = chunkElems / (kGroup * kLanes);
    // The raw planes, staged or read straight from the frame: whole vectors even for a short
    // last group (the planes are padded to 16 bytes inside the frame, and staged whole).
    auto loadRaw = [&](uint32_t g, uint2& ra, uint4& rb) {
      if constexpr (kStaged) {
        ra = *reinterpret_cast<const uint2*>(rawA + g * kGroup);
        if constexpr (E::kHasPlaneB) rb = *reinterpret_cast<const uint4*>(rawB + g * kGroup);
      } else {
        ra = __ldg(reinterpret_cast<const uint2*>(planeA + g * kGroup));
        if constexpr (E::kHasPlaneB)
          rb = __ldg(reinterpret_cast<const uint4*>(planeB + g * kGroup));
      }
    };
    // The lane's first group of raw bits, loaded while the block is staged. NOTE: loaded after
    // the staging wait, its latency is the decoder's top stall (8.3% of stall samples on its first
    // use; docs/kernels/lossless.md, "Decoder").
    uint2 firstA = make_uint2(0, 0);
    uint4 firstB = make_uint4(0, 0, 0, 0);
    if constexpr (!kStaged)
      if (groupValid(n, lane)) loadRaw(lane, firstA, firstB);
    lossless::device::copyAsyncWaitAll();
    __syncwarp();
    if constexpr (kStaged)
      if (groupValid(n, lane)) loadRaw(lane, firstA, firstB);

    const uint32_t header = blockBytes >= 4 ? staged.word(0) : 0xFFu;
    const uint32_t mode = header & 0xFFu;
    bool bad = blockBytes < kBlockHeaderBytes;
    if (mode == kModeStored)
      bad |= blockBytes < kBlockHeaderBytes + n;
    else if (mode == kModeConstant)
      bad |= blockBytes != kBlockAlign || (header >> 16) != 0;
    else if (mode == kModeHuffman)
      bad |= blockBytes < kHeaderBytes || (header & 0x7800u) || (header >> 24) > kMaxWidth ||
             (staged.word(1) >> 16) != 0 || streamsOffset(header >> 24) > blockBytes;
    else
      bad = true;
    if (bad) {
      if (lane == 0) lossless::device::reportError(a.status, kFrameBadChunk);
      __syncwarp();
      continue;
    }

    auto emit = [&](uint32_t g, uint32_t valid, uint32_t symLo, uint32_t symHi, uint2 ra,
                    const uint4& rb) {
      uint32_t words[Joiner::kWords];
      Joiner::join(symLo, symHi, ra, rb, words);
      Word* to = out + g * kGroup;
      if (valid == kGroup) {
#pragma unroll
        for (int v = 0; v < Joiner::kWords / 4; ++v)
          reinterpret_cast<uint4*>(to)[v] =
              make_uint4(words[4 * v], words[4 * v + 1], words[4 * v + 2], words[4 * v + 3]);
      } else {
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          if (i >= static_cast<int>(valid)) break;
          to[i] = static_cast<Word>(sizeof(Word) == 2 ? words[i / 2] >> (16 * (i % 2)) : words[i]);
        }
      }
    };

    if (mode != kModeHuffman) {  // stored or constant: the symbols are bytes of the block
      const uint32_t fill = (header >> 8) & 0xFFu;
      for (uint32_t j = 0; j < groupsPerLane; ++j) {
        const uint32_t g = lane + kLanes * j, valid = groupValid(n, g);
        if (!valid) break;
        uint32_t sym[2] = {fill * 0x01010101u, fill * 0x01010101u};
        if (mode == kModeStored) {
          sym[0] = sym[1] = 0;
#pragma unroll
          for (int i = 0; i < kGroup; ++i)
            if (i < static_cast<int>(valid))
              sym[i / 4] |= staged.byte(kBlockHeaderBytes + g * kGroup + i) << (8 * (i % 4));
        }
        uint2 ra;
        uint4 rb = make_uint4(0, 0, 0, 0);
        loadRaw(g, ra, rb);
        emit(g, valid, sym[0], sym[1], ra, rb);
      }
      __syncwarp();
      continue;
    }

    // ---- The static code: sizes, the table, the lane's stream. ----
    const uint32_t tableIndex = (header >> 8) & 0x7u, top = (header >> 16) & 0xFFu;
    const uint32_t width = header >> 24, base = staged.word(1) & 0xFFFFu;
    const bool escapes = (header >> 8) & kEscapeFlag;
    uint32_t myBits = base;
    if (width) {
      const uint32_t bit = 8 * kHeaderBytes + lane * width, last = blockBytes / 4 - 1;
      const uint64_t two = staged.word(bit / 32) |
                           (static_cast<uint64_t>(staged.word(min(bit / 32 + 1, last))) << 32);
      myBits += static_cast<uint32_t>(two >> (bit % 32)) & ((1u << width) - 1);
    }
    const uint32_t inclusive = warpInclusiveScan(myBits, lane);
    const uint32_t total = __shfl_sync(kFullMask, inclusive, 31);
    if (alignUp(streamsOffset(width) + (total + 7) / 8, kBlockAlign) != blockBytes) {
      if (lane == 0) lossless::device::reportError(a.status, kFrameBadChunk);
      __syncwarp();
      continue;
    }
    if (tableIndex != cachedTable) {  // 2 KiB: four 16-byte vectors per lane
      const uint4* from = reinterpret_cast<const uint4*>(kDeviceCodes.decode[fam][tableIndex]);
      for (uint32_t i = lane; i < (2u << kCodeBits) / 16; i += 32)
        reinterpret_cast<uint4*>(table)[i] = from[i];
      cachedTable = tableIndex;
      __syncwarp();
    }

    const uint32_t start = 8 * streamsOffset(width) + inclusive - myBits;
    if constexpr (kWindow) {
      if (n == kMaxChunkElems) {
        const auto stageAt = static_cast<uint32_t>(stage - stagedBase);
        const auto tableAt =
            static_cast<uint32_t>(reinterpret_cast<const uint8_t*>(table) - stagedBase);
        // The general kernel reads the raw planes from the frame, an iteration ahead.
        const uint8_t* fromA = kStaged ? rawA : planeA;
        const uint16_t* fromB = kStaged ? rawB : planeB;
        const bool ok = escapes
                            ? decodeWindowLane<D, true, !kStaged>(stagedBase, stageAt, tableAt, top,
                                                                  start, myBits, fromA, fromB, out,
                                                                  lane, firstA, firstB)
                            : decodeWindowLane<D, false, !kStaged>(stagedBase, stageAt, tableAt,
                                                                   top, start, myBits, fromA, fromB,
                                                                   out, lane, firstA, firstB);
        if (!ok) lossless::device::reportError(a.status, kFrameBadChunk);
        __syncwarp();  // the stage is rewritten by the next chunk
        continue;
      }
    }
    auto decodeLane = [&](auto escapesFlag) {
      constexpr bool kEscapes = decltype(escapesFlag)::value;
      // In the window kernels the lane loop takes short chunks only: staged in order there.
      BitReader r(PlainStage{stage}, blockBytes, start);
      uint32_t check = 0, checkHalves = 0;
      const uint32_t top4 = top * 0x01010101u;
      uint2 nextA = firstA;
      uint4 nextB = firstB;
      for (uint32_t j = 0; j < groupsPerLane; ++j) {
        const uint32_t g = lane + kLanes * j, valid = groupValid(n, g);
        if (!valid) break;
        const uint2 ra = nextA;
        const uint4 rb = nextB;
        if (j + 1 < groupsPerLane && groupValid(n, g + kLanes)) loadRaw(g + kLanes, nextA, nextB);
        // The general kernel: four groups further on, asked of L2 (as the window loop does).
        constexpr uint32_t kFar = 4;
        if (!kStaged && j + kFar < groupsPerLane && groupValid(n, g + kFar * kLanes)) {
          lossless::device::prefetchL2(planeA + (g + kFar * kLanes) * kGroup);
          if constexpr (E::kHasPlaneB)
            lossless::device::prefetchL2(planeB + (g + kFar * kLanes) * kGroup);
        }
        uint32_t sym[2] = {0, 0};
        if (!kEscapes && valid == kGroup) {
          decodeGroupNoEscapes(r, table, top4, checkHalves, sym);
        } else if (valid == kGroup) {
#pragma unroll
          for (int i = 0; i < kGroup; i += 2) {
            r.refill();
            sym[i / 4] |= decodeSymbol<kEscapes>(r, table, top, check) << (8 * (i % 4));
            sym[i / 4] |= decodeSymbol<kEscapes>(r, table, top, check) << (8 * (i % 4 + 1));
          }
        } else {
#pragma unroll
          for (int i = 0; i < kGroup; ++i) {
            if (i >= static_cast<int>(valid)) break;
            r.refill();
            sym[i / 4] |= decodeSymbol<kEscapes>(r, table, top, check) << (8 * (i % 4));
          }
        }
        emit(g, valid, sym[0], sym[1], ra, rb);
      }
      // The lane used exactly its bits, no escape the header did not announce, and no offset
      // below symbol 0.
      check = max(check, max(checkHalves & 0xFFFFu, checkHalves >> 16));
      bool ok = r.consumed(start) == myBits;
      if constexpr (kEscapes)
        ok &= (check >> 8) <= top;
      else
        ok &= !(check & kEntryEscape) && entryOffset(check) <= top;
      if (!ok) lossless::device::reportError(a.status, kFrameBadChunk);
    };
    if (escapes)
      decodeLane(std::true_type{});
    else
      decodeLane(std::false_type{});
    __syncwarp();  // the stage is rewritten by the next chunk
  }
  // A chunk rejected before its staging wait still has its planes in flight.
  if constexpr (kStaged) lossless::device::copyAsyncWaitAll();
}

template <int D, bool kStaged, bool kWindow>
__global__ void __launch_bounds__(kThreads) decodeKernel(DecodeArgs a) {
  decodeChunks<D, kStaged, kWindow>(a);
}

// The general kernel with the window loop on whole coded chunks (bf16, fp16). Its shared memory
// allows 8 blocks per multiprocessor. NOTE: the register bound. bf16 (a swizzled stage): 64
// registers (launch bounds of 8 blocks); at 56 ptxas spills 28 bytes a chunk, and 256 MiB decodes
// at 2057 GB/s queued against 64's 2166 (docs/kernels/lossless.md, "Decoder"). fp16 (its
// stage in order): 56 registers (64 unbounded). There 64 measured 0.3-0.6% slower than 56, with
// the raw planes' L2 prefetch in both (docs/kernels/lossless.md, "Decoder"). 9 blocks, with the
// over-read room traded for bounded stage reads, measured 2-7% slower: the L1/TEX pipe is 90%
// busy at 8 (docs/kernels/lossless.md, "Decoder").
template <int D>
__global__ void __launch_bounds__(kThreads, kSwizzledStage<D, true> ? 8 : 9)
    decodeGeneralWindowKernel(DecodeArgs a) {
  decodeChunks<D, false, true>(a);
}

// Blocks that keep every multiprocessor busy (blocksPerSM of them per multiprocessor, or fewer
// for a short message); warps loop over the remaining chunks.
unsigned decodeBlocks(uint64_t numChunks, uint64_t blocksPerSM) {
  const uint64_t wanted = (numChunks + kWarpsPerBlock - 1) / kWarpsPerBlock;
  return static_cast<unsigned>(std::max<uint64_t>(
      1, std::min<uint64_t>(wanted, blocksPerSM * static_cast<uint64_t>(multiprocessorCount()))));
}
// The general kernels' grids, in blocks per multiprocessor. NOTE: both hold 8 blocks per
// multiprocessor at a time, and their warps take chunks in a fixed stride, so the grid sets
// how the last chunks fall. Measured on the H200 (docs/kernels/lossless.md, "Decoder"):
// the window kernel (bf16, fp16) at 8 / 16 / 24: bf16 256 MiB 1966 / 1985 / 1953 GB/s queued
// (64 MiB: 1684 / 1640 / 1643); the lane loop (fp32) at 16 / 24 / 32 / 40: fp32 256 MiB
// 1718 / 1799 / 1769 / 1766 queued, 1689 / 1775 / 1741 / 1747 alone (512 MiB: 1804 / 1809 /
// 1850 / 1870; 16 and 64 MiB level). Again with the swizzled stage (docs/kernels/lossless.md,
// "Decoder"): 8 against 16, bf16 256 MiB 2105 / 2143 queued, 64 MiB 1786 / 1725.
constexpr uint64_t kWindowBlocksPerSM = 16;
constexpr uint64_t kLaneLoopBlocksPerSM = 24;

// The staged kernel: one warp per chunk, the pair-window loop on whole coded chunks.
template <int D, bool kWindow = true>
void launchStaged(const DecodeArgs& args, cudaStream_t stream) {
  constexpr int kShared = kWarpsPerBlock * stagedWarpBytes<D, kWindow>();  // fp32: 72-73 KiB
  static std::atomic<uint64_t> configured{0};  // one per kernel: the limit is per kernel
  lossless::device::ensureSharedMemoryLimit(decodeKernel<D, true, kWindow>, kShared, configured);
  const uint64_t chunks = args.layout.numChunks;
  const auto blocks = static_cast<unsigned>((chunks + kWarpsPerBlock - 1) / kWarpsPerBlock);
  DecodeArgs early = args;
  early.letNextStartEarly = blocks <= static_cast<unsigned>(multiprocessorCount());
  launchKernel(decodeKernel<D, true, kWindow>, blocks, kThreads, kShared, stream,
               programmaticLaunchSupported(), early);
}

template <int D>
void launchDecode(const DecodeArgs& args, cudaStream_t stream) {
  const uint64_t chunks = args.layout.numChunks;
  // An empty frame has no chunk for a staged warp: the general kernel checks its header.
  if (chunks > 0 &&
      useStagedKernels(kernelPathFromEnvironment(), Direction::Decode, D,
                       args.chunkElems == kMaxChunkElems, chunks, multiprocessorCount())) {
    launchStaged<D>(args, stream);
  } else if (D != cclzFloat32) {
    // NOTE: bf16 and fp16 only. With the window loop fp32 lost 5-17% at 16-256 MiB (not
    // profiled: its raw planes are three times bf16's per group), bf16 gained 3-6%
    // (docs/kernels/lossless.md, "Decoder").
    if constexpr (D != cclzFloat32)
      launchKernel(decodeGeneralWindowKernel<D>, decodeBlocks(chunks, kWindowBlocksPerSM), kThreads,
                   0, stream, programmaticLaunchSupported(), args);
  } else {
    launchKernel(decodeKernel<D, false, false>, decodeBlocks(chunks, kLaneLoopBlocksPerSM),
                 kThreads, 0, stream, programmaticLaunchSupported(), args);
  }
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void decodeDevice(uint32_t chunkElems, int dtype, const uint8_t* src, uint64_t srcBytes, void* dst,
                  uint64_t count, DeviceStatus* status, cudaStream_t stream) {
  DecodeArgs args{src,        srcBytes, dst, count, status, frameLayout(dtype, count, chunkElems),
                  chunkElems, dtype};
  CCLZ_REQUIRE(args.layout.numChunks < (1u << 31), cclzInvalidArgument, "too many chunks");
  switch (dtype) {
    case cclzBfloat16:
      launchDecode<cclzBfloat16>(args, stream);
      break;
    case cclzFloat16:
      launchDecode<cclzFloat16>(args, stream);
      break;
    case cclzFloat32:
      launchDecode<cclzFloat32>(args, stream);
      break;
    default:
      CCLZ_FAIL(cclzNotSupported, "the lossless codec takes bf16, fp16 or fp32");
  }
}

}  // namespace cclz::lossless
