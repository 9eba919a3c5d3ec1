// Lossless encode, payload version 2, on the device: one warp per chunk, no block-wide barrier
// after the start.
//
// A warp loads its chunk (lane l: groups l, l+32, ...; the lane's symbols stay in registers),
// writes the raw planes straight to the frame, finds the chunk's top symbol, adds up for every
// lane the bits under all 8 static codes at once (packed 16-bit costs), picks the cheapest code,
// learns where its block goes from its predecessors (a warp-wide decoupled look-back), codes the
// lanes into a warp-private shared-memory copy of the block and copies it out. The bytes equal
// ref_v2.cpp's.
#include <cuda_runtime.h>

#include <algorithm>

#include "codec/lossless/device_v2.cuh"

namespace cclz::lossless::v2 {
namespace {

using namespace device;

constexpr uint64_t kStateAggregate = 1ull << 62;  // the chunk's block size is known
constexpr uint64_t kStateInclusive = 2ull << 62;  // the end offset of its block is known
constexpr uint64_t kStateValue = (1ull << 62) - 1;

struct EncodeArgs {
  const void* src;
  uint64_t count;
  uint8_t* dst;
  uint64_t* encodedBytesOut;
  DeviceStatus* status;
  uint32_t* workCounter;
  uint64_t* chunkState;
  Layout layout;
  uint32_t chunkElems;
  int dtype;
  bool srcAligned16;
};

__device__ void writeHeader(const EncodeArgs& a, uint64_t frameBytes) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kLosslessVersion2;
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

// The whole warp: the offset of chunk k's block. Lane j reads the state of chunk k-1-j (32 at a
// time) until a chunk whose end offset is known, and sums the sizes up to it; then lane 0
// publishes chunk k's end offset. Chunk k's own size was published before (publishSize).
__device__ uint64_t lookBack(uint64_t* state, uint64_t k, uint64_t size, uint32_t lane) {
  uint64_t exclusive = 0;
  int64_t base = static_cast<int64_t>(k) - 1;
  while (base >= 0) {
    const int64_t j = base - static_cast<int64_t>(lane);
    uint64_t v = kStateInclusive;  // before chunk 0: an end offset of zero
    if (j >= 0) v = *reinterpret_cast<volatile uint64_t*>(state + j);
    const uint32_t flag = static_cast<uint32_t>(v >> 62);
    const uint32_t inclusive = __ballot_sync(kFullMask, flag == 2);
    const uint32_t nearest = inclusive ? __ffs(inclusive) - 1 : 32u;
    // A chunk nearer than the nearest end offset has published nothing yet: look again.
    if (__any_sync(kFullMask, flag == 0 && lane <= nearest)) {
      __nanosleep(64);
      continue;
    }
    const uint64_t mine = lane <= nearest ? (v & kStateValue) : 0;
    uint64_t sum = mine;
#pragma unroll
    for (int d = 16; d > 0; d >>= 1) sum += __shfl_xor_sync(kFullMask, sum, d);
    exclusive += sum;
    if (nearest < 32) break;
    base -= 32;
  }
  if (lane == 0)
    atomicExch(reinterpret_cast<unsigned long long*>(state + k), kStateInclusive | (exclusive + size));
  return exclusive;
}

// Loads a group as 32-bit words (zeros past a short group's end), 16 bytes at a time when the
// source allows.
template <int D>
__device__ void loadGroupWords(const uint8_t* in, uint32_t valid, bool aligned16,
                               uint32_t (&x)[lossless::device::Splitter<D>::kWords]) {
  constexpr int kWords = lossless::device::Splitter<D>::kWords;
  if (valid == kGroup && aligned16) {
#pragma unroll
    for (int v = 0; v < kWords / 4; ++v) {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(in) + v);
      x[4 * v] = q.x;
      x[4 * v + 1] = q.y;
      x[4 * v + 2] = q.z;
      x[4 * v + 3] = q.w;
    }
  } else {
    using Word = typename Elements<D>::Word;
    const Word* e = reinterpret_cast<const Word*>(in);
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (sizeof(Word) == 2) {
        const uint32_t lo = 2 * i < static_cast<int>(valid) ? e[2 * i] : 0u;
        const uint32_t hi = 2 * i + 1 < static_cast<int>(valid) ? e[2 * i + 1] : 0u;
        x[i] = lo | (hi << 16);
      } else {
        x[i] = i < static_cast<int>(valid) ? e[i] : 0u;
      }
    }
  }
}

