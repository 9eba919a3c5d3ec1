// Golden frames: small fixed inputs whose encoded bytes are pinned by size and FNV-1a 64 hash.
//
// These constants ARE the format. If a change to src/ makes them fail, either the change is a
// bug, or it changes the format: then docs/formats.md, the lossless frame version
// (kLosslessFrameVersion, src/codec/frame.h) and these constants change together, in one commit
// that says so. Never update them to make a test pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "codec/lossless/format.h"
#include "codec/lossless/ref.h"
#include "support/codec_handle.h"
#include "support/configs.h"
#include "support/data.h"
#include "support/frame_view.h"

namespace cclz::test {
namespace {

// Inputs from integer arithmetic only (no libm, no <random>), so they are the same everywhere.
uint32_t hashIndex(uint32_t i) {
  uint32_t x = i * 0x9E3779B9u + 0x7F4A7C15u;
  x ^= x >> 16;
  x *= 0x85EBCA6Bu;
  x ^= x >> 13;
  x *= 0xC2B2AE35u;
  x ^= x >> 16;
  return x;
}

// Sum of four bytes of the hash, centred: a bell shape on [-510, 510].
int32_t bell(uint32_t i) {
  const uint32_t h = hashIndex(i);
  return static_cast<int32_t>((h & 255) + ((h >> 8) & 255) + ((h >> 16) & 255) + (h >> 24)) - 510;
}

std::vector<uint8_t> goldenInput(int dtype, size_t count) {
  std::vector<uint8_t> out(count * elementSize(dtype));
  for (uint32_t i = 0; i < count; ++i) {
    if (dtype == cclzBfloat16) {
      // bell/128, rounded to bf16; every 499th a NaN with a payload.
      uint16_t w = floatToBf16(static_cast<float>(bell(i)) * 0.0078125f);
      if (i % 499 == 0) w = 0x7FA5;
      std::memcpy(&out[2 * i], &w, 2);
    } else if (dtype == cclzFloat16) {
      uint16_t w = floatToHalf(static_cast<float>(bell(i)) * 0.00390625f);
      if (i % 499 == 0) w = 0xFC00;  // -Inf
      std::memcpy(&out[2 * i], &w, 2);
    } else {
      // A 24-bit integer scaled by 2^-21: exact in fp32, every mantissa bit in play.
      const int32_t m = bell(i) * 16384 + static_cast<int32_t>(hashIndex(i ^ 0xABCDEFu) & 0x3FFF);
      float f = static_cast<float>(m) * (1.0f / 2097152.0f);
      std::memcpy(&out[4 * i], &f, 4);
    }
  }
  return out;
}

struct Golden {
  const char* name;
  int dtype;
  size_t count;
  uint64_t frameBytes;
  uint64_t fnv1a64;
  // Section offsets, from docs/formats.md: table at 64, plane A, plane B (fp32), blocks.
  uint64_t planeAOffset, planeBOffset, blocksOffset;
  uint64_t inputFnv1a64;
};

// chunkElems 1024 (explicit: API defaults may change, these frames may not).
// bf16_3000 is stored (6144 bytes > 6000): a NaN in every chunk puts the top at 255, where every
// other offset escapes (docs/formats.md, "Lossless payload", "Limits").
// clang-format off
const Golden kGolden[] = {
  // name        dtype         count  frameBytes  frame FNV-1a 64         planeA planeB blocks  input FNV-1a 64
  {"bf16_3000", cclzBfloat16, 3000,  6144,       0xdc5eabffe3332121ull,  96,    3104,  3104,  0x5e070d444b6a6b8bull},
  {"fp16_1500", cclzFloat16,  1500,  3104,       0x1888420b8bc68cb0ull,  80,    1584,  1584,  0x8e03aaa9549ebbd4ull},
  {"fp32_2000", cclzFloat32,  2000,  6832,       0x9b34f35d810e4d97ull,  80,    2080,  6080,  0xd7055baffa7f47c3ull},
};
// clang-format on

class LosslessGolden : public testing::TestWithParam<Golden> {};

TEST_P(LosslessGolden, FrameBytesArePinned) {
  const Golden& g = GetParam();
  const std::vector<uint8_t> input = goldenInput(g.dtype, g.count);
  std::printf("golden %s: input fnv1a64=0x%016llxull\n", g.name,
              static_cast<unsigned long long>(fnv1a64(input.data(), input.size())));
  // The input first: a failure here is a change of the test's generator, not of the format.
  ASSERT_EQ(fnv1a64(input.data(), input.size()), g.inputFnv1a64);
  const lossless::Params p{1024};
  std::vector<uint8_t> frame(lossless::maxEncodedBytes(p, g.dtype, g.count));
  const uint64_t bytes =
      lossless::encodeRef(p, g.dtype, input.data(), g.count, frame.data(), frame.size());
  const uint64_t hash = fnv1a64(frame.data(), bytes);
  std::printf("golden %s: frameBytes=%llu fnv1a64=0x%016llxull\n", g.name,
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(hash));
  EXPECT_EQ(bytes, g.frameBytes);
  EXPECT_EQ(hash, g.fnv1a64);

  // The public API gives the same bytes.
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.chunkElems = 1024;
  CodecPtr codec;
  ASSERT_NO_FATAL_FAILURE(codec = makeCodec(config));
  std::vector<uint8_t> viaApi(frame.size(), 0xEE);
  size_t apiBytes = 0;
  ASSERT_EQ(cclzEncodeHost(codec.get(), input.data(), g.count, static_cast<cclzDataType_t>(g.dtype),
                           viaApi.data(), viaApi.size(), &apiBytes),
            cclzSuccess);
  ASSERT_EQ(apiBytes, bytes);
  EXPECT_EQ(firstMismatch(viaApi.data(), frame.data(), bytes), SIZE_MAX);

  // Hand-checked header fields, at their byte offsets.
  const uint8_t* f = frame.data();
  EXPECT_EQ(f[0], 'C');
  EXPECT_EQ(f[1], 'C');
  EXPECT_EQ(f[2], 'L');
  EXPECT_EQ(f[3], 'Z');
  EXPECT_EQ(f[kOffVersion], 2);
  EXPECT_EQ(f[kOffCodec], 1);  // cclzCodecLossless
  EXPECT_EQ(f[kOffDtype], g.dtype);
  EXPECT_EQ(f[kOffFlags], 0);
  EXPECT_EQ(readLE<uint64_t>(f + kOffCount), g.count);
  EXPECT_EQ(readLE<uint64_t>(f + kOffFrameBytes), bytes);
  EXPECT_EQ(readLE<uint32_t>(f + kOffChunkElems), 1024u);
  const uint32_t numChunks = static_cast<uint32_t>((g.count + 1023) / 1024);
  EXPECT_EQ(readLE<uint32_t>(f + kOffNumChunks), numChunks);
  for (size_t i = kOffParams; i < kOffChecksum; ++i) EXPECT_EQ(f[i], 0) << "byte " << i;
  EXPECT_EQ(readLE<uint32_t>(f + kOffChecksum), fnv1a32(f, 60));

  // Sections where the spec puts them; the chunk table increases to the end of the frame.
  const FrameView v = viewFrame(f);
  EXPECT_EQ(v.planeAOffset, g.planeAOffset);
  EXPECT_EQ(v.planeBOffset, g.planeBOffset);
  EXPECT_EQ(v.blocksOffset, g.blocksOffset);
  ASSERT_EQ(v.chunkEnds.size(), numChunks);
  uint64_t previous = 0;
  for (uint64_t end : v.chunkEnds) {
    EXPECT_GT(end, previous);
    EXPECT_EQ(end % 16, 0u);
    previous = end;
  }
  EXPECT_EQ(g.blocksOffset + previous, bytes);

  // The raw planes hold each element's bits outside the symbol, in element order: bf16 and fp16
  // sign<<7 | bits 6..0; fp32 sign<<7 | mantissa[22:16], then mantissa[15:0] as little-endian
  // uint16 in plane B.
  for (size_t i = 0; i < g.count; ++i) {
    uint32_t w = 0;
    std::memcpy(&w, &input[i * elementSize(g.dtype)], elementSize(g.dtype));
    uint32_t a = ((w >> 8) & 0x80) | (w & 0x7F);
    if (g.dtype == cclzFloat32) a = ((w >> 24) & 0x80) | ((w >> 16) & 0x7F);
    ASSERT_EQ(f[g.planeAOffset + i], a) << "plane A, element " << i;
    if (g.dtype == cclzFloat32) {
      ASSERT_EQ(readLE<uint16_t>(f + g.planeBOffset + 2 * i), w & 0xFFFF)
          << "plane B, element " << i;
    }
  }
  // Block sizes follow from their headers: stored, 4 + n bytes; coded, the 8-byte header, the
  // 32 size deltas and the lanes' bits; padded to 16 bytes.
  for (uint32_t k = 0; k < v.numChunks; ++k) {
    SCOPED_TRACE("chunk " + std::to_string(k));
    const BlockView block = viewBlock(f, v, k);
    const uint64_t n = std::min<uint64_t>(1024, g.count - 1024ull * k);
    const uint8_t* b = f + block.offset;
    if (b[0] == 0) {
      EXPECT_EQ(block.bytes, align16(4 + n));
      continue;
    }
    if (b[0] != 1) continue;
    const uint32_t width = b[3], base = readLE<uint16_t>(b + 4);
    uint64_t bits = 0;
    for (uint32_t lane = 0; lane < 32; ++lane) {
      uint32_t delta = 0;
      for (uint32_t i = 0; i < width; ++i) {
        const uint32_t bit = 64 + lane * width + i;
        delta |= ((b[bit / 8] >> (bit % 8)) & 1u) << i;
      }
      bits += base + delta;
    }
    EXPECT_EQ(align16(8 + 4 * width + (bits + 7) / 8), block.bytes);
  }
}

INSTANTIATE_TEST_SUITE_P(All, LosslessGolden, testing::ValuesIn(kGolden),
                         [](const testing::TestParamInfo<Golden>& info) {
                           return std::string(info.param.name);
                         });

// A frame checked by hand: 1024 bf16 elements, 1.0 (exponent 127) except element 8
// (lane 1's first element), 0.5 (exponent 126). The chunk's top is 127; lane 1 codes offset 1
// once and offset 0 31 times, the other lanes offset 0 32 times. Code 0 (the first line of
// tables.h) is the cheapest: offset 0 has 5 bits, offset 1 has 2.
TEST(LosslessGolden, HandCheckedBlock) {
  constexpr size_t kCount = 1024;
  std::vector<uint8_t> input(2 * kCount);
  for (size_t i = 0; i < kCount; ++i) {
    const uint16_t w = i == 8 ? 0x3F00 : 0x3F80;
    std::memcpy(&input[2 * i], &w, 2);
  }
  const lossless::Params p{1024};
  std::vector<uint8_t> frame(lossless::maxEncodedBytes(p, cclzBfloat16, kCount));
  const uint64_t bytes =
      lossless::encodeRef(p, cclzBfloat16, input.data(), kCount, frame.data(), frame.size());
  const FrameView v = viewFrame(frame.data());
  ASSERT_EQ(v.numChunks, 1u);
  const uint8_t* b = frame.data() + v.blocksOffset;
  // Lane sizes: 31 lanes of 32 x 5 = 160 bits; lane 1: 31 x 5 + 2 = 157. Base 157, width
  // bitWidth(3) = 2, deltas 3 except lane 1's 0. Streams: 8 + 8 bytes of header and deltas,
  // then 31 x 160 + 157 = 5117 bits = 640 bytes: a block of 656 bytes.
  EXPECT_EQ(b[0], 1);
  EXPECT_EQ(b[1], 0) << "code 0, no escape";
  EXPECT_EQ(b[2], 127);
  EXPECT_EQ(b[3], 2);
  EXPECT_EQ(readLE<uint16_t>(b + 4), 157);
  EXPECT_EQ(b[6] | b[7], 0);
  // Deltas, 2 bits each from bit 64: lane 0 = 3, lane 1 = 0, lanes 2.. = 3.
  EXPECT_EQ(b[8], 0xF3);  // lanes 3, 2, 1, 0: 11 11 00 11
  for (int i = 9; i < 16; ++i) EXPECT_EQ(b[i], 0xFF) << "byte " << i;
  EXPECT_EQ(v.chunkEnds[0], 656u);
  EXPECT_EQ(v.blocksOffset + 656, bytes);
  // Canonical code 0: the 2-bit codes are offsets 1, 2, 3 (00, 01, 10 read most significant bit
  // first), so offset 1's code is 00; offset 0's 5-bit code follows the 3-bit (offset 4) and
  // the shorter ones. Lane 0 (bit 128 on) codes 32 times offset 0; lane 1 (bit 288 on) starts
  // with offset 1: two zero bits.
  const lossless::Codes codes = lossless::makeCodes();
  const uint32_t c0 = codes.code[0][0][0], c1 = codes.code[0][0][1];
  EXPECT_EQ(c0 >> 16, 5u);
  EXPECT_EQ(c1, 2u << 16) << "offset 1: the first 2-bit code, 00";
  uint32_t first5 = 0;
  for (int i = 0; i < 5; ++i) first5 |= ((b[16 + i / 8] >> (i % 8)) & 1u) << i;
  EXPECT_EQ(first5, c0 & 0xFFFF) << "lane 0 opens with offset 0's code";
  EXPECT_EQ((b[16 + 160 / 8] >> 0) & 3u, 0u) << "lane 1 opens with offset 1's code, 00";
  std::vector<uint8_t> out(2 * kCount);
  ASSERT_EQ(lossless::decodeRef(frame.data(), bytes, cclzBfloat16, kCount, out.data()), kFrameOk);
  EXPECT_EQ(out, input);
}

}  // namespace
}  // namespace cclz::test
