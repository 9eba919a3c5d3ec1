// The fp8 codec on the GPU against its CPU reference: frames equal byte for byte (memcmp), decode
// and decode-and-accumulate outputs equal bit for bit, corrupt frames reported. Built where CUDA
// is; registered with the ctest label "gpu"; every test skips when no device is visible.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "codec/codec.h"
#include "codec/device.h"
#include "collective/reduce.h"
#include "codec/fp8/format.h"
#include "codec/fp8/ref.h"
#include "common/float_bits.h"
#include "support/codec_handle.h"
#include "support/data.h"
#include "support/device_buffer.h"
#include "support/reduce_steps.h"
#include "support/stress.h"
#include "support/tensors.h"

namespace cclz::test {
namespace {

struct GpuSetup {
  const char* name;
  cclzFp8Format_t format;
  int rowElems, hadamard;
  cclzFp8Rotation_t rotation;
  int candidates;
  cclzCodecConfig_t config() const {
    cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
    c.codec = cclzCodecFp8;
    c.fp8Format = format;
    c.fp8RowElems = rowElems;
    c.fp8HadamardSize = hadamard;
    c.fp8Rotation = rotation;
    c.fp8ScaleCandidates = candidates;
    return c;
  }
};

const std::vector<GpuSetup>& setups() {
  static const std::vector<GpuSetup> s = {
      {"default", cclzFp8Default, 0, 0, cclzFp8RotateDefault, 0},
      {"row768", cclzFp8E4M3, 768, 0, cclzFp8RotateNever, 0},
      // Rows longer than the encoder holds in registers (1024 bf16/fp16 values): encoded in
      // segments of 1024, the last one partial for 1536.
      {"row4096", cclzFp8E4M3, 4096, 0, cclzFp8RotateNever, 0},
      {"e5m2_row1536_k8", cclzFp8E5M2, 1536, 0, cclzFp8RotateNever, 8},
      {"adaptive", cclzFp8E4M3, 768, 0, cclzFp8RotateAdaptive, 0},
      {"always_h16", cclzFp8E4M3, 256, 16, cclzFp8RotateAlways, 0},
      {"always_h256_k5", cclzFp8E4M3, 1024, 256, cclzFp8RotateAlways, 5},
      {"e5m2_adaptive_h128", cclzFp8E5M2, 768, 128, cclzFp8RotateAdaptive, 0},
      {"int8", cclzFp8Int8, 768, 0, cclzFp8RotateDefault, 0},
      {"int8_k32_row64", cclzFp8Int8, 64, 32, cclzFp8RotateAdaptive, 32},
      // The encoder's own choices (row length and smoothing, sampling kernels on the device).
      {"auto_int8", cclzFp8Int8, 0, 0, cclzFp8RotateDefault, 0},
      {"auto_adaptive_h128", cclzFp8E4M3, 0, 128, cclzFp8RotateAdaptive, 0},
      {"smooth_row512_always", cclzFp8E4M3, 512, 0, cclzFp8RotateAlways, 0},
      // The decoder's plain path (policy never, no smoothing) on each grid: E5M2 and INT8 there
      // take other value conversions than E4M3; rows of 64 put 8 rows in a warp's tile.
      {"e5m2_row1024", cclzFp8E5M2, 1024, 0, cclzFp8RotateNever, 0},
      {"int8_never_row64", cclzFp8Int8, 64, 0, cclzFp8RotateNever, 0},
      // Rows longer than the encoder holds in registers (1024 bf16/fp16 values): the two-read path.
      {"row2048", cclzFp8E4M3, 2048, 0, cclzFp8RotateNever, 0},
      // The held rows' three-phase encode with few candidates per lane pair (2: one each; 7: four
      // and three) and rows whose last tile is partly or wholly missing (320: 5 blocks, 192: 3).
      {"row320_k2", cclzFp8E4M3, 320, 0, cclzFp8RotateNever, 2},
      {"e5m2_row192_k7", cclzFp8E5M2, 192, 0, cclzFp8RotateNever, 7},
  };
  return s;
}

std::vector<uint8_t> toDtype(const std::vector<float>& x, int dtype) {
  std::vector<uint8_t> out(x.size() * elementSize(dtype));
  for (size_t i = 0; i < x.size(); ++i) {
    if (dtype == cclzFloat32) {
      std::memcpy(&out[4 * i], &x[i], 4);
    } else {
      const uint16_t h = dtype == cclzBfloat16 ? cclz::floatToBf16(x[i]) : cclz::floatToHalf(x[i]);
      std::memcpy(&out[2 * i], &h, 2);
    }
  }
  return out;
}

// Inputs: Gaussian with NaN/Inf sprinkled in, a spiky one (outlier rows and blocks), the stress
// set, and one real tensor when the data is there.
struct Input {
  std::string name;
  std::vector<float> x;
};
std::vector<Input> inputs(size_t count) {
  std::vector<Input> in;
  uint64_t state = count * 7919 + 1;
  Input g{"gauss_specials", std::vector<float>(count)};
  for (size_t i = 0; i < count; ++i) g.x[i] = float(normalFrom(state));
  for (size_t i = 5; i < count; i += 4099) g.x[i] = NAN;
  for (size_t i = 77; i < count; i += 6151) g.x[i] = (i & 1) ? INFINITY : -INFINITY;
  in.push_back(std::move(g));
  Input s{"spiky", std::vector<float>(count)};
  for (size_t i = 0; i < count; ++i) {
    s.x[i] = float(normalFrom(state) * 1e-3);
    if (uniformFrom(state) < 3e-3) s.x[i] *= float(1e3 * uniformFrom(state));
  }
  in.push_back(std::move(s));
  // Channel structure with a period of 768 (the row length the encoder should find) and three
  // massive channels (what smoothing is for), NaN and Inf included.
  Input c{"channels", std::vector<float>(count)};
  std::vector<double> scale(768);
  for (auto& v : scale) v = std::exp2(normalFrom(state) * 0.5);
  scale[5] = 300, scale[100] = 900, scale[701] = 150;
  for (size_t i = 0; i < count; ++i) c.x[i] = float(normalFrom(state) * scale[i % 768]);
  for (size_t i = 11; i < count; i += 5003) c.x[i] = NAN;
  for (size_t i = 99; i < count; i += 7001) c.x[i] = INFINITY;
  in.push_back(std::move(c));
  return in;
}

void expectSameBytes(const std::vector<uint8_t>& gpu, const std::vector<uint8_t>& cpu,
                     const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  const size_t at = firstMismatch(gpu.data(), cpu.data(), cpu.size());
  EXPECT_EQ(at, SIZE_MAX) << what << ": GPU differs from the CPU reference at byte " << at << " of "
                          << cpu.size();
}

// Everything for one input: device encode vs host encode (aligned and offset source), device
// decode vs host decode, device accumulate vs host accumulate.
void checkAll(const GpuSetup& setup, int dtype, const std::vector<float>& x,
              const std::string& what) {
  SCOPED_TRACE(what + " / " + setup.name + " / " + dtypeLabel(dtype) + " / n " +
               std::to_string(x.size()));
  CodecPtr codec = makeCodec(setup.config());
  ASSERT_TRUE(codec);
  const auto type = static_cast<cclzDataType_t>(dtype);
  const size_t count = x.size(), esize = elementSize(dtype);
  const std::vector<uint8_t> input = toDtype(x, dtype);
  const HostFrame cpu = encodeHost(codec.get(), dtype, input, count);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto* cs = reinterpret_cast<cclzStream_t>(stream);

  for (size_t offset : {size_t{0}, size_t{1}}) {  // 1: a source that is not 16-byte aligned
    GuardedDeviceBuffer src((count + offset) * esize), dst(cpu.capacity), size(8);
    ASSERT_TRUE(src.ok() && dst.ok() && size.ok());
    src.upload(input.data(), input.size(), offset * esize);
    ASSERT_EQ(cclzEncode(codec.get(), src.data() + offset * esize, count, type, dst.data(),
                         cpu.capacity, reinterpret_cast<size_t*>(size.data()), cs),
              cclzSuccess)
        << cclzGetLastError(nullptr);
    size_t last = 0;
    ASSERT_EQ(cclzCodecSynchronize(codec.get(), &last), cclzSuccess) << cclzGetLastError(nullptr);
    EXPECT_EQ(last, cpu.bytes.size());
    size_t deviceSize = 0;
    std::memcpy(&deviceSize, size.download(8).data(), 8);
    EXPECT_EQ(deviceSize, cpu.bytes.size());
    expectSameBytes(dst.download(cpu.bytes.size()), cpu.bytes,
                    "encode, source offset " + std::to_string(offset));
    EXPECT_TRUE(dst.guardsIntact() && src.guardsIntact());
  }

  std::vector<uint8_t> hostOut(count * esize);
  ASSERT_EQ(
      cclzDecodeHost(codec.get(), cpu.bytes.data(), cpu.bytes.size(), hostOut.data(), count, type),
      cclzSuccess);
  GuardedDeviceBuffer frame(cpu.bytes.size()), out(count * esize), acc(count * 4);
  frame.upload(cpu.bytes.data(), cpu.bytes.size());
  ASSERT_EQ(cclzDecode(codec.get(), frame.data(), cpu.bytes.size(), out.data(), count, type, cs),
            cclzSuccess);
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess) << cclzGetLastError(nullptr);
  expectSameBytes(out.download(count * esize), hostOut, "decode");
  EXPECT_TRUE(out.guardsIntact());