// Writes a group's raw planes to the frame (whole vectors for a whole group).
template <int D>
__device__ void storePlanes(uint32_t g, uint32_t valid, const uint32_t (&raw)[2],
                            const uint32_t (&rawB)[4], uint8_t* planeA, uint16_t* planeB) {
  if (valid == kGroup) {
    *reinterpret_cast<uint2*>(planeA + g * kGroup) = make_uint2(raw[0], raw[1]);
    if constexpr (D == cclzFloat32)
      *reinterpret_cast<uint4*>(planeB + g * kGroup) =
          make_uint4(rawB[0], rawB[1], rawB[2], rawB[3]);
  } else {
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      if (i >= static_cast<int>(valid)) break;
      planeA[g * kGroup + i] = static_cast<uint8_t>(raw[i / 4] >> (8 * (i % 4)));
      if constexpr (D == cclzFloat32)
        planeB[g * kGroup + i] = static_cast<uint16_t>(rawB[i / 2] >> (16 * (i % 2)));
    }
  }
}

__device__ inline uint32_t symbolAt(const uint32_t (&sym)[kMaxGroupsPerLane][2], int j, int i) {
  return (sym[j][i / 4] >> (8 * (i % 4))) & 0xFFu;
}

// The block-wide copies of the family's code and cost tables.
struct EncodeTables {
  uint4 cost[kMaxOffsets + 1];
  uint32_t code[kTables][kMaxOffsets + 1];
};

template <int D>
__global__ void __launch_bounds__(kThreads) encodeKernel(EncodeArgs a) {
  // The element split of version 2: fp16 splits like bf16 (format_v2.h, SplitOf).
  constexpr int kSplit = D == cclzFloat16 ? cclzBfloat16 : D;
  using Split = lossless::device::Splitter<kSplit>;
  using Word = typename Elements<D>::Word;
  __shared__ EncodeTables tables;
  __shared__ __align__(16) uint8_t stageAll[kWarpsPerBlock][kStageBytes];
  const uint32_t lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int fam = family(D);
  const uint32_t offsets = familyOffsets(D);
  for (uint32_t i = threadIdx.x; i <= offsets; i += blockDim.x) {
    const uint32_t* c = kDeviceCodes.cost[fam][i];
    tables.cost[i] = make_uint4(c[0], c[1], c[2], c[3]);
    for (uint32_t t = 0; t < kTables; ++t) tables.code[t][i] = kDeviceCodes.code[fam][t][i];
  }
  __syncthreads();
  if (a.layout.numChunks == 0) {  // an empty tensor: the header alone
    if (blockIdx.x == 0 && threadIdx.x == 0) writeHeader(a, a.layout.blocksOffset);
    return;
  }
  uint8_t* stage = stageAll[warp];
  uint32_t* stageWords = reinterpret_cast<uint32_t*>(stage);
  const uint32_t chunkElems = a.chunkElems;
  const uint32_t groupsPerLane = chunkElems / (kGroup * kLanes);

  while (true) {
    // Chunks are taken in order, so a warp only ever waits for chunks already being encoded.
    uint32_t taken = 0;
    if (lane == 0) taken = atomicAdd(a.workCounter, 1u);
    const uint64_t k = __shfl_sync(kFullMask, taken, 0);
    if (k >= a.layout.numChunks) return;
    const uint64_t first = k * chunkElems;
    const uint32_t n =
        static_cast<uint32_t>(min(static_cast<uint64_t>(chunkElems), a.count - first));
    const uint8_t* in = static_cast<const uint8_t*>(a.src) + first * sizeof(Word);
    uint8_t* planeA = a.dst + a.layout.planeAOffset + first;
    uint16_t* planeB = reinterpret_cast<uint16_t*>(a.dst + a.layout.planeBOffset) + first;

    // ---- Split: raw planes to the frame, symbols to registers, the top and bottom symbol. ----
    uint32_t sym[kMaxGroupsPerLane][2];
    uint32_t top = 0, bottom = 255;
    constexpr int kBatch = 4;  // groups loaded before any is split: 4 x 16 (fp32: 32) bytes
#pragma unroll
    for (int j0 = 0; j0 < static_cast<int>(kMaxGroupsPerLane); j0 += kBatch) {
      uint32_t x[kBatch][Split::kWords];
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const uint32_t g = lane + kLanes * (j0 + b), valid = groupValid(n, g);
        if (j0 + b < static_cast<int>(groupsPerLane) && valid)
          loadGroupWords<D>(in + g * kGroup * sizeof(Word), valid, a.srcAligned16, x[b]);
      }
#pragma unroll
      for (int b = 0; b < kBatch; ++b) {
        const int j = j0 + b;
        const uint32_t g = lane + kLanes * j, valid = groupValid(n, g);
        sym[j][0] = sym[j][1] = 0;
        if (j >= static_cast<int>(groupsPerLane) || !valid) continue;
        uint32_t raw[2], rawB[4];
        Split::split(x[b], sym[j], raw, rawB);
        storePlanes<D>(g, valid, raw, rawB, planeA, planeB);
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          if (i >= static_cast<int>(valid)) break;
          top = max(top, symbolAt(sym, j, i));
          bottom = min(bottom, symbolAt(sym, j, i));
        }
      }
    }
    top = warpMax(top);
    bottom = warpMin(bottom);

    // ---- The code: every lane's bits under the 8 codes, the cheapest for the chunk. ----
    uint32_t mode = kModeConstant, table = 0, width = 0, base = 0, myBits = 0, prefix = 0;
    bool escapes = false;
    uint32_t blockBytes = kBlockAlign;
    if (top != bottom) {
      uint32_t packed[4] = {0, 0, 0, 0};  // 16-bit costs of codes 0..7
      bool myEscapes = false;
#pragma unroll
      for (int j = 0; j < static_cast<int>(kMaxGroupsPerLane); ++j) {
        const uint32_t valid = j < static_cast<int>(groupsPerLane) ? groupValid(n, lane + kLanes * j) : 0;
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          if (i >= static_cast<int>(valid)) break;
          const uint32_t index = min(top - symbolAt(sym, j, i), offsets);
          myEscapes |= index == offsets;
          const uint4 c = tables.cost[index];
          packed[0] += c.x;
          packed[1] += c.y;
          packed[2] += c.z;
          packed[3] += c.w;
        }
      }
      uint32_t best = 0xffffffffu;
