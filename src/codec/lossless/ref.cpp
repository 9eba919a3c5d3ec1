#include "codec/lossless/ref.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "codec/lossless/elements.h"
#include "common/error.h"

namespace cclz::lossless {
namespace {

// Stream s holds groups s, s+S, s+2S, ... of the chunk; calls f(elementIndex) in stream order.
template <typename F>
void forEachInStream(uint32_t n, uint32_t streams, uint32_t s, F&& f) {
  for (uint32_t g = s; g * kGroup < n; g += streams)
    for (uint32_t i = g * kGroup; i < std::min<uint32_t>(n, g * kGroup + kGroup); ++i) f(i);
}

// The code of one chunk: lengths and bit-reversed canonical codes, indexed by symbol.
struct ChunkCode {
  int first = 0;
  int span = 0;
  uint8_t length[kMaxSymbols] = {};
  uint16_t code[kMaxSymbols] = {};
};

ChunkCode buildChunkCode(const uint32_t* histogram, int maxLen) {
  ChunkCode c;
  uint8_t ranked[kMaxSymbols];
  int n = 0;
  for (int s = 0; s < kMaxSymbols; ++s)
    if (histogram[s]) ranked[n++] = static_cast<uint8_t>(s);
  std::sort(ranked, ranked + n,
            [&](uint8_t a, uint8_t b) { return rankBefore(histogram[a], a, histogram[b], b); });
  uint32_t weights[kMaxSymbols] = {};
  codeLengthsFromRanked(ranked, histogram, n, maxLen, weights, c.length);
  c.first = *std::min_element(ranked, ranked + n);
  c.span = *std::max_element(ranked, ranked + n) - c.first;
  canonicalCodes(c.length, c.first, c.span, c.code);
  return c;
}

// Appends codes least-significant bit first.
class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}
  void put(uint32_t code, int len) {
    buffer_ |= static_cast<uint64_t>(code) << bits_;
    bits_ += len;
    while (bits_ >= 8) {
      out_[bytes_++] = static_cast<uint8_t>(buffer_);
      buffer_ >>= 8;
      bits_ -= 8;
    }
  }
  uint32_t finish() {  // pads the last byte with zeros; returns the bytes written
    if (bits_ > 0) out_[bytes_++] = static_cast<uint8_t>(buffer_);
    bits_ = 0;
    buffer_ = 0;
    return bytes_;
  }

 private:
  uint8_t* out_;
  uint64_t buffer_ = 0;
  int bits_ = 0;
  uint32_t bytes_ = 0;
};

// Writes one chunk's block at out (capacity maxBlockBytes(n), zeroed) and returns its padded size.
uint32_t encodeChunkBlock(const uint8_t* symbols, uint32_t n, const Params& p, uint8_t* out) {
  uint32_t histogram[kMaxSymbols] = {};
  for (uint32_t i = 0; i < n; ++i) ++histogram[symbols[i]];
  const ChunkCode code = buildChunkCode(histogram, static_cast<int>(p.maxCodeLength));
  const uint32_t streams = 1u << p.log2Streams;

  uint64_t huffmanBytes = streamDataOffset(code.span, streams);
  for (uint32_t s = 0; s < streams; ++s) {
    uint64_t bits = 0;
    forEachInStream(n, streams, s, [&](uint32_t i) { bits += code.length[symbols[i]]; });
    huffmanBytes += (bits + 7) / 8;
  }
  if (huffmanBytes >= kBlockHeaderBytes + n) {  // the code would not save anything
    out[0] = kModeStored;
    std::memcpy(out + kBlockHeaderBytes, symbols, n);
    return static_cast<uint32_t>(alignUp(kBlockHeaderBytes + n, kBlockAlign));
  }
  out[0] = kModeHuffman;
  out[1] = static_cast<uint8_t>(code.first);
  out[2] = static_cast<uint8_t>(code.span);
  for (int k = 0; k <= code.span; ++k)
    out[kBlockHeaderBytes + k / 2] |=
        static_cast<uint8_t>(code.length[code.first + k] << (4 * (k % 2)));
  uint8_t* sizes = out + streamSizesOffset(code.span);
  uint32_t offset = streamDataOffset(code.span, streams);
  for (uint32_t s = 0; s < streams; ++s) {
    BitWriter w(out + offset);
    forEachInStream(n, streams, s,
                    [&](uint32_t i) { w.put(code.code[symbols[i]], code.length[symbols[i]]); });
    const uint32_t bytes = w.finish();
    sizes[2 * s] = static_cast<uint8_t>(bytes);
    sizes[2 * s + 1] = static_cast<uint8_t>(bytes >> 8);
    offset += bytes;
  }
  return static_cast<uint32_t>(alignUp(offset, kBlockAlign));
}