  uint64_t state = count + 3;
  std::vector<float> hostAcc(count);
  for (auto& a : hostAcc) a = float(normalFrom(state));
  acc.upload(hostAcc.data(), 4 * count);
  ASSERT_EQ(cclzDecodeAccumulateHost(codec.get(), cpu.bytes.data(), cpu.bytes.size(),
                                     hostAcc.data(), count, type),
            cclzSuccess);
  ASSERT_EQ(cclzDecodeAccumulate(codec.get(), frame.data(), cpu.bytes.size(),
                                 reinterpret_cast<float*>(acc.data()), count, type, cs),
            cclzSuccess);
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess) << cclzGetLastError(nullptr);
  std::vector<uint8_t> hostAccBytes(4 * count);
  if (count) std::memcpy(hostAccBytes.data(), hostAcc.data(), 4 * count);
  expectSameBytes(acc.download(4 * count), hostAccBytes, "decode-and-accumulate");
  EXPECT_TRUE(acc.guardsIntact());
  cudaStreamDestroy(stream);
}

class Fp8Gpu : public testing::TestWithParam<std::tuple<int, size_t>> {
 protected:
  void SetUp() override {
    if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(Fp8Gpu, MatchesTheReference) {
  const auto [dtype, count] = GetParam();
  for (const Input& in : inputs(count))
    for (const GpuSetup& s : setups()) checkAll(s, dtype, in.x, in.name);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, Fp8Gpu,
    testing::Combine(testing::Values(int(cclzBfloat16), int(cclzFloat16), int(cclzFloat32)),
                     testing::Values(size_t{0}, size_t{1}, size_t{7}, size_t{64}, size_t{65},
                                     size_t{1000}, size_t{4097}, size_t{100003}, size_t{1000001})),
    [](const auto& info) {
      return std::string(dtypeLabel(std::get<0>(info.param))) + "_n" +
             std::to_string(std::get<1>(info.param));
    });

// The fused steps of a reduce-scatter's sum (ReduceStep: the first frame from zero, the last
// one stored divided and rounded to the dtype) against the sum taken apart on the host: zero,
// decode-and-accumulate each frame in order, store (collective/reduce.h). Three frames (NaN and
// Inf in two of them) on the plain decoder and on the rotated one, and one frame alone (first
// and last at once); the accumulator after two steps too.
TEST(Fp8GpuReduce, FusedStepsMatchTheStepsApart) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  for (const char* name : {"default", "always_h16", "int8"}) {
    const GpuSetup* setup = nullptr;
    for (const GpuSetup& s : setups())
      if (std::string(s.name) == name) setup = &s;
    ASSERT_TRUE(setup);
    for (int dtype : {int(cclzBfloat16), int(cclzFloat16), int(cclzFloat32)}) {
      for (size_t count : {size_t{4101}, size_t{1000001}}) {
        SCOPED_TRACE(std::string(name) + " / " + dtypeLabel(dtype) + " / n " +
                     std::to_string(count));
        CodecPtr codec = makeCodec(setup->config());
        ASSERT_TRUE(codec);
        std::vector<std::vector<uint8_t>> frames;
        for (const Input& in : inputs(count))
          frames.push_back(encodeHost(codec.get(), dtype, toDtype(in.x, dtype), count).bytes);
        expectFusedStepsMatchTheStepsApart(fp8Codec(), setup->config(), codec.get(), dtype, count,
                                           frames);
      }
    }
  }
}

// `bytes` with the byte at `at` set to `value`.
std::vector<uint8_t> withByte(std::vector<uint8_t> bytes, size_t at, uint8_t value) {
  bytes[at] = value;
  return bytes;
}

// Frame r of a sum's test: input r % 3 scaled and shifted by r, so that the frames differ and
// their NaN and Inf fall at different places.
std::vector<std::vector<uint8_t>> sumFrames(cclzCodec_t codec, int dtype, size_t count,
                                            size_t n) {
  const std::vector<Input> in = inputs(count);
  std::vector<std::vector<uint8_t>> frames;
  for (size_t r = 0; r < n; ++r) {
    const std::vector<float>& base = in[r % in.size()].x;
    std::vector<float> x(count);
    for (size_t i = 0; i < count; ++i) x[i] = base[(i + 37 * r) % count] * (1.0f + 0.25f * r);
    frames.push_back(encodeHost(codec, dtype, toDtype(x, dtype), count).bytes);
  }
  return frames;
}

// The whole sum in one pass (Codec::decodeSumDevice: the fused paths' reduce-scatter) against
// the sum taken apart on the host: 1 to 8 plain frames (rows chosen from the data, so that the
// frames' row lengths differ; fixed rows; E5M2; the integer grid unrotated), NaN and Inf in
// them, lengths that end inside a warp's tile.
TEST(Fp8GpuReduce, OnePassSumMatchesTheStepsApart) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  const std::vector<GpuSetup> plain = {
      {"default", cclzFp8Default, 0, 0, cclzFp8RotateDefault, 0},
      {"row768", cclzFp8E4M3, 768, 0, cclzFp8RotateNever, 0},
      {"e5m2_row1536_k8", cclzFp8E5M2, 1536, 0, cclzFp8RotateNever, 8},
      {"int8_never", cclzFp8Int8, 768, 0, cclzFp8RotateNever, 0},
  };
  for (const GpuSetup& setup : plain) {
    for (int dtype : {int(cclzBfloat16), int(cclzFloat16), int(cclzFloat32)}) {
      for (size_t count : {size_t{4101}, size_t{300007}}) {
        CodecPtr codec = makeCodec(setup.config());
        ASSERT_TRUE(codec);
        const auto all = sumFrames(codec.get(), dtype, count, kMaxSumFrames);
        for (size_t n : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{kMaxSumFrames}}) {
          SCOPED_TRACE(std::string(setup.name) + " / " + dtypeLabel(dtype) + " / count " +
                       std::to_string(count) + " / " + std::to_string(n) + " frames");
          const std::vector<std::vector<uint8_t>> frames(all.begin(), all.begin() + n);
          expectOnePassSumMatchesTheStepsApart(fp8Codec(), setup.config(), codec.get(), dtype,
                                               count, frames);
        }
      }
    }
  }
}

