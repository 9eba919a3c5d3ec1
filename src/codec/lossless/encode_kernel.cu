// Lossless encode on the device: one thread block per chunk, one pass over the input.
//
// A block splits its chunk into symbols (kept in shared memory) and raw planes (written straight
// to their fixed place in the frame), builds the chunk's Huffman code from the histogram, codes
// the streams into a shared-memory copy of the chunk block, learns where the block goes from
// its predecessors (a decoupled look-back over per-chunk states, so the frame is compact without
// a second pass), and copies the block out. The bytes equal ref.cpp's.
#include <cuda_runtime.h>

#include "codec/lossless/device.cuh"

namespace cclz::lossless {
namespace {

constexpr int kEncodeThreads = 256;
constexpr int kBatch = 4;  // groups each thread loads before it processes them
// NOTE: exponents of real data fall in a handful of bins, so the lanes of a warp would mostly hit
// the same few histogram counters. Each thread instead counts the 8 symbols of a window around
// the chunk's bulk in registers (WindowCounts); only symbols outside it go to shared-memory
// atomics.
constexpr uint32_t kWindow = 8;

constexpr uint64_t kStateAggregate = 1ull << 62;  // the block's own size is known
constexpr uint64_t kStateInclusive = 2ull << 62;  // the end offset of the block is known
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
  Params p;
  int dtype;
  bool srcAligned16;
};

// All threads of block k (after publishSize): sum the sizes of blocks k-1, k-2, ..., one per
// thread, until a block whose end offset is known; then publish this block's end offset.
// NOTE: a block-wide window (not a warp) keeps the walk short when hundreds of blocks finish
// together, as on small messages.
struct LookBackShared {
  uint32_t nearestInclusive;
  uint64_t partial[kEncodeThreads / 32];
};

// Thread 0, as soon as the block's size is known: lets later blocks count it while this one is
// still writing its block. Chunk 0's end offset is its size.
__device__ void publishSize(uint64_t* state, uint64_t k, uint64_t size) {
  atomicExch(reinterpret_cast<unsigned long long*>(state + k),
             (k == 0 ? kStateInclusive : kStateAggregate) | size);
}

__device__ uint64_t lookBack(uint64_t* state, uint64_t k, uint64_t size, LookBackShared& lb) {
  const uint32_t tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  if (k == 0) return 0;
  uint64_t exclusive = 0;
  int64_t base = static_cast<int64_t>(k) - 1;
  while (true) {
    const int64_t j = base - static_cast<int64_t>(tid);
    uint64_t v = kStateInclusive;  // before chunk 0: an end offset of zero
    if (j >= 0) v = *reinterpret_cast<volatile uint64_t*>(state + j);
    const uint32_t flag = static_cast<uint32_t>(v >> 62);
    if (tid == 0) lb.nearestInclusive = blockDim.x;
    __syncthreads();
    if (flag == 2) atomicMin(&lb.nearestInclusive, tid);
    __syncthreads();
    const uint32_t nearest = lb.nearestInclusive;
    // A block nearer than the nearest end offset that has published nothing yet: look again.
    if (__syncthreads_or(flag == 0 && tid <= nearest)) {
      __nanosleep(100);  // leave the issue slots to blocks that have work
      continue;
    }
    uint64_t mine = tid <= nearest ? (v & kStateValue) : 0;
    for (int d = 16; d > 0; d >>= 1) mine += __shfl_xor_sync(0xffffffffu, mine, d);
    if (lane == 0) lb.partial[warp] = mine;
    __syncthreads();
    for (uint32_t w = 0; w < blockDim.x / 32; ++w) exclusive += lb.partial[w];
    __syncthreads();  // partial is rewritten by the next round
    if (nearest < blockDim.x) break;
    base -= blockDim.x;
  }
  if (tid == 0)
    atomicExch(reinterpret_cast<unsigned long long*>(state + k),
               kStateInclusive | (exclusive + size));
  return exclusive;
}

__device__ void zeroBytes(uint8_t* dst, uint64_t from, uint64_t to) {
  for (uint64_t i = from + threadIdx.x; i < to; i += blockDim.x) dst[i] = 0;
}

__device__ void writeHeader(const EncodeArgs& a, uint64_t frameBytes) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kFrameVersion;
  h.codec = cclzCodecLossless;
  h.dtype = static_cast<uint8_t>(a.dtype);
  h.count = a.count;
  h.frameBytes = frameBytes;
  h.chunkElems = a.p.chunkElems;
  h.numChunks = static_cast<uint32_t>(a.layout.numChunks);
  h.params[0] = static_cast<uint8_t>(a.p.log2Streams);
  h.params[1] = static_cast<uint8_t>(a.p.maxCodeLength);
  h.checksum = headerChecksum(h);
  *reinterpret_cast<FrameHeader*>(a.dst) = h;
  if (a.encodedBytesOut) *a.encodedBytesOut = frameBytes;
  a.status->encodedBytes = frameBytes;
}