// Decodes one chunk block into symbols[n]. Returns kFrameOk or kFrameBadChunk.
uint32_t decodeChunkBlock(const uint8_t* block, uint64_t blockBytes, uint32_t n, const Params& p,
                          uint8_t* symbols) {
  if (blockBytes < kBlockHeaderBytes) return kFrameBadChunk;
  if (block[0] == kModeStored) {
    if (blockBytes < kBlockHeaderBytes + n) return kFrameBadChunk;
    std::memcpy(symbols, block + kBlockHeaderBytes, n);
    return kFrameOk;
  }
  if (block[0] != kModeHuffman) return kFrameBadChunk;
  const int first = block[1], span = block[2];
  const uint32_t streams = 1u << p.log2Streams;
  if (first + span >= kMaxSymbols || streamDataOffset(span, streams) > blockBytes)
    return kFrameBadChunk;
  uint8_t length[kMaxSymbols] = {};
  for (int k = 0; k <= span; ++k) {
    length[first + k] = (block[kBlockHeaderBytes + k / 2] >> (4 * (k % 2))) & 0xF;
    if (length[first + k] > p.maxCodeLength) return kFrameBadChunk;
  }
  std::vector<uint16_t> table(1u << p.maxCodeLength);
  if (!buildDecodeTable(length, first, span, static_cast<int>(p.maxCodeLength), table.data()))
    return kFrameBadChunk;
  const uint32_t mask = (1u << p.maxCodeLength) - 1;

  const uint8_t* sizes = block + streamSizesOffset(span);
  uint64_t offset = streamDataOffset(span, streams);
  for (uint32_t s = 0; s < streams; ++s) {
    const uint32_t bytes = sizes[2 * s] | (sizes[2 * s + 1] << 8);
    if (offset + bytes > blockBytes) return kFrameBadChunk;
    const uint8_t* in = block + offset;
    uint64_t bitPos = 0;
    bool ok = true;
    forEachInStream(n, streams, s, [&](uint32_t i) {
      // Peek maxCodeLength bits; bytes past the stream read as zero (a code that needs them
      // makes the stream longer than its size, which is rejected below).
      uint32_t peek = 0;
      for (uint32_t b = 0; b < 3; ++b) {
        const uint64_t byte = bitPos / 8 + b;
        if (byte < bytes) peek |= static_cast<uint32_t>(in[byte]) << (8 * b);
      }
      const uint16_t entry = table[(peek >> (bitPos % 8)) & mask];
      if (entry == 0) ok = false;
      symbols[i] = static_cast<uint8_t>(entry);
      bitPos += entry >> 8;
    });
    if (!ok || (bitPos + 7) / 8 != bytes) return kFrameBadChunk;
    offset += bytes;
  }
  return kFrameOk;
}

template <int D>
void splitElements(const void* src, uint64_t first, uint32_t n, uint8_t* symbols, uint8_t* planeA,
                   uint8_t* planeB) {
  using E = Elements<D>;
  const auto* in = static_cast<const typename E::Word*>(src) + first;
  for (uint32_t i = 0; i < n; ++i) {
    symbols[i] = static_cast<uint8_t>(E::symbol(in[i]));
    planeA[first + i] = static_cast<uint8_t>(E::planeA(in[i]));
    if constexpr (E::kHasPlaneB) {
      const uint32_t b = E::planeB(in[i]);
      planeB[2 * (first + i)] = static_cast<uint8_t>(b);
      planeB[2 * (first + i) + 1] = static_cast<uint8_t>(b >> 8);
    }
  }
}

template <int D>
void joinElements(const uint8_t* symbols, const uint8_t* planeA, const uint8_t* planeB,
                  uint64_t first, uint32_t n, void* dst) {
  using E = Elements<D>;
  auto* out = static_cast<typename E::Word*>(dst) + first;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t b = 0;
    if constexpr (E::kHasPlaneB) b = planeB[2 * (first + i)] | (planeB[2 * (first + i) + 1] << 8);
    out[i] = E::join(symbols[i], planeA[first + i], b);
  }
}

void split(int dtype, const void* src, uint64_t first, uint32_t n, uint8_t* symbols,
           uint8_t* planeA, uint8_t* planeB) {
  if (dtype == cclzBfloat16) splitElements<cclzBfloat16>(src, first, n, symbols, planeA, planeB);
  if (dtype == cclzFloat16) splitElements<cclzFloat16>(src, first, n, symbols, planeA, planeB);
  if (dtype == cclzFloat32) splitElements<cclzFloat32>(src, first, n, symbols, planeA, planeB);
}

void join(int dtype, const uint8_t* symbols, const uint8_t* planeA, const uint8_t* planeB,
          uint64_t first, uint32_t n, void* dst) {
  if (dtype == cclzBfloat16) joinElements<cclzBfloat16>(symbols, planeA, planeB, first, n, dst);
  if (dtype == cclzFloat16) joinElements<cclzFloat16>(symbols, planeA, planeB, first, n, dst);
  if (dtype == cclzFloat32) joinElements<cclzFloat32>(symbols, planeA, planeB, first, n, dst);
}