// The one pass takes plain frames only, and at most kMaxSumFrames of them: configurations that
// may rotate and longer sums are left to the steps (sumsInOnePass is false). A frame that is not
// plain or not of the first frame's grid, or a corrupt header, is reported and nothing is
// stored; a bad row is reported.
TEST(Fp8GpuReduce, OnePassSumTakesOnlyPlainFrames) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  const size_t count = 5000;
  const GpuSetup never{"row768", cclzFp8E4M3, 768, 0, cclzFp8RotateNever, 0};
  const GpuSetup always{"always", cclzFp8E4M3, 768, 0, cclzFp8RotateAlways, 0};
  const GpuSetup e5m2{"e5m2", cclzFp8E5M2, 768, 0, cclzFp8RotateNever, 0};
  CodecPtr plainCodec = makeCodec(never.config()), rotating = makeCodec(always.config()),
           otherGrid = makeCodec(e5m2.config());
  const auto good = sumFrames(plainCodec.get(), cclzBfloat16, count, 2);
  const std::vector<uint8_t> rotated = sumFrames(rotating.get(), cclzBfloat16, count, 1)[0];
  const std::vector<uint8_t> e5m2Frame = sumFrames(otherGrid.get(), cclzBfloat16, count, 1)[0];
  const fp8::Layout l = fp8::frameLayout(count, 768);
  // Room for the largest frame (a rotating configuration's frames hold smoothing shifts too).
  const size_t room = std::max({good[0].size(), rotated.size(), e5m2Frame.size()});
  GuardedDeviceBuffer status(sizeof(DeviceStatus)), out(2 * count), first(room), second(room);
  first.upload(good[0].data(), good[0].size());
  const DeviceWorkspace ws{reinterpret_cast<DeviceStatus*>(status.data()), nullptr, 0};
  FrameSum sum;
  sum.n = 2, sum.frameBytes = room, sum.store = out.data();
  sum.frames[0] = first.data(), sum.frames[1] = second.data();

  EXPECT_FALSE(fp8Codec().sumsInOnePass(always.config(), 2)) << "a configuration that may rotate";
  EXPECT_FALSE(fp8Codec().sumsInOnePass(never.config(), kMaxSumFrames + 1));
  EXPECT_TRUE(fp8Codec().sumsInOnePass(never.config(), kMaxSumFrames));

  const std::vector<std::pair<std::string, std::pair<std::vector<uint8_t>, uint32_t>>> bad = {
      {"rotated frame", {rotated, kFrameMismatch}},
      {"another grid", {e5m2Frame, kFrameMismatch}},
      {"checksum", {withByte(good[1], 60, good[1][60] ^ 1), kFrameBadChecksum}},
      {"flag of a row", {withByte(good[1], l.flags + 2, 1), kFrameBadChunk}},
  };
  const std::vector<uint8_t> pattern(2 * count, 0xA5);
  for (const auto& [what, frameAndError] : bad) {
    SCOPED_TRACE(what);
    const std::vector<uint8_t> zeros(sizeof(DeviceStatus), 0);
    status.upload(zeros.data(), zeros.size());
    out.upload(pattern.data(), pattern.size());
    second.upload(frameAndError.first.data(), frameAndError.first.size());
    fp8Codec().decodeSumDevice(never.config(), sum, cclzBfloat16, count, ws, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    DeviceStatus after{};
    std::memcpy(&after, status.download(sizeof after).data(), sizeof after);
    EXPECT_EQ(after.decodeError, frameAndError.second);
    if (frameAndError.second != kFrameBadChunk) {
      EXPECT_EQ(out.download(2 * count), pattern) << "nothing stored";
    }
    EXPECT_TRUE(out.guardsIntact() && second.guardsIntact());
  }
}