// Code and length of the symbols of group g, with the 8 table reads issued together. Symbols past
// a short group's end get length 0, so they add no bits.
__device__ void groupCodes(const uint8_t* symbols, const uint32_t* codeAndLength, uint32_t g,
                           uint32_t valid, uint32_t (&cl)[kGroup]) {
  if (valid == kGroup) {
    const uint2 packed = *reinterpret_cast<const uint2*>(symbols + g * kGroup);
#pragma unroll
    for (int i = 0; i < kGroup; ++i)
      cl[i] = codeAndLength[((i < 4 ? packed.x : packed.y) >> (8 * (i % 4))) & 0xFFu];
  } else {
#pragma unroll
    for (int i = 0; i < kGroup; ++i)
      cl[i] = i < static_cast<int>(valid) ? codeAndLength[symbols[g * kGroup + i]] : 0u;
  }
}

// A thread's counts of the kWindow symbols [base, base+8): a group's counts in 4-bit fields (at
// most 8 each), folded after every group into 16-bit fields: (d0,d4) (d2,d6) (d1,d5) (d3,d7).
struct WindowCounts {
  uint32_t base;
  uint32_t c04 = 0, c26 = 0, c15 = 0, c37 = 0;

  __device__ void addGroup(const uint32_t (&sym)[2], uint32_t valid, uint32_t* histogram) {
    uint32_t nibbles = 0;
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {
      const uint32_t s = (sym[i / 4] >> (8 * (i % 4))) & 0xFFu, d = s - base;
      if (i < static_cast<int>(valid)) {
        if (d < kWindow)
          nibbles += 1u << (4 * d);
        else
          atomicAdd(&histogram[s], 1u);
      }
    }
    const uint32_t even = nibbles & 0x0F0F0F0Fu, odd = (nibbles >> 4) & 0x0F0F0F0Fu;
    c04 += even & 0x00FF00FFu;
    c26 += (even >> 8) & 0x00FF00FFu;
    c15 += odd & 0x00FF00FFu;
    c37 += (odd >> 8) & 0x00FF00FFu;
  }
  // Sums the warp's counts (at most 32 x 256 per field, so 16 bits suffice) into the histogram.
  __device__ void flush(uint32_t* histogram) {
    for (int d = 16; d > 0; d >>= 1) {
      c04 += __shfl_xor_sync(0xffffffffu, c04, d);
      c26 += __shfl_xor_sync(0xffffffffu, c26, d);
      c15 += __shfl_xor_sync(0xffffffffu, c15, d);
      c37 += __shfl_xor_sync(0xffffffffu, c37, d);
    }
    if ((threadIdx.x & 31) == 0) {
      const uint32_t fields[4] = {c04, c15, c26, c37};  // d = k and k + 4 for k = 0..3
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        if (fields[k] & 0xFFFFu) atomicAdd(&histogram[base + k], fields[k] & 0xFFFFu);
        if (fields[k] >> 16) atomicAdd(&histogram[base + k + 4], fields[k] >> 16);
      }
    }
  }
};

