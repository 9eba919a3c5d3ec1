// Corrupt and truncated fp8 frames are rejected, never read or written out of bounds, and leave
// the output (and an accumulator) untouched; invalid configurations and calls are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cclz/cclz.h"
#include "codec/fp8/format.h"
#include "common/float_bits.h"
#include "support/codec_handle.h"
#include "support/data.h"
#include "support/guarded_buffer.h"
#include "support/stress.h"

namespace cclz::test {
namespace {

cclzCodecConfig_t fp8Config(cclzFp8Rotation_t rotation = cclzFp8RotateAlways) {
  cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
  c.codec = cclzCodecFp8;
  c.fp8RowElems = 256;
  c.fp8Rotation = rotation;
  return c;
}

constexpr size_t kCount = 1000;

struct Fixture {
  CodecPtr codec;
  std::vector<uint8_t> input;
  HostFrame frame;
  explicit Fixture(cclzFp8Rotation_t rotation = cclzFp8RotateAlways)
      : codec(makeCodec(fp8Config(rotation))),
        input(makeData(DataKind::kGauss1, cclzBfloat16, kCount, 0, 3)),
        frame(encodeHost(codec.get(), cclzBfloat16, input, kCount)) {}

  // Decodes `bytes` (a possibly corrupted frame) into a guarded buffer and an accumulator;
  // returns the result, checking that a failure wrote nothing.
  cclzResult_t decode(const std::vector<uint8_t>& bytes, size_t srcBytes) {
    GuardedBuffer out(kCount * 2);
    std::vector<float> acc(kCount, 1.5f);
    const cclzResult_t r =
        cclzDecodeHost(codec.get(), bytes.data(), srcBytes, out.data(), kCount, cclzBfloat16);
    const cclzResult_t ra = cclzDecodeAccumulateHost(codec.get(), bytes.data(), srcBytes,
                                                     acc.data(), kCount, cclzBfloat16);
    EXPECT_EQ(r, ra);
    EXPECT_TRUE(out.guardsIntact());
    if (r != cclzSuccess) {
      for (size_t i = 0; i < out.size(); ++i)
        if (out.data()[i] != GuardedBuffer::kPattern) {
          ADD_FAILURE() << "a rejected frame wrote byte " << i;
          break;
        }
      size_t changed = 0;
      for (float a : acc) changed += a != 1.5f;
      EXPECT_EQ(changed, 0u) << "a rejected frame changed the accumulator";
    }
    return r;
  }
};

fp8::Layout layoutOf() { return fp8::frameLayout(kCount, 256); }

// Rewrites a field of the header and its checksum, so that only the field's check can fail.
std::vector<uint8_t> withHeader(std::vector<uint8_t> bytes, void (*edit)(FrameHeader&)) {
  FrameHeader h;
  std::memcpy(&h, bytes.data(), sizeof h);
  edit(h);
  h.checksum = headerChecksum(h);
  std::memcpy(bytes.data(), &h, sizeof h);
  return bytes;
}

TEST(Fp8Corrupt, ValidFrameDecodes) {
  Fixture f;
  EXPECT_EQ(f.decode(f.frame.bytes, f.frame.bytes.size()), cclzSuccess);
}

TEST(Fp8Corrupt, TruncatedFramesAreRejected) {
  Fixture f;
  for (size_t n = 1; n < f.frame.bytes.size(); n += (n < 128 ? 1 : 61)) {
    std::vector<uint8_t> cut(f.frame.bytes.begin(), f.frame.bytes.begin() + n);
    EXPECT_EQ(f.decode(cut, n), cclzCorruptFrame) << n << " bytes";
  }
}

TEST(Fp8Corrupt, HeaderFieldsAreChecked) {
  Fixture f;
  const std::vector<void (*)(FrameHeader&)> edits = {
      [](FrameHeader& h) { h.params[0] = 3; },     // unknown grid
      [](FrameHeader& h) { h.params[1] = 3; },     // Hadamard of 8
      [](FrameHeader& h) { h.params[1] = 9; },     // Hadamard of 512
      [](FrameHeader& h) { h.params[2] = 3; },     // unknown policy
      [](FrameHeader& h) { h.params[3] = 0; },     // no candidates
      [](FrameHeader& h) { h.params[3] = 33; },    // more than an octave
      [](FrameHeader& h) { h.params[4] = 0; },     // threshold
      [](FrameHeader& h) { h.params[5] = 1; },     // auto shape: 256 is no candidate
      [](FrameHeader& h) { h.params[5] = 2; },     // unknown shape
      [](FrameHeader& h) { h.params[6] = 1; },     // smoothing area: the frame is too small
      [](FrameHeader& h) { h.params[7] = 1; },     // smoothed without an area
      [](FrameHeader& h) { h.chunkElems = 100; },  // row not a multiple of 64
      [](FrameHeader& h) { h.chunkElems = 512; },  // numChunks and frameBytes disagree
      [](FrameHeader& h) { h.chunkElems = 0; },    // no row
      [](FrameHeader& h) { h.numChunks += 1; },    // rows
      [](FrameHeader& h) { h.frameBytes -= 16; },  // size
      [](FrameHeader& h) { h.flags = 1; },         // reserved
      [](FrameHeader& h) { h.codec = cclzCodecNone; },
      [](FrameHeader& h) { h.count -= 1; },
      [](FrameHeader& h) { h.dtype = cclzFloat16; },
  };
  for (size_t i = 0; i < edits.size(); ++i)
    EXPECT_EQ(f.decode(withHeader(f.frame.bytes, edits[i]), f.frame.bytes.size()), cclzCorruptFrame)
        << "edit " << i;
  std::vector<uint8_t> bad = f.frame.bytes;
  bad[9] ^= 1;  // without fixing the checksum
  EXPECT_EQ(f.decode(bad, bad.size()), cclzCorruptFrame);
}

TEST(Fp8Corrupt, SideDataIsChecked) {
  Fixture f;
  const fp8::Layout l = layoutOf();
  ASSERT_EQ(f.frame.bytes[l.flags], 1) << "rows of Gaussian data are rotated under 'always'";
  const auto coarse = [&](float c) {
    std::vector<uint8_t> b = f.frame.bytes;
    std::memcpy(&b[l.coarse + 4], &c, 4);
    return b;
  };
  for (float c : {NAN, INFINITY, -1.0f, -0.0f, 1e31f})
    EXPECT_EQ(f.decode(coarse(c), f.frame.bytes.size()), cclzCorruptFrame) << c;
  std::vector<uint8_t> flag = f.frame.bytes;
  flag[l.flags + 1] = 2;
  EXPECT_EQ(f.decode(flag, flag.size()), cclzCorruptFrame);
  std::vector<uint8_t> special = f.frame.bytes;
  special[l.codes + 300] = fp8::kCodeNaN;  // row 1 is rotated: no special code may be there
  EXPECT_EQ(f.decode(special, special.size()), cclzCorruptFrame);
  special[l.codes + 300] = fp8::kCodePosInf;
  EXPECT_EQ(f.decode(special, special.size()), cclzCorruptFrame);

  Fixture never(cclzFp8RotateNever);
  std::vector<uint8_t> rotated = never.frame.bytes;
  rotated[l.flags] = 1;  // a rotated row in a frame whose encoder never rotates
  EXPECT_EQ(never.decode(rotated, rotated.size()), cclzCorruptFrame);
  std::vector<uint8_t> nan = never.frame.bytes;
  nan[l.codes + 300] = fp8::kCodeNaN;  // fine where nothing is rotated: it decodes as NaN
  EXPECT_EQ(never.decode(nan, nan.size()), cclzSuccess);
}

// A frame whose row length the encoder chose and whose channels it smoothed: its own fields
// (params[5..7], the shift bytes) are checked like the rest.
TEST(Fp8Corrupt, ShapeAndSmoothingFieldsAreChecked) {
  cclzCodecConfig_t c = fp8Config(cclzFp8RotateDefault);
  c.fp8Format = cclzFp8Int8;
  c.fp8RowElems = 0;
  CodecPtr codec = makeCodec(c);
  const size_t n = 140 * 512;  // rows of 512: 140 of them, enough to smooth
  std::vector<uint8_t> input(2 * n);
  uint64_t state = 9;
  std::vector<double> scale(512);
  for (auto& v : scale) v = std::exp2(normalFrom(state) * 0.5);
  scale[77] = 700;
  for (size_t i = 0; i < n; ++i) {
    const uint16_t h = floatToBf16(float(normalFrom(state) * scale[i % 512]));
    std::memcpy(&input[2 * i], &h, 2);
  }
  const HostFrame frame = encodeHost(codec.get(), cclzBfloat16, input, n);
  FrameHeader h;
  std::memcpy(&h, frame.bytes.data(), sizeof h);
  ASSERT_EQ(h.chunkElems, 512u);
  ASSERT_EQ(h.params[5], 1);
  ASSERT_EQ(h.params[7], 1);
  fp8::Params p;
  ASSERT_EQ(fp8::checkFp8Header(h, &p), kFrameOk);
  const fp8::Layout l = fp8::frameLayout(n, p);
  for (uint32_t j = 0; j < 512; ++j) {  // 700x: ~9 binades above the median, 3 of them kept
    if (j == 77) {
      EXPECT_TRUE(frame.bytes[l.smooth + j] >= 5 && frame.bytes[l.smooth + j] <= 8);
    } else {
      EXPECT_EQ(frame.bytes[l.smooth + j], 0) << j;
    }
  }
  const auto decode = [&](const std::vector<uint8_t>& bytes) {
    GuardedBuffer out(2 * n);
    const cclzResult_t r =
        cclzDecodeHost(codec.get(), bytes.data(), bytes.size(), out.data(), n, cclzBfloat16);
    EXPECT_TRUE(out.guardsIntact());
    if (r != cclzSuccess)
      for (size_t i = 0; i < out.size(); ++i)
        if (out.data()[i] != GuardedBuffer::kPattern) {
          ADD_FAILURE() << "a rejected frame wrote byte " << i;
          break;
        }
    return r;
  };
  EXPECT_EQ(decode(frame.bytes), cclzSuccess);
  const std::vector<void (*)(FrameHeader&)> edits = {
      [](FrameHeader& e) { e.params[5] = 0, e.chunkElems = 576, e.numChunks = 125; },  // size
      [](FrameHeader& e) { e.params[5] = 2; },                        // unknown shape
      [](FrameHeader& e) { e.chunkElems = 448, e.numChunks = 160; },  // below 512
      [](FrameHeader& e) { e.chunkElems = 5120, e.numChunks = 14; },  // above 4096
      [](FrameHeader& e) { e.chunkElems = 544, e.numChunks = 132; },  // not a multiple of 64
      [](FrameHeader& e) { e.chunkElems = 1024, e.numChunks = 70; },  // too few rows to smooth
      [](FrameHeader& e) { e.params[6] = 0; },                        // smoothed without an area
      [](FrameHeader& e) { e.params[7] = 2; },                        // not a flag
  };
  for (size_t i = 0; i < edits.size(); ++i)
    EXPECT_EQ(decode(withHeader(frame.bytes, edits[i])), cclzCorruptFrame) << "edit " << i;
  std::vector<uint8_t> shift = frame.bytes;
  shift[l.smooth + 3] = 16;  // past the largest shift
  EXPECT_EQ(decode(shift), cclzCorruptFrame);
  shift[l.smooth + 3] = 15;
  EXPECT_EQ(decode(shift), cclzSuccess) << "any shift up to 15 is valid";
  for (size_t cut : {size_t{64}, l.smooth, frame.bytes.size() - 16}) {
    std::vector<uint8_t> b(frame.bytes.begin(), frame.bytes.begin() + cut);
    EXPECT_EQ(decode(b), cclzCorruptFrame) << cut;
  }
}

// Any payload byte may be anything: decoding never crashes or strays (ASan checks in CI).
TEST(Fp8Corrupt, RandomPayloadBytes) {
  Fixture f;
  uint64_t state = 1;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint8_t> b = f.frame.bytes;
    for (int k = 0; k < 8; ++k) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      b[64 + (state >> 33) % (b.size() - 64)] = static_cast<uint8_t>(state >> 20);
    }
    const cclzResult_t r = f.decode(b, b.size());
    EXPECT_TRUE(r == cclzSuccess || r == cclzCorruptFrame);
  }
}