// n blocks of count values, one after another as a reduce-scatter's destinations' chunks lie,
// each with channels of its own period (the fp8 encoder chooses another row length and
// smoothing for each), and their frames encoded as one batch (Codec::encodeBatchDevice) on the
// device: each frame must equal the host's encode of its block, and its size must be written.
void expectBatchEqualsTheBlocksEncodes(const cclzCodecConfig_t& config, int dtype, size_t count,
                                       int n) {
  SCOPED_TRACE(std::string(codecFor(config.codec).name()) + " / " + dtypeLabel(dtype) + " / " +
               std::to_string(n) + " frames of " + std::to_string(count));
  const Codec& codec = codecFor(config.codec);
  const size_t esize = elementSize(dtype), blockBytes = count * esize;
  const size_t periods[] = {768, 512, 1536, 4096, 640, 2304, 1024, 3072};
  std::vector<uint8_t> input(n * blockBytes);
  for (int f = 0; f < n; ++f) {
    const std::vector<size_t> massive = f % 2 ? std::vector<size_t>{5, 300} : std::vector<size_t>{};
    const std::vector<uint8_t> block = toDtype(periodicChannels(periods[f], count, massive), dtype);
    std::memcpy(input.data() + f * blockBytes, block.data(), blockBytes);
  }
  const uint64_t capacity = codec.maxEncodedBytes(config, dtype, count);
  GuardedDeviceBuffer src(input.size()), sizes(8 * n), status(sizeof(DeviceStatus)),
      scratch(std::max<uint64_t>(16, codec.encodeBatchScratchBytes(config, dtype, count, n)));
  std::vector<std::unique_ptr<GuardedDeviceBuffer>> frames;
  FrameBatch batch;
  batch.n = n;
  for (int f = 0; f < n; ++f) {
    frames.push_back(std::make_unique<GuardedDeviceBuffer>(capacity));
    ASSERT_TRUE(frames.back()->ok());
    batch.src[f] = src.data() + f * blockBytes;
    batch.dst[f] = frames.back()->data();
    batch.encodedBytesOut[f] = reinterpret_cast<uint64_t*>(sizes.data()) + f;
  }
  ASSERT_TRUE(src.ok() && sizes.ok() && status.ok() && scratch.ok());
  src.upload(input.data(), input.size());
  const DeviceWorkspace ws{reinterpret_cast<DeviceStatus*>(status.data()), scratch.data(),
                           scratch.size()};
  codec.encodeBatchDevice(config, dtype, batch, count, ws, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint64_t> written(n);
  std::memcpy(written.data(), sizes.download(8 * n).data(), 8 * n);
  for (int f = 0; f < n; ++f) {
    std::vector<uint8_t> host(capacity);
    host.resize(codec.encodeHost(config, dtype, input.data() + f * blockBytes, count, host.data(),
                                 capacity));
    EXPECT_EQ(written[f], host.size()) << "frame " << f;
    expectSameBytes(frames[f]->download(host.size()), host, "frame " + std::to_string(f));
    EXPECT_TRUE(frames[f]->guardsIntact()) << "frame " << f;
  }
  EXPECT_TRUE(src.guardsIntact() && scratch.guardsIntact());
}

// Every path of the fp8 encode (rows from the data, with and without smoothing; the caller's
// rows, with and without smoothing), 1 to kMaxBatchFrames frames, blocks at 16-byte aligned
// offsets (2^19 values) and not (300001 values of bf16), every dtype; and the one-by-one default
// of a codec without a batch of its own (lossless).
TEST(Fp8GpuBatch, EachFrameIsTheEncodeOfItsBlock) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  for (const char* name : {"default", "auto_int8", "row768", "smooth_row512_always"}) {
    const auto named = std::find_if(setups().begin(), setups().end(),
                                    [&](const GpuSetup& s) { return std::string(s.name) == name; });
    ASSERT_NE(named, setups().end());
    SCOPED_TRACE(name);
    for (int n : {1, 3, kMaxBatchFrames})
      for (size_t count : {size_t{1} << 19, size_t{300001}})
        expectBatchEqualsTheBlocksEncodes(named->config(), cclzBfloat16, count, n);
    for (int dtype : {int(cclzFloat16), int(cclzFloat32)})
      expectBatchEqualsTheBlocksEncodes(named->config(), dtype, 300001, 2);
  }
  cclzCodecConfig_t lossless = CCLZ_CODEC_CONFIG_INITIALIZER;
  lossless.codec = cclzCodecLossless;
  expectBatchEqualsTheBlocksEncodes(lossless, cclzBfloat16, 300001, 3);
}

