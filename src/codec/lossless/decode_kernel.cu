// Lossless decode on the device: one thread block per chunk, one thread per stream.
//
// A block validates the header and its chunk-table entry, stages its chunk block in shared
// memory, builds a 2^maxLen-entry lookup table from the code lengths, and each thread decodes its
// stream group by group, joining each symbol with the raw planes and writing 16-byte vectors.
// Every check of ref.cpp is made here too, so a frame the reference rejects is rejected here; the
// first error goes to DeviceStatus::decodeError. Reads stay inside the frame, writes inside the
// count elements of the destination.
#include <cuda_runtime.h>

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
  uint32_t firstCode[kMaxCodeLength + 1];  // canonical, most-significant bit first
  uint32_t limit[kMaxCodeLength + 1];      // end of each length's codes, in maxLen-bit space
  uint32_t rankOffset[kMaxCodeLength + 1];
  uint8_t sortedSymbols[kMaxSymbols];      // by (length, symbol)
  uint32_t scanScratch[32];
  uint32_t error;
  uint64_t blockBegin;
  uint32_t blockBytes;
};

// Thread 0: checks the header and this chunk's table entry, as decodeRef does.
__device__ uint32_t checkHeaderAndEntry(const DecodeArgs& a, uint64_t k, uint32_t n,
                                        uint64_t* begin, uint32_t* bytes) {
  if (a.srcBytes < kFrameHeaderBytes) return kFrameTruncated;
  const FrameHeader h = *reinterpret_cast<const FrameHeader*>(a.src);
  uint32_t err = checkFrameHeader(h, a.srcBytes);
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

// Thread 0: reads the code lengths of a Huffman block and prepares canonical decoding.
__device__ uint32_t prepareCode(const uint8_t* block, uint32_t blockBytes, const Params& p,
                                DecodeShared& sh) {
  const int first = block[1], span = block[2];
  const uint32_t streams = 1u << p.log2Streams;
  if (first + span >= kMaxSymbols || streamDataOffset(span, streams) > blockBytes)
    return kFrameBadChunk;
  for (int len = 0; len <= kMaxCodeLength; ++len) sh.countOfLength[len] = 0;
  uint64_t kraft = 0;
  for (int j = 0; j <= span; ++j) {
    const uint32_t len = (block[kBlockHeaderBytes + j / 2] >> (4 * (j % 2))) & 0xF;
    if (len > p.maxCodeLength) return kFrameBadChunk;
    ++sh.countOfLength[len];
    if (len) kraft += 1ull << (p.maxCodeLength - len);
  }
  if (kraft == 0 || kraft > (1ull << p.maxCodeLength)) return kFrameBadChunk;
  uint32_t code = 0, rank = 0;
  sh.countOfLength[0] = 0;
  for (uint32_t len = 1; len <= kMaxCodeLength; ++len) {
    code = (code + sh.countOfLength[len - 1]) << 1;
    sh.firstCode[len] = code;
    sh.rankOffset[len] = rank;
    rank += sh.countOfLength[len];
    sh.limit[len] = len <= p.maxCodeLength
                        ? (code + sh.countOfLength[len]) << (p.maxCodeLength - len)
                        : 0;
  }
  uint32_t fill[kMaxCodeLength + 1];
  for (int len = 0; len <= kMaxCodeLength; ++len) fill[len] = sh.rankOffset[len];
  for (int j = 0; j <= span; ++j) {
    const uint32_t len = (block[kBlockHeaderBytes + j / 2] >> (4 * (j % 2))) & 0xF;
    if (len) sh.sortedSymbols[fill[len]++] = static_cast<uint8_t>(first + j);
  }
  return kFrameOk;
}

// All threads: entry i of the table decodes the code whose bits (least significant first) begin
// i. Reversed, i is a maxLen-bit number v; canonical codes of length len occupy the range
// [limit[len-1], limit[len]) of v.
__device__ void fillTable(const Params& p, const DecodeShared& sh, uint16_t* table) {
  const uint32_t maxLen = p.maxCodeLength;
  for (uint32_t i = threadIdx.x; i < (1u << maxLen); i += blockDim.x) {
    const uint32_t v = __brev(i) >> (32 - maxLen);
    uint16_t entry = 0;
    for (uint32_t len = 1; len <= maxLen; ++len) {
      if (v < sh.limit[len]) {
        const uint32_t index = sh.rankOffset[len] + (v >> (maxLen - len)) - sh.firstCode[len];
        entry = static_cast<uint16_t>((len << 8) | sh.sortedSymbols[index]);
        break;
      }
    }
    table[i] = entry;
  }
}

// Reads a stream from the staged block, least significant bit first, 32-bit words at a time.
struct BitReader {
  const uint32_t* words;
  uint32_t wordCount;  // words staged; reads past them see zeros
  uint32_t next;       // next word to load
  uint64_t buffer;
  uint32_t bits;       // valid bits in buffer
  uint32_t consumed;

  __device__ BitReader(const uint8_t* block, uint32_t blockBytes, uint32_t byteOffset)
      : words(reinterpret_cast<const uint32_t*>(block)), wordCount(blockBytes / 4),
        next(byteOffset / 4), consumed(0) {
    const uint32_t skip = 8 * (byteOffset % 4);
    buffer = load() >> skip;
    bits = 32 - skip;
  }
  __device__ uint32_t load() { return next < wordCount ? words[next++] : (++next, 0u); }
  // Makes at least 32 bits available: enough for two codes of up to 12 bits... and more.
  __device__ void refill() {
    if (bits < 32) {
      buffer |= static_cast<uint64_t>(load()) << bits;
      bits += 32;
    }
  }
  __device__ uint32_t decode(const uint16_t* table, uint32_t mask, bool& bad) {
    const uint32_t entry = table[static_cast<uint32_t>(buffer) & mask];
    const uint32_t len = entry >> 8;
    bad |= len == 0;
    buffer >>= len;
    bits -= len;
    consumed += len;
    return entry & 0xFFu;
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
  const uint32_t n = k < a.layout.numChunks
                         ? static_cast<uint32_t>(min(static_cast<uint64_t>(chunkElems), a.count - first))
                         : 0;
  const uint32_t groups = (n + kGroup - 1) / kGroup;
  const uint32_t stageBytes = static_cast<uint32_t>(maxBlockBytes(chunkElems));
  uint8_t* block = dynamicShared;
  uint16_t* table = reinterpret_cast<uint16_t*>(dynamicShared + stageBytes);
  uint32_t* streamStart = reinterpret_cast<uint32_t*>(table + (1u << a.p.maxCodeLength));

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
  const uint4* from = reinterpret_cast<const uint4*>(a.src + a.layout.blocksOffset + sh.blockBegin);
  for (uint32_t i = tid; i < blockBytes / 16; i += threads) reinterpret_cast<uint4*>(block)[i] = from[i];
  __syncthreads();

  const uint32_t mode = block[0];
  const bool huffman = mode == kModeHuffman;
  if (tid == 0) {
    uint32_t err = kFrameOk;
    if (mode == kModeStored) err = blockBytes < kBlockHeaderBytes + n ? kFrameBadChunk : kFrameOk;
    else if (huffman) err = prepareCode(block, blockBytes, a.p, sh);
    else err = kFrameBadChunk;
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
    uint32_t offset = streamDataOffset(span, streams) + device::blockExclusiveScan(mine, sh.scanScratch, &total);
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

  const uint8_t* planeA = a.src + a.layout.planeAOffset + first;
  const uint16_t* planeB = reinterpret_cast<const uint16_t*>(a.src + a.layout.planeBOffset) + first;
  Word* out = static_cast<Word*>(a.dst) + first;
  // Joins the symbols of group g with its raw bits and writes the elements.
  auto emit = [&](uint32_t g, uint32_t valid, const uint32_t (&sym)[kGroup]) {
    uint32_t rawA[2] = {0, 0}, rawB[4] = {0, 0, 0, 0};
    if (valid == kGroup) {
      const uint2 q = __ldg(reinterpret_cast<const uint2*>(planeA + g * kGroup));
      rawA[0] = q.x;
      rawA[1] = q.y;
      if constexpr (E::kHasPlaneB) {
        const uint4 r = __ldg(reinterpret_cast<const uint4*>(planeB + g * kGroup));
        rawB[0] = r.x; rawB[1] = r.y; rawB[2] = r.z; rawB[3] = r.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kGroup; ++i) {  // unrolled: the arrays stay in registers
        if (i >= static_cast<int>(valid)) break;
        rawA[i / 4] |= static_cast<uint32_t>(planeA[g * kGroup + i]) << (8 * (i % 4));
        if constexpr (E::kHasPlaneB) rawB[i / 2] |= static_cast<uint32_t>(planeB[g * kGroup + i]) << (16 * (i % 2));
      }
    }
    Word w[kGroup];
#pragma unroll
    for (int i = 0; i < kGroup; ++i)
      w[i] = E::join(sym[i], (rawA[i / 4] >> (8 * (i % 4))) & 0xFFu, (rawB[i / 2] >> (16 * (i % 2))) & 0xFFFFu);
    device::storeGroup(out + g * kGroup, valid, w);
  };

  if (!huffman) {
    for (uint32_t g = tid; g < groups; g += threads) {
      const uint32_t valid = min(static_cast<uint32_t>(kGroup), n - g * kGroup);
      uint32_t sym[kGroup];
#pragma unroll
      for (int i = 0; i < kGroup; ++i)
        sym[i] = i < static_cast<int>(valid) ? block[kBlockHeaderBytes + g * kGroup + i] : 0;
      emit(g, valid, sym);
    }
    return;
  }

  const uint32_t mask = (1u << a.p.maxCodeLength) - 1;
  const uint16_t* sizes = reinterpret_cast<const uint16_t*>(block + streamSizesOffset(span));
  for (uint32_t s = tid; s < streams; s += threads) {
    BitReader r(block, blockBytes, streamStart[s]);
    bool bad = false;
    for (uint32_t g = s; g < groups; g += streams) {
      const uint32_t valid = min(static_cast<uint32_t>(kGroup), n - g * kGroup);
      uint32_t sym[kGroup];
      if (valid == kGroup) {
        // NOTE: codes are at most 12 bits, so one refill (>= 32 bits) serves two symbols.
#pragma unroll
        for (int i = 0; i < kGroup; i += 2) {
          r.refill();
          sym[i] = r.decode(table, mask, bad);
          sym[i + 1] = r.decode(table, mask, bad);
        }
      } else {
#pragma unroll
        for (int i = 0; i < kGroup; ++i) {
          r.refill();
          sym[i] = i < static_cast<int>(valid) ? r.decode(table, mask, bad) : 0;
        }
      }
      emit(g, valid, sym);
    }
    if (bad || (r.consumed + 7) / 8 != sizes[s]) device::reportError(a.status, kFrameBadChunk);
  }
}

template <int D>
void launchDecode(const DecodeArgs& args, cudaStream_t stream) {
  const uint32_t streams = 1u << args.p.log2Streams;
  const size_t dynamicBytes = maxBlockBytes(args.p.chunkElems) +
                              2 * (size_t{1} << args.p.maxCodeLength) + 4 * streams;
  static bool configured = false;  // raise the shared-memory limit once per instantiation
  if (!configured) {
    const int most = static_cast<int>(maxBlockBytes(kMaxChunkElems) + 2 * (1u << kMaxCodeLength) +
                                      4 * (kMaxChunkElems / kMinStreamSymbols));
    CCLZ_CUDA_CHECK(cudaFuncSetAttribute(decodeKernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
    configured = true;
  }
  const unsigned threads = streams < kDecodeMaxThreads ? (streams < 32 ? 32 : streams) : kDecodeMaxThreads;
  const unsigned blocks = static_cast<unsigned>(args.layout.numChunks ? args.layout.numChunks : 1);
  decodeKernel<D><<<blocks, threads, dynamicBytes, stream>>>(args);
  CCLZ_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void decodeDevice(const Params& p, int dtype, const uint8_t* src, uint64_t srcBytes, void* dst,
                  uint64_t count, DeviceStatus* status, cudaStream_t stream) {
  DecodeArgs args{src, srcBytes, dst, count, status, frameLayout(dtype, count, p.chunkElems), p, dtype};
  CCLZ_REQUIRE(args.layout.numChunks < (1u << 31), cclzInvalidArgument, "too many chunks");
  switch (dtype) {
    case cclzBfloat16: launchDecode<cclzBfloat16>(args, stream); break;
    case cclzFloat16: launchDecode<cclzFloat16>(args, stream); break;
    case cclzFloat32: launchDecode<cclzFloat32>(args, stream); break;
    default: CCLZ_FAIL(cclzNotSupported, "the lossless codec takes bf16, fp16 or fp32");
  }
}

}  // namespace cclz::lossless
