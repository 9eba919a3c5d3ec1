// Round trips through the CPU reference of the lossless codec (src/codec/lossless/ref.cpp):
// dtype x size x configuration x data kind, bytes compared exactly, outputs guarded.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "codec/lossless/ref.h"
#include "common/error.h"
#include "support/configs.h"
#include "support/data.h"
#include "support/frame_view.h"
#include "support/guarded_buffer.h"

namespace cclz::test {
namespace {

using lossless::decodeRef;
using lossless::encodeRef;
using lossless::maxEncodedBytes;

using RoundTripParam = std::tuple<int, size_t, CodecSetup, DataKind>;

std::string roundTripName(const testing::TestParamInfo<RoundTripParam>& info) {
  const auto& [dtype, count, setup, kind] = info.param;
  return std::string(dtypeLabel(dtype)) + "_n" + std::to_string(count) + "_" + setup.name + "_" +
         dataKindLabel(kind);
}

class LosslessRefRoundTrip : public testing::TestWithParam<RoundTripParam> {};

// Chunk blocks (docs/formats.md, "Lossless payload"): what the data kind promises.
void checkBlocks(const uint8_t* frame, const FrameView& v, const lossless::Params& p,
                 DataKind kind) {
  for (uint32_t k = 0; k < v.numChunks; ++k) {
    SCOPED_TRACE("chunk " + std::to_string(k));
    const uint64_t begin = k ? v.chunkEnds[k - 1] : 0, bytes = v.chunkEnds[k] - begin;
    const uint8_t* b = frame + v.blocksOffset + begin;
    ASSERT_EQ(bytes % 16, 0u);
    ASSERT_TRUE(b[0] == 0 || b[0] == 1 || b[0] == 2);
    if (b[0] == 2) {
      EXPECT_EQ(bytes, 16u) << "a chunk of one symbol is 16 bytes";
    }
    const bool full = (k + 1) * uint64_t{p.chunkElems} <= v.count;
    if (b[0] == 1) {
      EXPECT_EQ(b[1] & 0x78, 0) << "table index and escape flag only";
      EXPECT_LE(b[3], 16) << "size deltas are at most 16 bits wide";
      EXPECT_EQ(b[6] | b[7], 0);
    }
    switch (kind) {
      case DataKind::kRandomBits:  // (a short last chunk of one element is constant)
        if (full) {
          EXPECT_EQ(b[0], 0) << "incompressible symbols must be stored";
        }
        break;
      case DataKind::kOneSymbolPerChunk:
      case DataKind::kConstant:
        if (!full) break;
        EXPECT_EQ(b[0], 2) << "a chunk of one symbol";
        break;
      case DataKind::kTwoSymbolsPerChunk:
        if (full) {
          EXPECT_NE(b[0], 2);
        }
        break;
      case DataKind::kGauss1:
      case DataKind::kGaussTiny:
      case DataKind::kGaussHuge:
        // fp16 N(0, 1e-5) is mostly subnormal: its symbols are mantissa bits, which the static
        // codes (made for exponents) do not shrink, so such chunks may be stored.
        if (full && !(v.dtype == cclzFloat16 && kind == DataKind::kGaussTiny)) {
          EXPECT_EQ(b[0], 1) << "Gaussian exponents compress";
          if (v.dtype != cclzFloat16) {  // fp16 symbols 8 octaves down escape
            EXPECT_EQ(b[1] & 0x80, 0) << "no Gaussian exponent is 32 octaves down";
          }
        }
        break;
      default:
        break;
    }
  }
}

TEST_P(LosslessRefRoundTrip, ExactAndWellFormed) {
  const auto& [dtype, count, setup, kind] = GetParam();
  const lossless::Params p = setup.params();
  const size_t esize = elementSize(dtype);
  const std::vector<uint8_t> input = makeData(kind, dtype, count, p.chunkElems,
                                              mixSeed(static_cast<uint64_t>(kind), dtype, count));

  const uint64_t capacity = maxEncodedBytes(p, dtype, count);
  // Encoding twice, into buffers holding different garbage, gives the same bytes: the encoder
  // writes every byte of the frame, padding included.
  std::vector<uint8_t> frame(capacity, 0x00), again(capacity, 0xFF);
  const uint64_t bytes = encodeRef(p, dtype, input.data(), count, frame.data(), capacity);
  ASSERT_EQ(encodeRef(p, dtype, input.data(), count, again.data(), capacity), bytes);
  ASSERT_GE(bytes, 64u);
  ASSERT_LE(bytes, capacity);
  ASSERT_EQ(firstMismatch(frame.data(), again.data(), bytes), SIZE_MAX);

  const FrameView v = viewFrame(frame.data());
  EXPECT_EQ(std::memcmp(frame.data(), "CCLZ", 4), 0);
  EXPECT_EQ(v.version, 2) << "the lossless frame version";
  EXPECT_EQ(v.codec, cclzCodecLossless);
  EXPECT_EQ(v.dtype, dtype);
  EXPECT_EQ(v.flags, 0);
  EXPECT_EQ(v.count, count);
  EXPECT_EQ(v.frameBytes, bytes);
  EXPECT_EQ(v.chunkElems, p.chunkElems);
  EXPECT_EQ(v.numChunks, (count + p.chunkElems - 1) / p.chunkElems);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(v.params[i], 0) << "the payload has no parameter bytes";
  EXPECT_EQ(v.checksum, fnv1a32(frame.data(), 60));
  // The chunk table: block ends increase, 16-byte multiples, the last one closes the frame.
  uint64_t previous = 0;
  for (uint64_t end : v.chunkEnds) {
    EXPECT_GT(end, previous);
    EXPECT_EQ(end % 16, 0u);
    previous = end;
  }
  EXPECT_EQ(v.blocksOffset + previous, bytes);
  ASSERT_NO_FATAL_FAILURE(checkBlocks(frame.data(), v, p, kind));

  GuardedBuffer out(count * esize);
  ASSERT_EQ(decodeRef(frame.data(), bytes, dtype, count, out.data()), kFrameOk);
  EXPECT_EQ(firstMismatch(out.data(), input.data(), input.size()), SIZE_MAX);
  EXPECT_TRUE(out.guardsIntact());

  // Bytes after the frame are ignored: a frame is read from a larger receive buffer.
  out.fill(0x5A);
  ASSERT_EQ(decodeRef(frame.data(), capacity, dtype, count, out.data()), kFrameOk);
  EXPECT_EQ(firstMismatch(out.data(), input.data(), input.size()), SIZE_MAX);
  EXPECT_TRUE(out.guardsIntact());
}

INSTANTIATE_TEST_SUITE_P(All, LosslessRefRoundTrip,
                         testing::Combine(testing::ValuesIn(losslessDtypes()),
                                          testing::ValuesIn(testSizes()),
                                          testing::ValuesIn(losslessSetups()),
                                          testing::ValuesIn(allDataKinds())),
                         roundTripName);

// The reference rejects what the format does not allow, with typed errors (the API turns them
// into result codes).
TEST(LosslessRefEncode, RejectsInvalidArguments) {
  const std::vector<uint8_t> input = makeData(DataKind::kGauss1, cclzBfloat16, 100, 1024, 1);
  const lossless::Params good{1024};
  std::vector<uint8_t> frame(maxEncodedBytes(good, cclzBfloat16, 100));
  auto code = [&](const lossless::Params& p, int dtype, const void* src, uint8_t* dst,
                  uint64_t capacity) {
    try {
      encodeRef(p, dtype, src, 100, dst, capacity);
      return cclzSuccess;
    } catch (const Error& e) {
      return e.code();
    }
  };
  EXPECT_EQ(code(good, cclzBfloat16, input.data(), frame.data(), frame.size()), cclzSuccess);
  EXPECT_EQ(code(good, cclzInt32, input.data(), frame.data(), frame.size()), cclzNotSupported);
  for (uint32_t chunk : {0u, 512u, 1000u, 3072u, 8192u}) {
    EXPECT_EQ(code({chunk}, cclzBfloat16, input.data(), frame.data(), frame.size()),
              cclzInvalidArgument)
        << "chunkElems " << chunk;
  }
  EXPECT_EQ(code(good, cclzBfloat16, nullptr, frame.data(), frame.size()), cclzInvalidArgument);
  EXPECT_EQ(code(good, cclzBfloat16, input.data(), nullptr, frame.size()), cclzInvalidArgument);
  EXPECT_EQ(code(good, cclzBfloat16, input.data(), frame.data(), frame.size() - 1),
            cclzBufferTooSmall);
}

}  // namespace
}  // namespace cclz::test