// Codec::encodeBlocksDevice, which the collectives call with a piece's blocks: blocks of unequal
// counts and more blocks than a batch holds encode one by one, a block of no values is skipped
// (its frame and size untouched); each frame equals the host's encode of its block.
TEST(Fp8GpuBatch, BlocksThatAreNoBatchEncodeOneByOne) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  const cclzCodecConfig_t config = setups()[0].config();  // rows from the data
  const Codec& codec = fp8Codec();
  const std::vector<std::vector<size_t>> cases = {
      {300001, 300001, 299999}, std::vector<size_t>(kMaxBatchFrames + 1, 70000), {0, 70000, 70000}};
  for (const std::vector<size_t>& counts : cases) {
    SCOPED_TRACE(std::to_string(counts.size()) + " blocks, the first of " +
                 std::to_string(counts[0]) + " values");
    const size_t n = counts.size(), most = *std::max_element(counts.begin(), counts.end());
    std::vector<std::vector<uint8_t>> inputs;
    std::vector<std::unique_ptr<GuardedDeviceBuffer>> src, dst;
    GuardedDeviceBuffer sizes(8 * n), status(sizeof(DeviceStatus)),
        scratch(
            std::max<uint64_t>(16, codec.encodeBlocksScratchBytes(config, cclzBfloat16, most, n)));
    std::vector<EncodeBlock> blocks(n);
    for (size_t f = 0; f < n; ++f) {
      inputs.push_back(toDtype(periodicChannels(512 + 256 * f, counts[f]), cclzBfloat16));
      src.push_back(std::make_unique<GuardedDeviceBuffer>(std::max<size_t>(2 * counts[f], 16)));
      dst.push_back(std::make_unique<GuardedDeviceBuffer>(
          codec.maxEncodedBytes(config, cclzBfloat16, std::max<size_t>(counts[f], 1))));
      src[f]->upload(inputs[f].data(), inputs[f].size());
      blocks[f] = {src[f]->data(), counts[f], dst[f]->data(),
                   reinterpret_cast<uint64_t*>(sizes.data()) + f};
    }
    const std::vector<uint8_t> sizesBefore = sizes.download(8 * n);
    const DeviceWorkspace ws{reinterpret_cast<DeviceStatus*>(status.data()), scratch.data(),
                             scratch.size()};
    codec.encodeBlocksDevice(config, cclzBfloat16, blocks.data(), n, ws, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint8_t> sizesAfter = sizes.download(8 * n);
    for (size_t f = 0; f < n; ++f) {
      uint64_t written = 0;
      std::memcpy(&written, sizesAfter.data() + 8 * f, 8);
      if (!counts[f]) {
        EXPECT_EQ(0, std::memcmp(sizesAfter.data() + 8 * f, sizesBefore.data() + 8 * f, 8))
            << "block " << f << " of no values: its size slot was written";
        EXPECT_EQ(dst[f]->download(dst[f]->size()),
                  std::vector<uint8_t>(dst[f]->size(), GuardedDeviceBuffer::kPattern))
            << "block " << f << " of no values: its frame was written";
        continue;
      }
      std::vector<uint8_t> host(dst[f]->size());
      host.resize(codec.encodeHost(config, cclzBfloat16, inputs[f].data(), counts[f], host.data(),
                                   host.size()));
      EXPECT_EQ(written, host.size()) << "block " << f;
      expectSameBytes(dst[f]->download(host.size()), host, "block " + std::to_string(f));
      EXPECT_TRUE(dst[f]->guardsIntact()) << "block " << f;
    }
    EXPECT_TRUE(scratch.guardsIntact());
  }
}

// A batch of no frames, or of more than kMaxBatchFrames, is refused before anything is queued.
TEST(Fp8GpuBatch, BatchSizeIsChecked) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  const cclzCodecConfig_t config = setups()[0].config();
  const DeviceWorkspace ws{nullptr, nullptr, 0};
  for (int n : {0, kMaxBatchFrames + 1}) {
    FrameBatch batch;
    batch.n = n;
    EXPECT_THROW(fp8Codec().encodeBatchDevice(config, cclzBfloat16, batch, 4096, ws, nullptr),
                 Error)
        << n << " frames";
  }
}

