// Lossless decode on the device: one thread block per chunk, one thread per stream.
//
// A block validates the header and its chunk-table entry, stages its chunk block in shared
// memory, builds a 2^maxLen-entry lookup table from the code lengths, and each thread decodes its
// stream group by group, joining each symbol with the raw planes and writing 16-byte vectors.
// Every check of ref.cpp is made here too, so a frame the reference rejects is rejected here; the
// first error goes to DeviceStatus::decodeError. Reads stay inside the frame, writes inside the
// count elements of the destination.
#include <cuda_runtime.h>

#include <type_traits>

#include "codec/lossless/device.cuh"

namespace cclz::lossless {
namespace {

constexpr int kDecodeMaxThreads = 256;

struct DecodeArgs {
  const uint8_t* src;
  uint64_t srcBytes;
  void* dst;
  uint64_t count;
  DeviceStatus* status;
  Layout layout;
  Params p;
  int dtype;
};

struct DecodeShared {
  uint32_t countOfLength[kMaxCodeLength + 1];
  uint16_t rankEnd[kMaxSymbols];    // codes in canonical order: end of each one's table range
  uint16_t rankEntry[kMaxSymbols];  // and its table entry (length << 8 | symbol)
  uint32_t ranks;
  bool complete;  // the code fills the table: every entry is valid
  uint32_t scanScratch[32];
  uint32_t error;
  uint64_t blockBegin;
  uint32_t blockBytes;
};

// Thread 0: checks the header and this chunk's table entry, as decodeRef does.
__device__ uint32_t checkHeaderAndEntry(const DecodeArgs& a, uint64_t k, uint32_t n,
                                        uint64_t* begin, uint32_t* bytes) {
  if (a.srcBytes < kFrameHeaderBytes) return kFrameTruncated;
  FrameHeader h;
  const uint32_t checksum = device::headerChecksumFromGlobal(a.src, &h);
  uint32_t err = checkFrameHeaderSum(h, checksum, a.srcBytes);
  if (err == kFrameOk) err = checkFrameMatches(h, cclzCodecLossless, a.dtype, a.count);
  if (err == kFrameOk) err = checkLosslessHeader(h);
  if (err != kFrameOk) return err;
  const Params fp = headerParams(h);
  if (fp.chunkElems != a.p.chunkElems || fp.log2Streams != a.p.log2Streams ||
      fp.maxCodeLength != a.p.maxCodeLength)
    return kFrameMismatch;
  if (k >= a.layout.numChunks) return kFrameOk;  // an empty frame: nothing more to check
  const uint64_t* table = reinterpret_cast<const uint64_t*>(a.src + a.layout.tableOffset);
  const uint64_t blocksBytes = h.frameBytes - a.layout.blocksOffset;
  const uint64_t b = k ? table[k - 1] : 0, e = table[k];
  if (e < b || e > blocksBytes || (e - b) % kBlockAlign != 0) return kFrameBadChunkTable;
  if (k + 1 == a.layout.numChunks && e != blocksBytes) return kFrameBadChunkTable;
  if (e - b > maxBlockBytes(n)) return kFrameBadChunkTable;
  *begin = b;
  *bytes = static_cast<uint32_t>(e - b);
  return kFrameOk;
}

// Thread 0: reads the code lengths of a Huffman block and lists the codes in canonical order
// (by length, then symbol). Read most-significant bit first as maxLen-bit numbers, the canonical
// codes cut [0, 2^maxLen) into consecutive ranges, one per code, of 2^(maxLen - length) values.
__device__ uint32_t prepareCode(const uint8_t* block, uint32_t blockBytes, const Params& p,
                                DecodeShared& sh) {
  const int first = block[1], span = block[2];
  const uint32_t streams = 1u << p.log2Streams;
  if (first + span >= kMaxSymbols || streamDataOffset(span, streams) > blockBytes)
    return kFrameBadChunk;
  uint32_t rankOfLength[kMaxCodeLength + 2] = {};  // first rank of each length, after the counts
  uint64_t kraft = 0;
  for (int j = 0; j <= span; ++j) {
    const uint32_t len = (block[kBlockHeaderBytes + j / 2] >> (4 * (j % 2))) & 0xF;
    if (len > p.maxCodeLength) return kFrameBadChunk;
    if (len) {
      ++rankOfLength[len + 1];
      kraft += 1ull << (p.maxCodeLength - len);
    }
  }
  if (kraft == 0 || kraft > (1ull << p.maxCodeLength)) return kFrameBadChunk;
  sh.complete = kraft == (1ull << p.maxCodeLength);
  for (int len = 1; len <= kMaxCodeLength; ++len) rankOfLength[len + 1] += rankOfLength[len];
  for (int j = 0; j <= span; ++j) {
    const uint32_t len = (block[kBlockHeaderBytes + j / 2] >> (4 * (j % 2))) & 0xF;
    if (len) sh.rankEntry[rankOfLength[len]++] = static_cast<uint16_t>((len << 8) | (first + j));
  }
  const uint32_t ranks = rankOfLength[kMaxCodeLength + 1];
  uint32_t end = 0;
  for (uint32_t r = 0; r < ranks; ++r) {
    end += 1u << (p.maxCodeLength - (sh.rankEntry[r] >> 8));
    sh.rankEnd[r] = static_cast<uint16_t>(end);
  }
  sh.ranks = ranks;
  return kFrameOk;
}

// Table entries are length << 8 | symbol. No code begins with the bits of an invalid entry: its
// length is 0, so it consumes nothing, and a stream that met one has a shortest length of 0.
constexpr uint16_t kInvalidEntry = 0;

// All threads: the table entry at index i decodes the code whose first bits (least significant
// first) are i; reversed, i is a value v in the ranges of prepareCode. Each thread fills a run of
// consecutive v, walking the ranges, so an entry costs a few instructions.
__device__ void fillTable(const Params& p, const DecodeShared& sh, uint16_t* table) {
  const uint32_t maxLen = p.maxCodeLength, size = 1u << maxLen;
  const uint32_t per = (size + blockDim.x - 1) / blockDim.x;
  const uint32_t v0 = min(threadIdx.x * per, size), v1 = min(v0 + per, size);
  uint32_t lo = 0, hi = sh.ranks;  // first rank whose range ends after v0
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (sh.rankEnd[mid] <= v0)
      lo = mid + 1;
    else
      hi = mid;
  }
  uint32_t r = lo;
  for (uint32_t v = v0; v < v1; ++v) {
    while (r < sh.ranks && sh.rankEnd[r] <= v) ++r;
    table[__brev(v) >> (32 - maxLen)] = r < sh.ranks ? sh.rankEntry[r] : kInvalidEntry;
  }
}

// Reads a stream from the staged block, least significant bit first, 32-bit words at a time.
// NOTE: the buffer is kept shifted left by one bit, so that `buffer & (mask << 1)` is already the
// byte offset of a 16-bit table entry: with the table at the start of dynamic shared memory, a
// lookup is one masked load with no address arithmetic. Bit 0 holds a spent bit and is masked.
// kChecked: track the shortest length met, to catch invalid entries (only incomplete codes have
// them).
template <bool kChecked>
struct BitReader {
  const uint32_t* words;
  uint32_t lastWord;  // reads past the staged words repeat the last one: harmless garbage
  uint32_t next;      // next word to load
  uint64_t buffer;    // valid bits at positions 1..bits
  uint32_t bits;
  uint32_t shortest;  // shortest code length met: 0 if an invalid entry was used