TEST(Fp8Api, InvalidConfigurations) {
  const auto create = [](cclzCodecConfig_t c) {
    cclzCodec_t h = nullptr;
    const cclzResult_t r = cclzCodecCreate(&h, &c);
    cclzCodecDestroy(h);
    return r;
  };
  const cclzCodecConfig_t good = fp8Config();
  EXPECT_EQ(create(good), cclzSuccess);
  const std::vector<void (*)(cclzCodecConfig_t&)> edits = {
      [](cclzCodecConfig_t& c) { c.fp8RowElems = 100; },
      [](cclzCodecConfig_t& c) { c.fp8RowElems = -64; },
      [](cclzCodecConfig_t& c) { c.fp8RowElems = (1 << 24) + 64; },
      [](cclzCodecConfig_t& c) { c.fp8RowElems = 64, c.fp8HadamardSize = 128; },
      [](cclzCodecConfig_t& c) { c.fp8HadamardSize = 48; },
      [](cclzCodecConfig_t& c) { c.fp8HadamardSize = 8; },
      [](cclzCodecConfig_t& c) { c.fp8HadamardSize = 512; },
      [](cclzCodecConfig_t& c) { c.fp8RotateThreshold = 9; },
      [](cclzCodecConfig_t& c) { c.fp8RotateThreshold = -1; },
      [](cclzCodecConfig_t& c) { c.fp8ScaleCandidates = 33; },
      [](cclzCodecConfig_t& c) { c.chunkElems = 4096; },
      [](cclzCodecConfig_t& c) {
        const int v = 4;
        std::memcpy(&c.fp8Format, &v, sizeof v);
      },
      [](cclzCodecConfig_t& c) {
        const int v = -1;
        std::memcpy(&c.fp8Rotation, &v, sizeof v);
      },
  };
  for (size_t i = 0; i < edits.size(); ++i) {
    cclzCodecConfig_t c = good;
    edits[i](c);
    EXPECT_EQ(create(c), cclzInvalidArgument) << "edit " << i;
  }
}