// One group: symbols to shared memory and the window counts, raw bits to the frame's planes.
template <int D>
__device__ void splitGroup(const uint32_t (&x)[device::Splitter<D>::kWords], uint32_t g,
                           uint32_t valid, WindowCounts& counts, uint32_t* histogram,
                           uint8_t* symbols, uint8_t* planeA, uint16_t* planeB) {
  uint32_t sym[2], raw[2], rawB[4];
  device::Splitter<D>::split(x, sym, raw, rawB);
  counts.addGroup(sym, valid, histogram);
  if (valid == kGroup) {
    *reinterpret_cast<uint2*>(symbols + g * kGroup) = make_uint2(sym[0], sym[1]);
    *reinterpret_cast<uint2*>(planeA + g * kGroup) = make_uint2(raw[0], raw[1]);
    if constexpr (D == cclzFloat32)
      *reinterpret_cast<uint4*>(planeB + g * kGroup) =
          make_uint4(rawB[0], rawB[1], rawB[2], rawB[3]);
  } else {
#pragma unroll
    for (int i = 0; i < kGroup; ++i) {  // unrolled: the arrays stay in registers
      if (i >= static_cast<int>(valid)) break;
      symbols[g * kGroup + i] = static_cast<uint8_t>(sym[i / 4] >> (8 * (i % 4)));
      planeA[g * kGroup + i] = static_cast<uint8_t>(raw[i / 4] >> (8 * (i % 4)));
      if constexpr (D == cclzFloat32)
        planeB[g * kGroup + i] = static_cast<uint16_t>(rawB[i / 2] >> (16 * (i % 2)));
    }
  }
}

constexpr uint32_t kMaxStreams = kMaxChunkElems / kMinStreamSymbols;  // 1024

// A stream's groups are s, s+S, s+2S, ...: round j is group s+jS. Segment `item` of a stream is
// part p of its rounds when `parts` threads share the stream.
struct Segment {
  uint32_t stream, firstRound, endRound;
};

__device__ Segment segmentOf(uint32_t item, uint32_t parts, uint32_t streams, uint32_t groups) {
  const uint32_t stream = item / parts, part = item % parts;
  const uint32_t rounds = stream < groups ? (groups - stream + streams - 1) / streams : 0;
  return Segment{stream, part * rounds / parts, (part + 1) * rounds / parts};
}

// Calls onGroup(codes) for each group of a segment, in stream order; codes as in groupCodes.
template <typename F>
__device__ void forSegmentCodes(const Segment& seg, uint32_t streams, uint32_t n,
                                const uint8_t* symbols, const uint32_t* codeAndLength,
                                F&& onGroup) {
  for (uint32_t j = seg.firstRound; j < seg.endRound; ++j) {
    const uint32_t g = seg.stream + j * streams;
    uint32_t cl[kGroup];
    groupCodes(symbols, codeAndLength, g, min(static_cast<uint32_t>(kGroup), n - g * kGroup), cl);
    onGroup(cl);
  }
}

__device__ uint32_t streamBytes(const uint32_t* segmentBits, uint32_t stream, uint32_t parts) {
  uint32_t bits = 0;
  for (uint32_t p = 0; p < parts; ++p) bits += segmentBits[stream * parts + p];
  return (bits + 7) / 8;
}

// Per-chunk shared state that is not sized by the chunk.
struct EncodeShared {
  // The histogram (the first 256 words) while the code is built; then per-segment bits and
  // per-stream offsets.
  uint32_t work[2 * kMaxStreams];
  uint32_t codeAndLength[kMaxSymbols];  // bit-reversed code | length << 16
  uint32_t weights[kMaxSymbols];
  uint32_t firstCode[kMaxCodeLength + 1];
  uint8_t length[kMaxSymbols];
  uint8_t present[kMaxSymbols];
  uint8_t ranked[kMaxSymbols];
  uint32_t scanScratch[32];
  uint32_t chunk, presentCount;
  LookBackShared lookBack;
};