TEST(Fp8GpuTensors, StressAndRealTensorsMatchTheReference) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  for (const auto& t : makeStressTensors(0))
    for (const GpuSetup& s : setups()) checkAll(s, cclzBfloat16, t.values, t.name);
  const std::string dir = realTensorDir();
  if (dir.empty()) return;
  for (const auto& t : loadRealTensors(dir)) {
    std::vector<float> x(t.values.size());
    for (size_t i = 0; i < x.size(); ++i) x[i] = bf16ToFloat(t.values[i]);
    for (size_t k : {size_t{0}, size_t{2}, size_t{6}, size_t{8}})  // default, adaptive, int8,
      checkAll(setups()[k], cclzBfloat16, x, t.name);              // auto int8
  }
}

// The encoder's own row length on data where it is not the fallback: hidden sizes from the
// shortest candidate to the longest, messages at the edge of measuring (65536 values: only 512
// has its 16 rows), some candidates measured (300001), all of them (4 MiB of bf16), every dtype,
// the auto setups (E4M3 without smoothing, INT8 and adaptive with it). Frames equal byte for byte.
// (Fp8Shape.PeriodicChannelsChooseTheirPeriod checks the reference finds the periods here.)
TEST(Fp8GpuShape, ChosenRowLengthsMatchTheReference) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  for (size_t period : {512, 640, 1536, 2304, 4096})
    for (size_t count : {size_t{65536}, size_t{300001}, size_t{1} << 21}) {
      const std::vector<float> x = periodicChannels(period, count);
      // Setups 0, 8 and 9: default, auto_int8, auto_adaptive_h128.
      for (int dtype : {int(cclzBfloat16), int(cclzFloat16), int(cclzFloat32)})
        for (size_t k : {size_t{0}, size_t{8}, size_t{9}})
          checkAll(setups()[k], dtype, x, "period " + std::to_string(period));
    }
}

// An encode with rows from the data captured in a CUDA graph (the sampling kernels' programmatic
// dependent launches become graph edges) and replayed on two inputs with other periods: each
// frame equals the reference's. Scratch starts as garbage (the buffers' guard pattern); the
// replays rely on the first sampling kernel zeroing the counters every time.
TEST(Fp8GpuShape, CapturedEncodeMatchesTheReference) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  const size_t n = size_t{1} << 20;
  const std::vector<uint8_t> inputs[2] = {toDtype(periodicChannels(768, n, {5, 100}), cclzBfloat16),
                                          toDtype(periodicChannels(1536, n, {7}), cclzBfloat16)};
  for (bool smoothing : {false, true}) {
    SCOPED_TRACE(smoothing ? "INT8, rotation always, smoothing" : "E4M3, no smoothing");
    fp8::Params p;
    p.shape = fp8::kShapeAuto;
    p.rowElems = fp8::kAutoFallbackRowElems;
    if (smoothing) {
      p.grid = fp8::kInt8;
      p.policy = fp8::kRotateAlways;
      p.candidates = 1;
      p.smoothing = 1;
    }
    const uint64_t frameBytes = fp8::maxEncodedBytes(p, n);
    GuardedDeviceBuffer src(2 * n), dst(frameBytes), status(sizeof(DeviceStatus)),
        scratch(fp8::encodeScratchBytes(p, n));
    ASSERT_TRUE(src.ok() && dst.ok() && status.ok() && scratch.ok());
    cudaStream_t stream = nullptr;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    cudaGraph_t graph = nullptr;
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    fp8::encodeDevice(p, cclzBfloat16, src.data(), n, dst.data(), nullptr,
                      reinterpret_cast<DeviceStatus*>(status.data()), scratch.data(), stream);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    cudaGraphExec_t exec = nullptr;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (const auto& input : inputs) {
      std::vector<uint8_t> cpu(frameBytes);
      ASSERT_EQ(fp8::encodeRef(p, cclzBfloat16, input.data(), n, cpu.data(), cpu.size()),
                frameBytes);
      src.upload(input.data(), input.size());
      ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
      expectSameBytes(dst.download(frameBytes), cpu, "captured encode");
      EXPECT_TRUE(dst.guardsIntact() && scratch.guardsIntact());
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(stream);
  }
}

// Smoothing of rows longer than the smoothing kernel's grid covers at once (129 segments of 64
// columns for 128 blocks), with massive channels (Fp8Smooth.LongRowsWithMassiveChannelsAreSmoothed
// checks the reference smooths them), the caller's row length, rotation always.
TEST(Fp8GpuSmooth, LongRowsMatchTheReference) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  const GpuSetup setup{"smooth_row8256_always", cclzFp8E4M3, 8256, 0, cclzFp8RotateAlways, 0};
  const std::vector<float> x = periodicChannels(8256, 128 * 8256 + 1000, {5, 4100, 8200});
  for (int dtype : {int(cclzBfloat16), int(cclzFloat32)})
    checkAll(setup, dtype, x, "massive channels, rows of 8256");
}

using NamedFrames = std::vector<std::pair<std::string, std::vector<uint8_t>>>;