uint64_t readU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

}  // namespace

uint64_t maxEncodedBytes(const Params& params, int dtype, uint64_t count) {
  const Layout l = frameLayout(dtype, count, params.chunkElems);
  // Every chunk block at its stored size: the symbols plus header and padding.
  return l.blocksOffset + count + l.numChunks * (kBlockHeaderBytes + kBlockAlign - 1);
}

uint64_t encodeRef(const Params& p, int dtype, const void* src, uint64_t count, uint8_t* dst,
                   uint64_t capacity) {
  CCLZ_REQUIRE(isSupportedDtype(dtype), cclzNotSupported,
               "the lossless codec takes bf16, fp16 or fp32");
  CCLZ_REQUIRE(validParams(p), cclzInvalidArgument, "invalid lossless codec parameters");
  CCLZ_REQUIRE(count <= kMaxCount, cclzInvalidArgument, "element count too large");
  CCLZ_REQUIRE(count == 0 || src, cclzInvalidArgument, "source is NULL");
  CCLZ_REQUIRE(dst, cclzInvalidArgument, "destination is NULL");
  CCLZ_REQUIRE(capacity >= maxEncodedBytes(p, dtype, count), cclzBufferTooSmall,
               "destination capacity is below the maximum encoded size");
  if (p.version == kLosslessVersion2) return v2::encodeFrame(p, dtype, src, count, dst);

  const Layout l = frameLayout(dtype, count, p.chunkElems);
  std::memset(dst, 0, l.blocksOffset);  // header, table and plane padding
  std::vector<uint8_t> symbols(p.chunkElems);
  uint64_t blocksEnd = 0;
  for (uint64_t k = 0; k < l.numChunks; ++k) {
    const uint64_t first = k * p.chunkElems;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(p.chunkElems, count - first));
    split(dtype, src, first, n, symbols.data(), dst + l.planeAOffset, dst + l.planeBOffset);
    uint8_t* block = dst + l.blocksOffset + blocksEnd;
    std::memset(block, 0, maxBlockBytes(n));
    blocksEnd += encodeChunkBlock(symbols.data(), n, p, block);
    std::memcpy(dst + l.tableOffset + 8 * k, &blocksEnd, 8);
  }
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.version = kFrameVersion;
  h.codec = cclzCodecLossless;
  h.dtype = static_cast<uint8_t>(dtype);
  h.count = count;
  h.frameBytes = l.blocksOffset + blocksEnd;
  h.chunkElems = p.chunkElems;
  h.numChunks = static_cast<uint32_t>(l.numChunks);
  h.params[0] = static_cast<uint8_t>(p.log2Streams);
  h.params[1] = static_cast<uint8_t>(p.maxCodeLength);
  h.checksum = headerChecksum(h);
  std::memcpy(dst, &h, sizeof h);
  return h.frameBytes;
}

uint32_t decodeRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst) {
  if (!src || srcBytes < kFrameHeaderBytes) return kFrameTruncated;
  FrameHeader h;
  std::memcpy(&h, src, sizeof h);
  uint32_t err = checkFrameHeader(h, srcBytes);
  if (err == kFrameOk) err = checkFrameMatches(h, cclzCodecLossless, dtype, count);
  if (err == kFrameOk) err = checkLosslessHeader(h);
  if (err != kFrameOk) return err;
  if (h.version == kLosslessVersion2) return v2::decodeFrame(h, src, dtype, count, dst);

  const Params p = headerParams(h);
  const Layout l = frameLayout(dtype, count, p.chunkElems);
  const uint64_t blocksBytes = h.frameBytes - l.blocksOffset;
  std::vector<uint8_t> symbols(p.chunkElems);
  uint64_t begin = 0;
  for (uint64_t k = 0; k < l.numChunks; ++k) {
    const uint64_t end = readU64(src + l.tableOffset + 8 * k);
    if (end < begin || end > blocksBytes || (end - begin) % kBlockAlign != 0)
      return kFrameBadChunkTable;
    if (k + 1 == l.numChunks && end != blocksBytes) return kFrameBadChunkTable;
    const uint64_t first = k * p.chunkElems;
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(p.chunkElems, count - first));
    if (end - begin > maxBlockBytes(n)) return kFrameBadChunkTable;
    err = decodeChunkBlock(src + l.blocksOffset + begin, end - begin, n, p, symbols.data());
    if (err != kFrameOk) return err;
    join(dtype, symbols.data(), src + l.planeAOffset, src + l.planeBOffset, first, n, dst);
    begin = end;
  }
  return kFrameOk;
}

}  // namespace cclz::lossless