template <int D>
__global__ void __launch_bounds__(kEncodeThreads, 4) encodeKernel(EncodeArgs a) {
  using E = Elements<D>;
  using Word = typename E::Word;
  extern __shared__ __align__(16) uint8_t dynamicShared[];
  __shared__ EncodeShared sh;
  const uint32_t tid = threadIdx.x, threads = blockDim.x, lane = tid & 31;
  const uint32_t chunkElems = a.p.chunkElems, streams = 1u << a.p.log2Streams;
  const int maxLen = static_cast<int>(a.p.maxCodeLength);
  uint8_t* symbols = dynamicShared;             // chunkElems bytes
  uint8_t* block = dynamicShared + chunkElems;  // maxBlockBytes(chunkElems) bytes

  if (a.layout.numChunks == 0) {  // an empty tensor: the header alone
    if (tid == 0) writeHeader(a, a.layout.blocksOffset);
    return;
  }
  // Chunks are taken in launch order so that a block only ever waits for blocks already running.
  if (tid == 0) sh.chunk = atomicAdd(a.workCounter, 1u);
  for (uint32_t i = tid; i < kMaxSymbols; i += threads) sh.work[i] = 0;
  for (uint32_t i = tid; i < kMaxSymbols; i += threads) sh.length[i] = 0;
  __syncthreads();
  const uint64_t k = sh.chunk;
  const uint64_t first = k * chunkElems;
  const uint32_t n = static_cast<uint32_t>(min(static_cast<uint64_t>(chunkElems), a.count - first));
  const uint32_t groups = (n + kGroup - 1) / kGroup;

  // ---- Split: symbols to shared memory and the histogram, raw planes to the frame. ----
  const uint8_t* in = static_cast<const uint8_t*>(a.src) + first * sizeof(Word);
  uint8_t* planeA = a.dst + a.layout.planeAOffset + first;
  uint16_t* planeB = reinterpret_cast<uint16_t*>(a.dst + a.layout.planeBOffset) + first;
  uint32_t* histogram = sh.work;
  constexpr int kWords = device::Splitter<D>::kWords;
  // The window: from a little above the largest exponent of the chunk's first 8 elements down.
  WindowCounts counts;
  {
    uint32_t x[kWords], sym[2], raw[2], rawB[4];
    device::loadGroupWords<D>(in, min(static_cast<uint32_t>(kGroup), n), a.srcAligned16, x);
    device::Splitter<D>::split(x, sym, raw, rawB);
    uint32_t top = 0;
#pragma unroll
    for (int i = 0; i < kGroup; ++i) top = max(top, (sym[i / 4] >> (8 * (i % 4))) & 0xFFu);
    counts.base = min(max(top, 6u) - 6u, kMaxSymbols - kWindow);
  }
  // NOTE: each thread loads kBatch groups before it uses any, so that enough bytes are in flight
  // per multiprocessor to reach memory bandwidth.
  for (uint32_t g0 = tid; g0 < groups; g0 += threads * kBatch) {
    uint32_t x[kBatch][kWords];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const uint32_t g = g0 + b * threads;
      if (g < groups)
        device::loadGroupWords<D>(in + g * kGroup * sizeof(Word),
                                  min(static_cast<uint32_t>(kGroup), n - g * kGroup),
                                  a.srcAligned16, x[b]);
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const uint32_t g = g0 + b * threads;
      if (g < groups)
        splitGroup<D>(x[b], g, min(static_cast<uint32_t>(kGroup), n - g * kGroup), counts,
                      histogram, symbols, planeA, planeB);
    }
  }
  counts.flush(histogram);
  if (k == 0) {  // the alignment gaps of the frame are zero, as in the reference
    const Layout& l = a.layout;
    zeroBytes(a.dst, l.tableOffset + 8 * l.numChunks, l.planeAOffset);
    zeroBytes(a.dst, l.planeAOffset + a.count, l.planeBOffset);
    zeroBytes(a.dst, l.planeBOffset + (E::kHasPlaneB ? 2 * a.count : 0), l.blocksOffset);
  }
  __syncthreads();

  // ---- Code: list the symbols present, rank them, build lengths. ----
  if (tid < 32) {
    uint32_t found = 0;
    for (uint32_t j = 0; j < kMaxSymbols / 32; ++j) {
      const uint32_t s = j * 32 + lane;
      const bool has = sh.work[s] > 0;
      const uint32_t mask = __ballot_sync(0xffffffffu, has);
      if (has) sh.present[found + __popc(mask & ((1u << lane) - 1))] = static_cast<uint8_t>(s);
      found += __popc(mask);
    }
    if (lane == 0) sh.presentCount = found;
  }
  __syncthreads();
  const uint32_t present = sh.presentCount;
  for (uint32_t i = tid; i < present; i += threads) {
    const uint32_t s = sh.present[i], c = sh.work[s];
    uint32_t rank = 0;
    for (uint32_t j = 0; j < present; ++j) {
      const uint32_t t = sh.present[j];
      rank += rankBefore(sh.work[t], t, c, s);
    }
    sh.ranked[rank] = static_cast<uint8_t>(s);
  }
  __syncthreads();
  const int firstSym = sh.present[0];
  const int span = sh.present[present - 1] - firstSym;
  if (tid == 0) {
    codeLengthsFromRanked(sh.ranked, sh.work, static_cast<int>(present), maxLen, sh.weights,
                          sh.length);
    // First canonical code of each length (DEFLATE's numbering); the codes themselves follow in
    // parallel below.
    uint32_t countOfLength[kMaxCodeLength + 1] = {};
    for (int j = 0; j <= span; ++j) ++countOfLength[sh.length[firstSym + j]];
    uint32_t c = 0;
    for (int len = 1; len <= kMaxCodeLength; ++len) {
      c = (c + (len > 1 ? countOfLength[len - 1] : 0)) << 1;
      sh.firstCode[len] = c;
    }
  }
  __syncthreads();
  for (uint32_t s = tid; s < kMaxSymbols; s += threads) {
    const uint32_t len = sh.length[s];
    uint32_t cl = 0;
    if (len) {  // the code of s: the first of its length plus the shorter-valued symbols of that
                // length
      uint32_t before = 0;
      for (uint32_t t = firstSym; t < s; ++t) before += sh.length[t] == len;
      cl = reverseBits(sh.firstCode[len] + before, static_cast<int>(len)) | (len << 16);
    }
    sh.codeAndLength[s] = cl;
  }
  __syncthreads();

  // ---- Stream sizes, then the choice between the code and storing the symbols. ----
  // With fewer streams than threads, `parts` threads share a stream, each coding a consecutive
  // run of its groups (a segment), so that every thread works. The histogram's memory is free now.
  const uint32_t parts = streams >= threads ? 1 : threads / streams;
  const uint32_t segments = streams * parts;
  uint32_t* segmentBits = sh.work;                 // per segment, stream-major
  uint32_t* streamOffset = sh.work + kMaxStreams;  // per stream, from the stream data start
  for (uint32_t item = tid; item < segments; item += threads) {
    const Segment seg = segmentOf(item, parts, streams, groups);
    uint32_t bits = 0;
    forSegmentCodes(seg, streams, n, symbols, sh.codeAndLength, [&](const uint32_t(&cl)[kGroup]) {
#pragma unroll
      for (int i = 0; i < kGroup; ++i) bits += cl[i] >> 16;
    });
    segmentBits[item] = bits;
  }
  __syncthreads();
  // Thread t owns the consecutive streams [t*per, (t+1)*per), so one scan gives all offsets.
  const uint32_t per = (streams + threads - 1) / threads;
  const uint32_t myFirst = min(tid * per, streams), myEnd = min(myFirst + per, streams);
  uint32_t myBytes = 0;
  for (uint32_t st = myFirst; st < myEnd; ++st) myBytes += streamBytes(segmentBits, st, parts);
  uint32_t totalStreamBytes;
  uint32_t offset = device::blockExclusiveScan(myBytes, sh.scanScratch, &totalStreamBytes);
  for (uint32_t st = myFirst; st < myEnd; ++st) {
    streamOffset[st] = offset;
    offset += streamBytes(segmentBits, st, parts);
  }
  const uint32_t dataOffset = streamDataOffset(span, streams);
  const bool useCode = dataOffset + totalStreamBytes < kBlockHeaderBytes + n;
  const uint32_t blockBytes = static_cast<uint32_t>(
      alignUp(useCode ? dataOffset + totalStreamBytes : kBlockHeaderBytes + n, kBlockAlign));
  if (tid == 0) publishSize(a.chunkState, k, blockBytes);
  for (uint32_t i = tid * 16; i < blockBytes; i += threads * 16)
    *reinterpret_cast<uint4*>(block + i) = make_uint4(0, 0, 0, 0);
  __syncthreads();

  // ---- The chunk block, in shared memory. ----
  if (!useCode) {
    if (tid == 0) block[0] = kModeStored;
    for (uint32_t i = tid; i < n; i += threads) block[kBlockHeaderBytes + i] = symbols[i];
  } else {
    if (tid == 0) {
      block[0] = kModeHuffman;
      block[1] = static_cast<uint8_t>(firstSym);
      block[2] = static_cast<uint8_t>(span);
      for (int j = 0; j <= span; ++j)
        block[kBlockHeaderBytes + j / 2] |=
            static_cast<uint8_t>(sh.length[firstSym + j] << (4 * (j % 2)));
    }
    uint16_t* sizes = reinterpret_cast<uint16_t*>(block + streamSizesOffset(span));
    for (uint32_t st = tid; st < streams; st += threads)
      sizes[st] = static_cast<uint16_t>(streamBytes(segmentBits, st, parts));
    __syncthreads();  // the size words are written before the streams are OR-ed in next to them
    uint32_t* words = reinterpret_cast<uint32_t*>(block);
    for (uint32_t item = tid; item < segments; item += threads) {
      const Segment seg = segmentOf(item, parts, streams, groups);
      uint32_t bitPos = 8 * (dataOffset + streamOffset[seg.stream]);
      for (uint32_t q = seg.stream * parts; q < item; ++q) bitPos += segmentBits[q];
      // NOTE: neighbouring segments may share a word, so words are OR-ed in atomically; the
      // buffer starts at the word boundary (its first bits zero) and flushes whole words.
      uint32_t word = bitPos / 32, fill = bitPos % 32;
      uint64_t buffer = 0;
      forSegmentCodes(seg, streams, n, symbols, sh.codeAndLength, [&](const uint32_t(&cl)[kGroup]) {
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          buffer |= static_cast<uint64_t>(cl[i] & 0xFFFFu) << fill;
          fill += cl[i] >> 16;
          if (fill >= 32) {  // codes are <= 12 bits, so at most 43 bits are pending here
            atomicOr(&words[word++], static_cast<uint32_t>(buffer));
            buffer >>= 32;
            fill -= 32;
          }
        }
      });
      if (fill) atomicOr(&words[word], static_cast<uint32_t>(buffer));
    }
  }
  __syncthreads();

  // ---- Place the block after its predecessors and copy it out. ----
  const uint64_t start = lookBack(a.chunkState, k, blockBytes, sh.lookBack);
  uint8_t* out = a.dst + a.layout.blocksOffset + start;
  for (uint32_t i = tid * 16; i < blockBytes; i += threads * 16)
    *reinterpret_cast<uint4*>(out + i) = *reinterpret_cast<const uint4*>(block + i);
  if (tid == 0) {
    reinterpret_cast<uint64_t*>(a.dst + a.layout.tableOffset)[k] = start + blockBytes;
    if (k + 1 == a.layout.numChunks) writeHeader(a, a.layout.blocksOffset + start + blockBytes);
  }
}

template <int D>
void launchEncode(const EncodeArgs& args, cudaStream_t stream) {
  const size_t dynamicBytes = args.p.chunkElems + maxBlockBytes(args.p.chunkElems);
  static std::atomic<uint64_t> configured{0};  // devices whose limit is raised
  device::ensureSharedMemoryLimit(encodeKernel<D>, static_cast<int>(2 * (kMaxChunkElems + 64)),
                                  configured);
  const unsigned blocks = static_cast<unsigned>(args.layout.numChunks ? args.layout.numChunks : 1);
  encodeKernel<D><<<blocks, kEncodeThreads, dynamicBytes, stream>>>(args);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void encodeDevice(const Params& p, int dtype, const void* src, uint64_t count, uint8_t* dst,
                  uint64_t* encodedBytesOut, DeviceStatus* status, uint8_t* scratch,
                  cudaStream_t stream) {
  EncodeArgs args{src,
                  count,
                  dst,
                  encodedBytesOut,
                  status,
                  reinterpret_cast<uint32_t*>(scratch),
                  reinterpret_cast<uint64_t*>(scratch + 8),
                  frameLayout(dtype, count, p.chunkElems),
                  p,
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

}  // namespace cclz::lossless