// Every frame of `bad` (of dtype, `count` values): the host decoder rejects it, the device
// decoder reports it (cclzCodecSynchronize) and writes nothing outside its output; so do both
// decode-and-accumulates.
void expectBothReject(cclzCodec_t codec, const NamedFrames& bad, size_t count,
                      cudaStream_t stream, int dtype = cclzBfloat16) {
  auto* cs = reinterpret_cast<cclzStream_t>(stream);
  const auto type = static_cast<cclzDataType_t>(dtype);
  const size_t esize = elementSize(dtype);
  for (const auto& [name, bytes] : bad) {
    std::vector<uint8_t> hostOut(esize * count);
    EXPECT_EQ(cclzDecodeHost(codec, bytes.data(), bytes.size(), hostOut.data(), count, type),
              cclzCorruptFrame)
        << name << " / " << dtypeLabel(dtype);
    GuardedDeviceBuffer frame(bytes.size()), out(esize * count);
    frame.upload(bytes.data(), bytes.size());
    ASSERT_EQ(cclzDecode(codec, frame.data(), bytes.size(), out.data(), count, type, cs),
              cclzSuccess);
    EXPECT_EQ(cclzCodecSynchronize(codec, nullptr), cclzCorruptFrame)
        << name << " / " << dtypeLabel(dtype);
    EXPECT_TRUE(out.guardsIntact()) << name << " / " << dtypeLabel(dtype);
    std::vector<float> hostAcc(count, 1.0f);
    EXPECT_EQ(cclzDecodeAccumulateHost(codec, bytes.data(), bytes.size(), hostAcc.data(), count,
                                       type),
              cclzCorruptFrame)
        << name << " / " << dtypeLabel(dtype) << " / accumulate";
    GuardedDeviceBuffer acc(4 * count);
    acc.upload(hostAcc.data(), 4 * count);
    ASSERT_EQ(cclzDecodeAccumulate(codec, frame.data(), bytes.size(),
                                   reinterpret_cast<float*>(acc.data()), count, type, cs),
              cclzSuccess);
    EXPECT_EQ(cclzCodecSynchronize(codec, nullptr), cclzCorruptFrame)
        << name << " / " << dtypeLabel(dtype) << " / accumulate";
    EXPECT_TRUE(acc.guardsIntact()) << name << " / " << dtypeLabel(dtype) << " / accumulate";
  }
}

// A smoothed frame whose shift is out of range, or whose header lost its smoothing area: both
// decoders reject it (the device one reports it).
TEST(Fp8GpuCorrupt, SmoothingFieldsAreChecked) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  const GpuSetup setup{"int8", cclzFp8Int8, 768, 0, cclzFp8RotateDefault, 0};
  CodecPtr codec = makeCodec(setup.config());
  const auto t = makeStressTensors(0)[0];  // massive channels: smoothed
  const size_t n = t.values.size();
  const HostFrame cpu = encodeHost(codec.get(), cclzBfloat16, toDtype(t.values, cclzBfloat16), n);
  FrameHeader h;
  std::memcpy(&h, cpu.bytes.data(), sizeof h);
  ASSERT_EQ(h.params[7], 1);
  fp8::Params p;
  ASSERT_EQ(fp8::checkFp8Header(h, &p), kFrameOk);
  const fp8::Layout l = fp8::frameLayout(n, p);
  NamedFrames bad;
  bad.emplace_back("shift 16", withByte(cpu.bytes, l.smooth + 100, 16));
  std::vector<uint8_t> b = cpu.bytes;
  FrameHeader e = h;
  e.params[6] = 0;  // applied without an area
  e.checksum = headerChecksum(e);
  std::memcpy(b.data(), &e, sizeof e);
  bad.emplace_back("no area", b);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  expectBothReject(codec.get(), bad, n, stream);
  cudaStreamDestroy(stream);
}