#pragma unroll
      for (uint32_t t = 0; t < kTables; ++t) {
        const uint32_t total = warpSum((packed[t / 2] >> (16 * (t % 2))) & 0xFFFFu);
        if (total < best) best = total, table = t;  // the lowest code on ties, as ref_v2.cpp
      }
#pragma unroll
      for (uint32_t t = 0; t < kTables; ++t)
        if (t == table) myBits = (packed[t / 2] >> (16 * (t % 2))) & 0xFFFFu;
      escapes = __any_sync(kFullMask, myEscapes);
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
                 (k == 0 ? kStateInclusive : kStateAggregate) | blockBytes);

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
        const uint32_t valid = j < static_cast<int>(groupsPerLane) ? groupValid(n, g) : 0;
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
        stageWords[0] = kModeHuffman | ((table | (escapes ? kEscapeFlag : 0)) << 8) | (top << 16) |
                        (width << 24);
        stageWords[1] = base;
      }
      if (width) {  // this lane's size delta, w bits at bit 64 + lane * w
        const uint32_t bit = 8 * kHeaderBytes + lane * width, delta = myBits - base;
        atomicOr(&stageWords[bit / 32], delta << (bit % 32));
        if (bit % 32 + width > 32) atomicOr(&stageWords[bit / 32 + 1], delta >> (32 - bit % 32));
      }
      // The lane's stream, from its bit offset; neighbouring lanes share the words at the ends,
      // so words are OR-ed in.
      const uint32_t bitPos = 8 * streamsOffset(width) + prefix;
      uint32_t word = bitPos / 32, fill = bitPos % 32;
      uint64_t buffer = 0;
      const uint32_t* code = tables.code[table];
#pragma unroll
      for (int j = 0; j < static_cast<int>(kMaxGroupsPerLane); ++j) {
        const uint32_t valid = j < static_cast<int>(groupsPerLane) ? groupValid(n, lane + kLanes * j) : 0;
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          if (i >= static_cast<int>(valid)) break;
          const uint32_t s = symbolAt(sym, j, i), index = min(top - s, offsets);
          const uint32_t c = code[index], len = c >> 16;
          const bool escape = index == offsets;
          const uint32_t bits = (c & 0xFFFFu) | (escape ? s << len : 0u);
          buffer |= static_cast<uint64_t>(bits) << fill;
          fill += len + (escape ? kEscapeBits : 0u);
          if (fill >= 32) {  // a symbol is at most 16 bits, so at most 47 bits are pending
            atomicOr(&stageWords[word++], static_cast<uint32_t>(buffer));
            buffer >>= 32;
            fill -= 32;
          }
        }
      }
      if (fill) atomicOr(&stageWords[word], static_cast<uint32_t>(buffer));
    }
    __syncwarp();

    // ---- Place the block after its predecessors and copy it out. ----
    const uint64_t start = k == 0 ? 0 : lookBack(a.chunkState, k, blockBytes, lane);
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
}

template <int D>
void launchEncode(const EncodeArgs& args, cudaStream_t stream) {
  const uint64_t warps = args.layout.numChunks ? args.layout.numChunks : 1;
  const unsigned blocks = static_cast<unsigned>(
      std::min<uint64_t>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock, 1u << 20));
  encodeKernel<D><<<blocks, kThreads, 0, stream>>>(args);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void encodeDevice(uint32_t chunkElems, int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, uint8_t* scratch,
                  cudaStream_t stream) {
  EncodeArgs args{src,
                  count,
                  dst,
                  encodedBytesOut,
                  status,
                  reinterpret_cast<uint32_t*>(scratch),
                  reinterpret_cast<uint64_t*>(scratch + 8),
                  frameLayout(dtype, count, chunkElems),
                  chunkElems,
                  dtype,
                  reinterpret_cast<uintptr_t>(src) % 16 == 0};
  CCLZ_REQUIRE(args.layout.numChunks < (1u << 31), cclzInvalidArgument, "too many chunks");
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

}  // namespace cclz::lossless::v2