  __device__ BitReader(const uint8_t* block, uint32_t blockBytes, uint32_t byteOffset)
      : words(reinterpret_cast<const uint32_t*>(block)),
        lastWord(blockBytes / 4 - 1),
        next(byteOffset / 4),
        shortest(kMaxCodeLength) {
    const uint32_t skip = 8 * (byteOffset % 4);
    buffer = static_cast<uint64_t>(words[min(next++, lastWord)] >> skip) << 1;
    bits = 32 - skip;
  }
  // Keeps at least 32 bits, enough for two codes of up to 12 bits. Without a branch: the lanes of
  // a warp need refills at different times, so a branch would be taken almost always.
  __device__ void refill() {
    const uint32_t w = words[min(next, lastWord)];
    const bool need = bits < 32;
    buffer |= need ? static_cast<uint64_t>(w) << (bits + 1) : 0;
    next += need;
    bits += need ? 32 : 0;
  }
  __device__ uint32_t decode(const uint8_t* table, uint32_t byteMask) {
    const uint32_t entry =
        *reinterpret_cast<const uint16_t*>(table + (static_cast<uint32_t>(buffer) & byteMask));
    const uint32_t len = entry >> 8;
    if constexpr (kChecked) shortest = min(shortest, len);
    buffer >>= len;
    bits -= len;
    return entry & 0xFFu;
  }
  // Bits consumed since byteOffset: what was loaded minus what is left.
  __device__ uint32_t consumed(uint32_t byteOffset) const {
    return 32 * (next - byteOffset / 4) - 8 * (byteOffset % 4) - bits;
  }
};

template <int D>
__global__ void __launch_bounds__(kDecodeMaxThreads) decodeKernel(DecodeArgs a) {
  using E = Elements<D>;
  using Word = typename E::Word;
  extern __shared__ __align__(16) uint8_t dynamicShared[];
  __shared__ DecodeShared sh;
  const uint32_t tid = threadIdx.x, threads = blockDim.x;
  const uint32_t chunkElems = a.p.chunkElems, streams = 1u << a.p.log2Streams;
  const uint64_t k = blockIdx.x;
  const uint64_t first = k * chunkElems;
  const uint32_t n =
      k < a.layout.numChunks
          ? static_cast<uint32_t>(min(static_cast<uint64_t>(chunkElems), a.count - first))
          : 0;
  const uint32_t groups = (n + kGroup - 1) / kGroup;
  const uint32_t stageBytes = static_cast<uint32_t>(maxBlockBytes(chunkElems));
  uint16_t* table = reinterpret_cast<uint16_t*>(dynamicShared);  // first: see BitReader
  uint8_t* block = dynamicShared + 2 * (1u << a.p.maxCodeLength);
  uint32_t* streamStart = reinterpret_cast<uint32_t*>(block + stageBytes);

  if (tid == 0) {
    uint64_t begin = 0;
    uint32_t bytes = 0;
    sh.error = checkHeaderAndEntry(a, k, n, &begin, &bytes);
    sh.blockBegin = begin;
    sh.blockBytes = bytes;
  }
  __syncthreads();
  if (sh.error != kFrameOk || n == 0) {
    if (tid == 0 && sh.error != kFrameOk) device::reportError(a.status, sh.error);
    return;
  }
  const uint32_t blockBytes = sh.blockBytes;
  device::stageAsync(block, a.src + a.layout.blocksOffset + sh.blockBegin, blockBytes);
  device::copyAsyncCommit();
  device::copyAsyncWaitAll();
  __syncthreads();

  const uint32_t mode = block[0];
  const bool huffman = mode == kModeHuffman;
  if (tid == 0) {
    uint32_t err = kFrameOk;
    if (mode == kModeStored)
      err = blockBytes < kBlockHeaderBytes + n ? kFrameBadChunk : kFrameOk;
    else if (huffman)
      err = prepareCode(block, blockBytes, a.p, sh);
    else
      err = kFrameBadChunk;
    sh.error = err;
  }
  __syncthreads();
  if (sh.error != kFrameOk) {
    if (tid == 0) device::reportError(a.status, sh.error);
    return;
  }
  const int span = block[2];
  if (huffman) {
    fillTable(a.p, sh, table);
    // Stream offsets: thread t sums the sizes of its consecutive streams, one scan places them.
    const uint16_t* sizes = reinterpret_cast<const uint16_t*>(block + streamSizesOffset(span));
    const uint32_t per = (streams + threads - 1) / threads;
    const uint32_t myFirst = min(tid * per, streams), myEnd = min(myFirst + per, streams);
    uint32_t mine = 0;
    for (uint32_t s = myFirst; s < myEnd; ++s) mine += sizes[s];
    uint32_t total;
    uint32_t offset =
        streamDataOffset(span, streams) + device::blockExclusiveScan(mine, sh.scanScratch, &total);
    for (uint32_t s = myFirst; s < myEnd; ++s) {
      streamStart[s] = offset;
      offset += sizes[s];
    }
    if (tid == 0 && streamDataOffset(span, streams) + total > blockBytes) sh.error = kFrameBadChunk;
    __syncthreads();
    if (sh.error != kFrameOk) {
      if (tid == 0) device::reportError(a.status, sh.error);
      return;
    }
  }

  // The raw planes are read straight from the frame, one group ahead of its use, so their latency
  // overlaps the decoding of the group before. Whole vectors are read even for a short last group:
  // the planes are padded to 16 bytes inside the frame.
  const uint8_t* planeA = a.src + a.layout.planeAOffset + first;
  const uint16_t* planeB = reinterpret_cast<const uint16_t*>(a.src + a.layout.planeBOffset) + first;
  auto loadRaw = [&](uint32_t g, uint2& ra, uint4& rb) {
    ra = __ldg(reinterpret_cast<const uint2*>(planeA + g * kGroup));
    if constexpr (E::kHasPlaneB) rb = __ldg(reinterpret_cast<const uint4*>(planeB + g * kGroup));
  };
  Word* out = static_cast<Word*>(a.dst) + first;
  auto emit = [&](uint32_t g, uint32_t valid, uint32_t symLo, uint32_t symHi, uint2 ra,
                  const uint4& rb) {
    uint32_t words[device::Joiner<D>::kWords];
    device::Joiner<D>::join(symLo, symHi, ra, rb, words);
    Word* to = out + g * kGroup;
    if (valid == kGroup) {
#pragma unroll
      for (int v = 0; v < device::Joiner<D>::kWords / 4; ++v)
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

  if (!huffman) {
    for (uint32_t g = tid; g < groups; g += threads) {
      const uint32_t valid = min(static_cast<uint32_t>(kGroup), n - g * kGroup);
      uint32_t sym[2] = {0, 0};
#pragma unroll
      for (int i = 0; i < kGroup; ++i)
        if (i < static_cast<int>(valid))
          sym[i / 4] |= static_cast<uint32_t>(block[kBlockHeaderBytes + g * kGroup + i])
                        << (8 * (i % 4));
      uint2 ra;
      uint4 rb = make_uint4(0, 0, 0, 0);
      loadRaw(g, ra, rb);
      emit(g, valid, sym[0], sym[1], ra, rb);
    }
    return;
  }

  const uint32_t byteMask = ((1u << a.p.maxCodeLength) - 1) << 1;
  const uint8_t* tableBytes = reinterpret_cast<const uint8_t*>(table);
  const uint16_t* sizes = reinterpret_cast<const uint16_t*>(block + streamSizesOffset(span));
  auto decodeStreams = [&](auto checked) {
    constexpr bool kChecked = decltype(checked)::value;
    for (uint32_t s = tid; s < streams; s += threads) {
      BitReader<kChecked> r(block, blockBytes, streamStart[s]);
      uint2 nextA = make_uint2(0, 0);
      uint4 nextB = make_uint4(0, 0, 0, 0);
      if (s < groups) loadRaw(s, nextA, nextB);
      for (uint32_t g = s; g < groups; g += streams) {
        const uint2 ra = nextA;
        const uint4 rb = nextB;
        if (g + streams < groups) loadRaw(g + streams, nextA, nextB);
        const uint32_t valid = min(static_cast<uint32_t>(kGroup), n - g * kGroup);
        uint32_t sym[2] = {0, 0};
        if (valid == kGroup) {
#pragma unroll
          for (int i = 0; i < kGroup; i += 2) {
            r.refill();
            sym[i / 4] |= r.decode(tableBytes, byteMask) << (8 * (i % 4));
            sym[i / 4] |= r.decode(tableBytes, byteMask) << (8 * (i % 4 + 1));
          }
        } else {
#pragma unroll
          for (int i = 0; i < kGroup; ++i) {
            if (i >= static_cast<int>(valid)) break;
            r.refill();
            sym[i / 4] |= r.decode(tableBytes, byteMask) << (8 * (i % 4));
          }
        }
        emit(g, valid, sym[0], sym[1], ra, rb);
      }
      if (r.shortest == 0 || (r.consumed(streamStart[s]) + 7) / 8 != sizes[s])
        device::reportError(a.status, kFrameBadChunk);
    }
  };
  // A complete code leaves no invalid table entry, so its streams need no validity tracking.
  if (sh.complete)
    decodeStreams(std::false_type{});
  else
    decodeStreams(std::true_type{});
}

template <int D>
void launchDecode(const DecodeArgs& args, cudaStream_t stream) {
  const uint32_t streams = 1u << args.p.log2Streams;
  const size_t dynamicBytes =
      maxBlockBytes(args.p.chunkElems) + 2 * (size_t{1} << args.p.maxCodeLength) + 4 * streams;
  static std::atomic<uint64_t> configured{0};  // devices whose limit is raised
  device::ensureSharedMemoryLimit(
      decodeKernel<D>,
      static_cast<int>(maxBlockBytes(kMaxChunkElems) + 2 * (1u << kMaxCodeLength) +
                       4 * (kMaxChunkElems / kMinStreamSymbols)),
      configured);
  const unsigned threads =
      streams < kDecodeMaxThreads ? (streams < 32 ? 32 : streams) : kDecodeMaxThreads;
  const unsigned blocks = static_cast<unsigned>(args.layout.numChunks ? args.layout.numChunks : 1);
  decodeKernel<D><<<blocks, threads, dynamicBytes, stream>>>(args);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void decodeDevice(const Params& p, int dtype, const uint8_t* src, uint64_t srcBytes, void* dst,
                  uint64_t count, DeviceStatus* status, cudaStream_t stream) {
  DecodeArgs args{src, srcBytes, dst, count, status, frameLayout(dtype, count, p.chunkElems),
                  p,   dtype};
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