// Frames of the decoder's plain path (policy never, not smoothed): a bad row is reported; the
// E5M2 magnitudes the encoder never writes (0x7C..0x7E, which the hardware's fp8 conversion reads
// as Inf/NaN) and the special codes decode as the host decodes them.
TEST(Fp8GpuCorrupt, PlainFramesAreCheckedAndRareCodesDecodeAsTheHost) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  const GpuSetup setup{"e5m2", cclzFp8E5M2, 256, 0, cclzFp8RotateNever, 0};
  CodecPtr codec = makeCodec(setup.config());
  uint64_t state = 9;
  std::vector<float> x(5000);
  for (auto& v : x) v = float(normalFrom(state));
  const HostFrame cpu = encodeHost(codec.get(), cclzBfloat16, toDtype(x, cclzBfloat16), x.size());
  const fp8::Layout l = fp8::frameLayout(x.size(), 256);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto* cs = reinterpret_cast<cclzStream_t>(stream);
  auto decodeBoth = [&](const std::vector<uint8_t>& bytes, int dtype, cclzResult_t* host,
                        std::vector<uint8_t>* hostOut, cclzResult_t* device,
                        std::vector<uint8_t>* deviceOut) {
    const size_t esize = elementSize(dtype);
    const auto type = static_cast<cclzDataType_t>(dtype);
    hostOut->assign(x.size() * esize, 0);
    *host = cclzDecodeHost(codec.get(), bytes.data(), bytes.size(), hostOut->data(), x.size(), type);
    GuardedDeviceBuffer frame(bytes.size()), out(x.size() * esize);
    frame.upload(bytes.data(), bytes.size());
    ASSERT_EQ(cclzDecode(codec.get(), frame.data(), bytes.size(), out.data(), x.size(), type, cs),
              cclzSuccess);
    *device = cclzCodecSynchronize(codec.get(), nullptr);
    *deviceOut = out.download(x.size() * esize);
    EXPECT_TRUE(out.guardsIntact());
  };
  // Bad rows in bf16 frames (decodePiece) and fp32 frames (decodeTileGroups: by groups).
  for (int dtype : {int(cclzBfloat16), int(cclzFloat32)}) {
    const std::vector<uint8_t> good =
        dtype == cclzBfloat16 ? cpu.bytes
                              : encodeHost(codec.get(), dtype, toDtype(x, dtype), x.size()).bytes;
    NamedFrames bad;
    bad.emplace_back("coarse sign",
                     withByte(good, l.coarse + 4 * 3 + 3, 0x80 | good[l.coarse + 15]));
    std::vector<uint8_t> b = good;
    b[l.coarse + 4 * 5 + 2] |= 0x80;
    b[l.coarse + 4 * 5 + 3] = 0x7F;
    bad.emplace_back("coarse Inf", b);
    bad.emplace_back("flag under policy never", withByte(good, l.flags + 2, 1));
    bad.emplace_back("flag 7", withByte(good, l.flags + 19, 7));
    expectBothReject(codec.get(), bad, x.size(), stream, dtype);
  }
  // Valid frames of every dtype (a frame decodes only into its own dtype): every rare code in the
  // first tiles, then decoded by both.
  const uint8_t codes[] = {0x7C, 0x7D, 0x7E, 0xFC, 0xFD, 0xFE, 0x7F, 0xFF, 0x80, 0x00, 0x01, 0x81};
  for (int dtype : {int(cclzBfloat16), int(cclzFloat16), int(cclzFloat32)}) {
    std::vector<uint8_t> rare = encodeHost(codec.get(), dtype, toDtype(x, dtype), x.size()).bytes;
    for (size_t i = 0; i < 3 * sizeof codes; ++i) rare[l.codes + 37 * i] = codes[i % sizeof codes];
    cclzResult_t host, device;
    std::vector<uint8_t> hostOut, deviceOut;
    decodeBoth(rare, dtype, &host, &hostOut, &device, &deviceOut);
    ASSERT_EQ(host, cclzSuccess) << dtypeLabel(dtype);
    EXPECT_EQ(device, cclzSuccess) << dtypeLabel(dtype);
    expectSameBytes(deviceOut, hostOut, std::string("rare codes, ") + dtypeLabel(dtype));
    // Decode-and-accumulate takes its own path through whole tiles (decodeTileGroups).
    const auto type = static_cast<cclzDataType_t>(dtype);
    std::vector<float> hostAcc(x.size());
    for (size_t i = 0; i < x.size(); ++i) hostAcc[i] = 0.25f * float(i % 7) - 0.5f;
    GuardedDeviceBuffer frame(rare.size()), acc(4 * x.size());
    frame.upload(rare.data(), rare.size());
    acc.upload(hostAcc.data(), 4 * x.size());
    ASSERT_EQ(cclzDecodeAccumulateHost(codec.get(), rare.data(), rare.size(), hostAcc.data(),
                                       x.size(), type),
              cclzSuccess);
    ASSERT_EQ(cclzDecodeAccumulate(codec.get(), frame.data(), rare.size(),
                                   reinterpret_cast<float*>(acc.data()), x.size(), type, cs),
              cclzSuccess);
    EXPECT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess) << dtypeLabel(dtype);
    std::vector<uint8_t> hostAccBytes(4 * x.size());
    std::memcpy(hostAccBytes.data(), hostAcc.data(), hostAccBytes.size());
    expectSameBytes(acc.download(4 * x.size()), hostAccBytes,
                    std::string("rare codes, accumulate, ") + dtypeLabel(dtype));
    EXPECT_TRUE(acc.guardsIntact());
  }
  cudaStreamDestroy(stream);
}

// The device decoder reports what the host decoder rejects and writes nothing outside.
TEST(Fp8GpuCorrupt, RejectedFramesAreReported) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  const GpuSetup setup{"always", cclzFp8E4M3, 256, 0, cclzFp8RotateAlways, 0};
  CodecPtr codec = makeCodec(setup.config());
  uint64_t state = 5;
  std::vector<float> x(5000);
  for (auto& v : x) v = float(normalFrom(state));
  const HostFrame cpu = encodeHost(codec.get(), cclzBfloat16, toDtype(x, cclzBfloat16), x.size());
  const fp8::Layout l = fp8::frameLayout(x.size(), 256);
  const NamedFrames bad = {
      {"magic", withByte(cpu.bytes, 0, 0)},
      {"checksum", withByte(cpu.bytes, 60, cpu.bytes[60] ^ 1)},
      {"coarse sign",
       withByte(cpu.bytes, l.coarse + 4 * 3 + 3, 0x80 | cpu.bytes[l.coarse + 15])},
      {"flag", withByte(cpu.bytes, l.flags + 2, 7)},
      {"special code in a rotated group", withByte(cpu.bytes, l.codes + 600, fp8::kCodeNaN)},
  };
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  auto* cs = reinterpret_cast<cclzStream_t>(stream);
  expectBothReject(codec.get(), bad, x.size(), stream);
  GuardedDeviceBuffer frame(cpu.bytes.size()), out(2 * x.size());
  frame.upload(cpu.bytes.data(), cpu.bytes.size());
  ASSERT_EQ(cclzDecode(codec.get(), frame.data(), cpu.bytes.size() - 16, out.data(), x.size(),
                       cclzBfloat16, cs),
            cclzSuccess);
  EXPECT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzCorruptFrame) << "truncated";
  ASSERT_EQ(cclzDecode(codec.get(), frame.data(), cpu.bytes.size(), out.data(), x.size(),
                       cclzBfloat16, cs),
            cclzSuccess);
  EXPECT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess) << "the next valid decode";
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace cclz::test