TEST(Fp8Api, InvalidCalls) {
  Fixture f;
  cclzCodec_t codec = f.codec.get();
  size_t bytes = 0;
  EXPECT_EQ(cclzCodecMaxEncodedSize(codec, 10, cclzInt32, &bytes), cclzNotSupported);
  EXPECT_EQ(cclzCodecMaxEncodedSize(codec, 10, cclzFloat64, &bytes), cclzNotSupported);
  std::vector<uint8_t> dst(f.frame.capacity);
  size_t written = 0;
  EXPECT_EQ(cclzEncodeHost(codec, f.input.data(), kCount, cclzBfloat16, dst.data(),
                           f.frame.capacity - 1, &written),
            cclzBufferTooSmall);
  EXPECT_EQ(cclzEncodeHost(codec, nullptr, kCount, cclzBfloat16, dst.data(), dst.size(), &written),
            cclzInvalidArgument);
  std::vector<uint8_t> out(4 * kCount);
  EXPECT_EQ(cclzDecodeHost(codec, f.frame.bytes.data(), f.frame.bytes.size(), out.data(),
                           kCount - 1, cclzBfloat16),
            cclzCorruptFrame);
  EXPECT_EQ(cclzDecodeHost(codec, f.frame.bytes.data(), f.frame.bytes.size(), out.data(), kCount,
                           cclzFloat32),
            cclzCorruptFrame);
  EXPECT_NE(std::string(cclzGetLastError(nullptr)), "");
  cclzFrameInfo_t info{};
  info.size = sizeof info;
  ASSERT_EQ(cclzFrameGetInfo(f.frame.bytes.data(), f.frame.bytes.size(), &info), cclzSuccess);
  EXPECT_EQ(info.codec, cclzCodecFp8);
  EXPECT_EQ(info.count, kCount);
  EXPECT_EQ(info.chunkElems, 256u);
  EXPECT_EQ(info.numChunks, 4u);
}

}  // namespace
}  // namespace cclz::test
