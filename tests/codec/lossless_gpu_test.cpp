// The lossless codec on the GPU, against the CPU reference (DESIGN.md: the kernels produce the
// reference's bytes, compared with memcmp). Built where CUDA is; registered with the ctest label
// "gpu"; every test skips when no device is visible.
//   (1) cclzEncode on device memory gives the CPU frame byte for byte (size from
//       cclzCodecSynchronize and from the device size_t);
//   (2) cclzDecode of the CPU frame is exact;
//   (3) corrupt or truncated frames are reported as cclzCorruptFrame by cclzCodecSynchronize,
//       nothing is written outside the output, the verdict equals the reference decoder's, and
//       the next valid decode succeeds;
//   (4) a source offset by one element (not 16-byte aligned) gives the same frame.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cclz/cclz.h"
#include "codec/lossless/ref.h"
#include "support/codec_handle.h"
#include "support/configs.h"
#include "support/data.h"
#include "support/device_buffer.h"
#include "support/frame_view.h"
#include "support/tensors.h"

namespace cclz::test {
namespace {

// The guarded device buffer and stream shared with the other GPU suites.
bool haveGpu() { return haveCudaDevice(); }
using DeviceBuffer = GuardedDeviceBuffer;
using StreamHolder = TestStream;

// Everything one case needs: input, the CPU frame, a codec.
struct Case {
  int dtype;
  size_t count;
  std::vector<uint8_t> input;
  std::vector<uint8_t> cpuFrame;  // exactly the frame
  size_t capacity = 0;
};

void prepare(const CodecPtr& codec, Case& c) {
  const auto type = static_cast<cclzDataType_t>(c.dtype);
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), c.count, type, &c.capacity), cclzSuccess);
  c.cpuFrame.resize(c.capacity);
  size_t bytes = 0;
  ASSERT_EQ(cclzEncodeHost(codec.get(), c.input.data(), c.count, type, c.cpuFrame.data(),
                           c.capacity, &bytes),
            cclzSuccess);
  c.cpuFrame.resize(bytes);
}

// (1) and (4): the device frame equals the CPU frame; srcOffsetElems shifts the source.
void checkEncode(const CodecPtr& codec, const Case& c, size_t srcOffsetElems, cclzStream_t stream) {
  SCOPED_TRACE("source offset " + std::to_string(srcOffsetElems) + " elements");
  const size_t esize = elementSize(c.dtype);
  const auto type = static_cast<cclzDataType_t>(c.dtype);
  DeviceBuffer src(std::max<size_t>(16, (c.count + srcOffsetElems) * esize));
  DeviceBuffer dst(c.capacity);
  DeviceBuffer size(sizeof(size_t));
  ASSERT_TRUE(src.ok() && dst.ok() && size.ok());
  ASSERT_NO_FATAL_FAILURE(src.upload(c.input.data(), c.input.size(), srcOffsetElems * esize));
  ASSERT_EQ(cclzEncode(codec.get(), src.data() + srcOffsetElems * esize, c.count, type, dst.data(),
                       c.capacity, reinterpret_cast<size_t*>(size.data()), stream),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  size_t last = 0;
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), &last), cclzSuccess) << cclzGetLastError(nullptr);
  EXPECT_EQ(last, c.cpuFrame.size());
  size_t deviceSize = 0;
  std::memcpy(&deviceSize, size.download(sizeof(size_t)).data(), sizeof(size_t));
  EXPECT_EQ(deviceSize, c.cpuFrame.size());
  const std::vector<uint8_t> frame = dst.download(c.cpuFrame.size());
  const size_t at = firstMismatch(frame.data(), c.cpuFrame.data(), c.cpuFrame.size());
  EXPECT_EQ(at, SIZE_MAX) << "GPU frame differs from the CPU frame at byte " << at << " of "
                          << c.cpuFrame.size();
  EXPECT_TRUE(dst.guardsIntact()) << "encode wrote outside the destination";
  EXPECT_TRUE(src.guardsIntact());
}

// Waits for the handle's last encode and checks that it wrote c's CPU frame into dst: the size
// it reports and every byte. `what` names the call in a failure.
void expectLastEncodeIs(const CodecPtr& codec, DeviceBuffer& dst, const Case& c,
                        const std::string& what) {
  size_t bytes = 0;
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), &bytes), cclzSuccess) << cclzGetLastError(nullptr);
  ASSERT_EQ(bytes, c.cpuFrame.size()) << what;
  const std::vector<uint8_t> frame = dst.download(c.cpuFrame.size());
  ASSERT_EQ(firstMismatch(frame.data(), c.cpuFrame.data(), c.cpuFrame.size()), SIZE_MAX) << what;
}

// Decodes `frame` (srcBytes of it) on the device; returns the synchronize result and fills
// *out with the output bytes. Checks the output's guards.
cclzResult_t deviceDecode(const CodecPtr& codec, const std::vector<uint8_t>& frame, size_t srcBytes,
                          const Case& c, cclzStream_t stream, std::vector<uint8_t>* out,
                          uint8_t fillByte = 0x5A) {
  const size_t esize = elementSize(c.dtype);
  DeviceBuffer src(std::max<size_t>(16, frame.size()));
  DeviceBuffer dst(std::max<size_t>(16, c.count * esize));
  EXPECT_TRUE(src.ok() && dst.ok());
  if (!src.ok() || !dst.ok()) return cclzSystemError;
  src.upload(frame.data(), frame.size());
  dst.fill(fillByte);
  const cclzResult_t queued = cclzDecode(codec.get(), src.data(), srcBytes, dst.data(), c.count,
                                         static_cast<cclzDataType_t>(c.dtype), stream);
  EXPECT_EQ(queued, cclzSuccess) << cclzGetLastError(nullptr);
  const cclzResult_t r = cclzCodecSynchronize(codec.get(), nullptr);
  if (r != cclzSuccess) {
    EXPECT_STRNE(cclzGetLastError(nullptr), "");
  }
  if (out) *out = dst.download(c.count * esize);
  EXPECT_TRUE(dst.guardsIntact()) << "decode wrote outside the output";
  return r;
}

// A possibly corrupt frame, decoded on the device and by decodeRef: the same verdict, and the
// same output where both accept it. Returns the reference's verdict.
uint32_t expectDeviceAgreesWithReference(const CodecPtr& codec, const std::vector<uint8_t>& frame,
                                         const Case& c, cclzStream_t stream, int trial) {
  std::vector<uint8_t> cpuOut(c.input.size()), out;
  const uint32_t cpu =
      lossless::decodeRef(frame.data(), frame.size(), c.dtype, c.count, cpuOut.data());
  const cclzResult_t gpu = deviceDecode(codec, frame, frame.size(), c, stream, &out);
  EXPECT_EQ(gpu, cpu == kFrameOk ? cclzSuccess : cclzCorruptFrame)
      << "trial " << trial << ": the reference says " << frameErrorText(cpu);
  if (gpu == cclzSuccess && cpu == kFrameOk) {
    EXPECT_EQ(firstMismatch(out.data(), cpuOut.data(), out.size()), SIZE_MAX) << "trial " << trial;
  }
  return cpu;
}

using GpuParam = std::tuple<int, size_t, CodecSetup, DataKind>;

std::string gpuName(const testing::TestParamInfo<GpuParam>& info) {
  const auto& [dtype, count, setup, kind] = info.param;
  return std::string(dtypeLabel(dtype)) + "_n" + std::to_string(count) + "_" + setup.name + "_" +
         dataKindLabel(kind);
}

class LosslessGpu : public testing::TestWithParam<GpuParam> {
 protected:
  void SetUp() override {
    if (!haveGpu()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(LosslessGpu, MatchesReference) {
  const auto& [dtype, count, setup, kind] = GetParam();
  const lossless::Params p = setup.params();
  Case c{dtype,
         count,
         makeData(kind, dtype, count, p.chunkElems,
                  mixSeed(static_cast<uint64_t>(kind), dtype, count, 7)),
         {},
         0};
  CodecPtr codec = makeCodec(setup.apiConfig());
  ASSERT_TRUE(codec);
  ASSERT_NO_FATAL_FAILURE(prepare(codec, c));
  StreamHolder stream;
  ASSERT_NE(stream.s, nullptr);

  // (1) encode, (4) from a source one element past an aligned address.
  ASSERT_NO_FATAL_FAILURE(checkEncode(codec, c, 0, stream.get()));
  if (count > 0) {
    ASSERT_NO_FATAL_FAILURE(checkEncode(codec, c, 1, stream.get()));
  }

  // (2) decode the CPU frame, from exactly its bytes and from a larger buffer.
  std::vector<uint8_t> out;
  ASSERT_EQ(deviceDecode(codec, c.cpuFrame, c.cpuFrame.size(), c, stream.get(), &out), cclzSuccess)
      << cclzGetLastError(nullptr);
  EXPECT_EQ(firstMismatch(out.data(), c.input.data(), c.input.size()), SIZE_MAX);
  std::vector<uint8_t> padded(c.cpuFrame);
  padded.resize(c.capacity, 0xEE);
  ASSERT_EQ(deviceDecode(codec, padded, padded.size(), c, stream.get(), &out), cclzSuccess);
  EXPECT_EQ(firstMismatch(out.data(), c.input.data(), c.input.size()), SIZE_MAX);

  // (3) corrupt frames: reported at synchronize, outputs guarded, error cleared afterwards.
  const size_t bytes = c.cpuFrame.size();
  EXPECT_EQ(deviceDecode(codec, c.cpuFrame, bytes - 1, c, stream.get(), &out), cclzCorruptFrame)
      << "truncated by one byte";
  EXPECT_EQ(deviceDecode(codec, c.cpuFrame, kHeaderBytes - 1, c, stream.get(), &out),
            cclzCorruptFrame)
      << "shorter than a header";
  std::vector<uint8_t> bad(c.cpuFrame);
  bad[kOffCount] ^= 0x01;  // header: the checksum no longer matches; nothing may be written
  EXPECT_EQ(deviceDecode(codec, bad, bytes, c, stream.get(), &out, 0x77), cclzCorruptFrame);
  EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0x77; }))
      << "a frame with a bad header wrote to the output";
  ASSERT_EQ(deviceDecode(codec, c.cpuFrame, bytes, c, stream.get(), &out), cclzSuccess)
      << "the error was not cleared: " << cclzGetLastError(nullptr);
  EXPECT_EQ(firstMismatch(out.data(), c.input.data(), c.input.size()), SIZE_MAX);

  if (count == 0 || count > 2000000) return;
  // Random corruption of the table and blocks: the device's verdict is the reference's.
  const FrameView v = viewFrame(c.cpuFrame.data());
  std::mt19937_64 rng(mixSeed(dtype, count, static_cast<uint64_t>(kind)));
  for (int trial = 0; trial < 6; ++trial) {
    bad = c.cpuFrame;
    const size_t from = trial % 2 ? kHeaderBytes : v.blocksOffset;
    for (int e = 0; e < 1 + trial; ++e) bad[from + rng() % (bytes - from)] ^= 1 + rng() % 255;
    expectDeviceAgreesWithReference(codec, bad, c, stream.get(), trial);
  }
  ASSERT_EQ(deviceDecode(codec, c.cpuFrame, bytes, c, stream.get(), &out), cclzSuccess);
}

std::vector<GpuParam> gpuParams() {
  std::vector<GpuParam> params;
  const std::vector<CodecSetup>& setups = losslessSetups();
  for (int dtype : losslessDtypes())
    for (size_t count : testSizes())
      for (const CodecSetup& setup : setups)
        for (DataKind kind : allDataKinds()) params.emplace_back(dtype, count, setup, kind);
  // 16M elements: many chunks in flight (the encoder's look-back), Gaussian and random bits.
  for (int dtype : losslessDtypes())
    for (const CodecSetup& setup : setups)
      for (DataKind kind : {DataKind::kGauss1, DataKind::kRandomBits})
        params.emplace_back(dtype, size_t{16} << 20, setup, kind);
  return params;
}

INSTANTIATE_TEST_SUITE_P(All, LosslessGpu, testing::ValuesIn(gpuParams()), gpuName);

// The device decoder needs the configuration the frame was encoded with (cclz.h).
TEST(LosslessGpuMismatch, OtherConfigurationIsCorrupt) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA device";
  CodecPtr encoder = makeCodec(smallChunkSetup().apiConfig());  // 1024-element chunks
  CodecPtr decoder = makeCodec(defaultSetup().apiConfig());
  ASSERT_TRUE(encoder && decoder);
  Case c{cclzBfloat16, 10000, makeData(DataKind::kGauss1, cclzBfloat16, 10000, 1024, 3), {}, 0};
  ASSERT_NO_FATAL_FAILURE(prepare(encoder, c));
  StreamHolder stream;
  std::vector<uint8_t> out;
  EXPECT_EQ(deviceDecode(decoder, c.cpuFrame, c.cpuFrame.size(), c, stream.get(), &out),
            cclzCorruptFrame);
  Case wrongCount = c;
  wrongCount.count = 9999;
  EXPECT_EQ(deviceDecode(encoder, c.cpuFrame, c.cpuFrame.size(), wrongCount, stream.get(), &out),
            cclzCorruptFrame);
  Case wrongType = c;
  wrongType.dtype = cclzFloat16;
  EXPECT_EQ(deviceDecode(encoder, c.cpuFrame, c.cpuFrame.size(), wrongType, stream.get(), &out),
            cclzCorruptFrame);
  ASSERT_EQ(deviceDecode(encoder, c.cpuFrame, c.cpuFrame.size(), c, stream.get(), &out),
            cclzSuccess);
  EXPECT_EQ(firstMismatch(out.data(), c.input.data(), c.input.size()), SIZE_MAX);
}

// A frame whose version byte is not the lossless format's (2) is another format: the device
// decoder reports it as corrupt, writes nothing, and decodes the next valid frame.
TEST(LosslessGpuMismatch, OtherVersionIsCorrupt) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA device";
  CodecPtr codec = makeCodec(defaultSetup().apiConfig());
  ASSERT_TRUE(codec);
  StreamHolder stream;
  Case c{cclzBfloat16, 10000, makeData(DataKind::kGauss1, cclzBfloat16, 10000, 4096, 5), {}, 0};
  ASSERT_NO_FATAL_FAILURE(prepare(codec, c));
  std::vector<uint8_t> out;
  for (int version : {0, 1, 3, 255}) {
    SCOPED_TRACE("version " + std::to_string(version));
    std::vector<uint8_t> bad(c.cpuFrame);
    bad[kOffVersion] = static_cast<uint8_t>(version);
    fixChecksum(bad.data());
    EXPECT_EQ(deviceDecode(codec, bad, bad.size(), c, stream.get(), &out, 0x77), cclzCorruptFrame);
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0x77; }))
        << "a frame of another version wrote to the output";
  }
  ASSERT_EQ(deviceDecode(codec, c.cpuFrame, c.cpuFrame.size(), c, stream.get(), &out), cclzSuccess);
  EXPECT_EQ(firstMismatch(out.data(), c.input.data(), c.input.size()), SIZE_MAX);
}

// The encoder's paths (encode_kernel.cu): whole 4096-element chunks from an
// aligned source take a branch-free path, and within it chunks without escapes code two symbols
// per step; chunks with escapes, short last chunks, 1024-element chunks and unaligned sources
// take the general path. Gaussian data with a zero every 61 elements gives coded chunks with
// escapes (a zero's symbol is far below the chunk's top); without the zeros, coded chunks
// without. The test checks that the CPU frames hold each kind of block it means to exercise.
TEST(LosslessGpuPaths, EveryEncoderPathMatchesReference) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA device";
  StreamHolder stream;
  for (const CodecSetup& setup : {defaultSetup(), smallChunkSetup()}) {
    CodecPtr codec = makeCodec(setup.apiConfig());
    ASSERT_TRUE(codec);
    for (int dtype : losslessDtypes())
      for (bool zeros : {false, true})
        for (size_t count : {size_t{4096} * 8, size_t{4096} * 8 + 1000, size_t{4096} * 8 + 8}) {
          SCOPED_TRACE(std::string(setup.name) + " " + dtypeLabel(dtype) + " n " +
                       std::to_string(count) + (zeros ? " with zeros" : ""));
          Case c{dtype,
                 count,
                 makeData(DataKind::kGauss1, dtype, count, setup.params().chunkElems,
                          mixSeed(dtype, count, zeros ? 61 : 0)),
                 {},
                 0};
          const size_t esize = elementSize(dtype);
          if (zeros)
            for (size_t i = 0; i < count; i += 61) std::memset(&c.input[i * esize], 0, esize);
          ASSERT_NO_FATAL_FAILURE(prepare(codec, c));
          const FrameView v = viewFrame(c.cpuFrame.data());
          ASSERT_EQ(v.version, 2);
          int coded = 0, codedWithEscapes = 0;
          for (uint32_t k = 0; k < v.numChunks; ++k) {
            const BlockView b = viewBlock(c.cpuFrame.data(), v, k);
            if (b.mode != 1) continue;
            ++coded;
            codedWithEscapes += (c.cpuFrame[b.offset + 1] & 0x80) != 0;
          }
          EXPECT_GE(coded, static_cast<int>(v.numChunks) - 1) << "expected coded chunks";
          if (zeros) {
            EXPECT_EQ(codedWithEscapes, coded) << "expected escapes in every coded chunk";
          }
          ASSERT_NO_FATAL_FAILURE(checkEncode(codec, c, 0, stream.get()));
          ASSERT_NO_FATAL_FAILURE(checkEncode(codec, c, 1, stream.get()));
          std::vector<uint8_t> out;
          ASSERT_EQ(deviceDecode(codec, c.cpuFrame, c.cpuFrame.size(), c, stream.get(), &out),
                    cclzSuccess);
          EXPECT_EQ(firstMismatch(out.data(), c.input.data(), c.input.size()), SIZE_MAX);
        }
  }
}

// One handle, many encodes (DeviceWorkspace::scratchEpoch): the encoder leaves its chunk
// states in the handle's scratch, marked with the call's epoch, and no memset runs between calls.
// Two messages alternate, 40 chunks and 4, so that a short message's look-back passes states a
// long one left (another epoch: they must read as unpublished), and the handle's workspace grows
// after the first call (zeroed again). The epochs come round to 1 after 16383 calls, where the
// scratch is zeroed; frames are checked against the CPU's at the first calls, now and then, and
// around that wrap.
TEST(LosslessGpuScratch, ManyEncodesOnOneHandleMatchReference) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA device";
  StreamHolder stream;
  CodecPtr codec = makeCodec(defaultSetup().apiConfig());
  ASSERT_TRUE(codec);
  const int dtype = cclzBfloat16;
  std::vector<Case> cases;
  for (size_t count : {size_t{4096} * 3 + 100, size_t{4096} * 40}) {
    cases.push_back(Case{dtype,
                         count,
                         makeData(DataKind::kGauss1, dtype, count, 4096, mixSeed(dtype, count, 5)),
                         {},
                         0});
    ASSERT_NO_FATAL_FAILURE(prepare(codec, cases.back()));
  }
  const size_t esize = elementSize(dtype);
  std::vector<std::unique_ptr<DeviceBuffer>> src, dst;
  for (const Case& c : cases) {
    src.push_back(std::make_unique<DeviceBuffer>(c.count * esize));
    dst.push_back(std::make_unique<DeviceBuffer>(c.capacity));
    ASSERT_TRUE(src.back()->ok() && dst.back()->ok());
    ASSERT_NO_FATAL_FAILURE(src.back()->upload(c.input.data(), c.input.size()));
  }
  constexpr int kCalls = 16400;  // past one round of the 16383 epochs
  for (int i = 0; i < kCalls; ++i) {
    const int which = i % 3 == 1 ? 1 : 0;  // the long message after the first short one
    const Case& c = cases[which];
    ASSERT_EQ(
        cclzEncode(codec.get(), src[which]->data(), c.count, static_cast<cclzDataType_t>(dtype),
                   dst[which]->data(), c.capacity, nullptr, stream.get()),
        cclzSuccess)
        << cclzGetLastError(nullptr);
    const bool check = i < 8 || i % 997 == 0 || (i >= 16378 && i <= 16392);
    if (check) {
      ASSERT_NO_FATAL_FAILURE(
          expectLastEncodeIs(codec, *dst[which], c, "call " + std::to_string(i)));
    }
  }
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess);
}

// Many chunks encoded at once: at 1-8 MiB every chunk of the message runs at the same time, and
// publishes its size at nearly the same time, so most chunks find no end offset in their first
// look-back round and take the second level (sums of 32 chunks, encode_kernel.cu's lookBack).
// Chunks of three kinds in turn (Gaussian, random bits: stored, two symbols: a few bytes) give
// blocks of different sizes, so a sum off by one chunk moves every later block. Every call's frame
// is checked against the CPU's.
TEST(LosslessGpuScratch, ManyChunksAtOnceMatchReference) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA device";
  StreamHolder stream;
  CodecPtr codec = makeCodec(defaultSetup().apiConfig());
  ASSERT_TRUE(codec);
  const int dtype = cclzBfloat16;
  const size_t esize = elementSize(dtype);
  for (size_t chunks : {size_t{513}, size_t{2000}}) {
    SCOPED_TRACE(chunks);
    const size_t count = 4096 * chunks;
    const DataKind kinds[3] = {DataKind::kGauss1, DataKind::kRandomBits,
                               DataKind::kTwoSymbolsPerChunk};
    std::vector<std::vector<uint8_t>> parts;
    for (DataKind kind : kinds)
      parts.push_back(makeData(kind, dtype, count, 4096, mixSeed(dtype, count, chunks)));
    Case c{dtype, count, std::vector<uint8_t>(count * esize), {}, 0};
    for (size_t k = 0; k < chunks; ++k)
      std::memcpy(&c.input[k * 4096 * esize], &parts[k % 3][k * 4096 * esize], 4096 * esize);
    ASSERT_NO_FATAL_FAILURE(prepare(codec, c));
    DeviceBuffer src(count * esize), dst(c.capacity);
    ASSERT_TRUE(src.ok() && dst.ok());
    ASSERT_NO_FATAL_FAILURE(src.upload(c.input.data(), c.input.size()));
    for (int i = 0; i < 40; ++i) {
      ASSERT_EQ(cclzEncode(codec.get(), src.data(), count, static_cast<cclzDataType_t>(dtype),
                           dst.data(), c.capacity, nullptr, stream.get()),
                cclzSuccess)
          << cclzGetLastError(nullptr);
      ASSERT_NO_FATAL_FAILURE(expectLastEncodeIs(codec, dst, c, "call " + std::to_string(i)));
    }
  }
}

// An encode captured in a CUDA graph (as a training step's graph holds one) runs with its
// capture's arguments on every replay, so its scratch carries no call number: it takes the memset
// (epoch 0) inside the graph. Replays on changing data (Gaussian, random bits: other block sizes),
// two in a row, then a direct call on the same handle, which must find the counters the replays
// left zero (an epoch-0 call that leaves them as they are fails here) and their
// states as another epoch's: every frame equals the CPU's. NOTE: only the general kernels use the
// counters. These messages are small, so the default registration runs the split staged encoder,
// which keeps none; the `general.` registration runs the counters' case.
// NOTE: what the epoch-0 rule prevents, a replay reading the previous replay's chunk states as
// its own, would be a race that the frames here rarely show (a chunk would have to look back
// before its predecessor publishes): with the rule turned off this test still passed.
TEST(LosslessGpuScratch, CapturedEncodesBesideDirectCallsMatchReference) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA device";
  StreamHolder stream;
  CodecPtr codec = makeCodec(defaultSetup().apiConfig());
  ASSERT_TRUE(codec);
  const int dtype = cclzBfloat16;
  const auto type = static_cast<cclzDataType_t>(dtype);
  const size_t count = size_t{4096} * 24 + 5;
  std::vector<Case> cases;
  for (DataKind kind : {DataKind::kGauss1, DataKind::kRandomBits, DataKind::kGauss1}) {
    cases.push_back(Case{
        dtype, count, makeData(kind, dtype, count, 4096, mixSeed(dtype, cases.size(), 7)), {}, 0});
    ASSERT_NO_FATAL_FAILURE(prepare(codec, cases.back()));
  }
  const size_t capacity = cases[0].capacity, esize = elementSize(dtype);
  DeviceBuffer src(count * esize), dst(capacity), directSrc(count * esize), directDst(capacity);
  ASSERT_TRUE(src.ok() && dst.ok() && directSrc.ok() && directDst.ok());
  // A direct call first: the handle's workspace exists before the capture.
  ASSERT_NO_FATAL_FAILURE(directSrc.upload(cases[0].input.data(), cases[0].input.size()));
  ASSERT_EQ(cclzEncode(codec.get(), directSrc.data(), count, type, directDst.data(), capacity,
                       nullptr, stream.get()),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess) << cclzGetLastError(nullptr);
  cudaStream_t raw = stream.s;
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(raw, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const cclzResult_t captured =
      cclzEncode(codec.get(), src.data(), count, type, dst.data(), capacity, nullptr, stream.get());
  ASSERT_EQ(cudaStreamEndCapture(raw, &graph), cudaSuccess);
  ASSERT_EQ(captured, cclzSuccess) << cclzGetLastError(nullptr);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int i = 0; i < 6; ++i) {
    const Case& replayed = cases[i % 3];
    ASSERT_NO_FATAL_FAILURE(src.upload(replayed.input.data(), replayed.input.size()));
    ASSERT_EQ(cudaGraphLaunch(exec, raw), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(raw), cudaSuccess);
    EXPECT_EQ(firstMismatch(dst.download(replayed.cpuFrame.size()).data(), replayed.cpuFrame.data(),
                            replayed.cpuFrame.size()),
              SIZE_MAX)
        << "replay " << i;
    if (i % 2 == 0) continue;  // the next replay right after this one
    const Case& direct = cases[(i + 1) % 3];
    ASSERT_NO_FATAL_FAILURE(directSrc.upload(direct.input.data(), direct.input.size()));
    ASSERT_EQ(cclzEncode(codec.get(), directSrc.data(), count, type, directDst.data(), capacity,
                         nullptr, stream.get()),
              cclzSuccess)
        << cclzGetLastError(nullptr);
    ASSERT_NO_FATAL_FAILURE(expectLastEncodeIs(codec, directDst, direct,
                                               "direct call after replay " + std::to_string(i)));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

// The decoder on whole coded chunks (4096 elements), with and without escapes:
// each of its end-of-lane checks is exercised against the reference's verdict (bits flipped in
// the lane streams and in the size deltas, the escape flag toggled, the top symbol moved by one).
// "Low top" data (symbols shifted down below the family's D) makes `offset <= top` the binding
// check; "low top with escapes" (symbols shifted down below 128, and zeros) gives escapes under a
// top below 128, where the staged decoder's pair-window loop (decode_window.cuh) subtracts an
// escape's offset byte (0x80) from a smaller top and relies on the borrow stopping short of the
// neighbouring symbol. Both kernel families decode every whole chunk here with the pair-window
// loop, except the general kernel for fp32 (the lane loop): the default registration runs the
// staged kernels (the messages are small), the `general.` registration
// (tests/codec/CMakeLists.txt) the general ones.
TEST(LosslessGpuDecode, WholeChunkChecksMatchReference) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA device";
  StreamHolder stream;
  CodecPtr codec = makeCodec(defaultSetup().apiConfig());
  ASSERT_TRUE(codec);
  enum class Kind { kPlain, kEscapes, kLowTop, kLowTopEscapes };
  for (int dtype : losslessDtypes())
    for (Kind kind : {Kind::kPlain, Kind::kEscapes, Kind::kLowTop, Kind::kLowTopEscapes})
      for (size_t count : {size_t{4096} * 8, size_t{4096} * 8 + 1000}) {
        SCOPED_TRACE(std::string(dtypeLabel(dtype)) + " kind " +
                     std::to_string(static_cast<int>(kind)) + " n " + std::to_string(count));
        Case c{dtype,
               count,
               makeData(DataKind::kGauss1, dtype, count, 4096, mixSeed(dtype, count, 99)),
               {},
               0};
        const size_t esize = elementSize(dtype);
        for (size_t i = 0; i < count; ++i) {
          uint8_t* e = &c.input[i * esize];
          if (kind == Kind::kLowTop || kind == Kind::kLowTopEscapes) {
            // The symbol field: bits 30..23 of fp32, bits 14..7 of bf16 and fp16.
            uint32_t bits = 0;
            std::memcpy(&bits, e, esize);
            const int shift = dtype == cclzFloat32 ? 23 : 7;
            const uint32_t down = kind == Kind::kLowTopEscapes ? 40
                                  : dtype == cclzFloat16       ? 100
                                                               : 110;
            const uint32_t sym = (bits >> shift) & 0xFFu;
            bits = (bits & ~(0xFFu << shift)) | ((sym > down ? sym - down : 0) << shift);
            std::memcpy(e, &bits, esize);
          }
          if ((kind == Kind::kEscapes || kind == Kind::kLowTopEscapes) && i % 61 == 0)
            std::memset(e, 0, esize);
        }
        ASSERT_NO_FATAL_FAILURE(prepare(codec, c));
        const FrameView v = viewFrame(c.cpuFrame.data());
        // Every whole chunk is coded; with zeros, with escapes; low top, without. (Gaussian fp16
        // has escapes in every chunk, Gaussian bf16 and fp32 in none: low top covers fp16.)
        std::vector<uint32_t> coded;
        for (uint32_t k = 0; (k + 1) * 4096 <= count; ++k) {
          const BlockView b = viewBlock(c.cpuFrame.data(), v, k);
          ASSERT_EQ(b.mode, 1) << "chunk " << k;
          const bool escaped = c.cpuFrame[b.offset + 1] & 0x80;
          if (kind == Kind::kEscapes || kind == Kind::kLowTopEscapes) {
            EXPECT_TRUE(escaped) << "chunk " << k;
          }
          if (kind == Kind::kLowTop) {
            EXPECT_FALSE(escaped) << "chunk " << k;
          }
          coded.push_back(k);
        }
        const uint8_t top = c.cpuFrame[viewBlock(c.cpuFrame.data(), v, coded[0]).offset + 2];
        if (kind == Kind::kLowTop) {
          EXPECT_LT(top, dtype == cclzFloat16 ? 63 : 31) << "expected a top below D - 1";
        }
        if (kind == Kind::kLowTopEscapes) {
          EXPECT_LT(top, 128) << "expected a top below 128";
        }
        std::vector<uint8_t> out;
        ASSERT_EQ(deviceDecode(codec, c.cpuFrame, c.cpuFrame.size(), c, stream.get(), &out),
                  cclzSuccess);
        EXPECT_EQ(firstMismatch(out.data(), c.input.data(), c.input.size()), SIZE_MAX);

        std::mt19937_64 rng(mixSeed(dtype, count, 17 + static_cast<uint64_t>(kind)));
        int rejected = 0;
        for (int trial = 0; trial < 32; ++trial) {
          std::vector<uint8_t> bad(c.cpuFrame);
          const BlockView b = viewBlock(bad.data(), v, coded[rng() % coded.size()]);
          uint8_t* block = &bad[b.offset];
          const uint32_t width = block[3], streams = 8 + 4 * width;
          switch (trial % 4) {
            case 0:  // a bit of a lane stream
            case 1: {
              const uint64_t bit = 8 * streams + rng() % (8 * (b.bytes - streams));
              block[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
              break;
            }
            case 2:  // the escape flag, or a bit of the size deltas
              if (width == 0 || rng() % 2)
                block[1] ^= 0x80;
              else
                block[8 + rng() % (4 * width)] ^= static_cast<uint8_t>(1u << (rng() % 8));
              break;
            default:  // the top symbol, one up or one down
              block[2] = static_cast<uint8_t>(block[2] + (rng() % 2 ? 1 : 255));
          }
          rejected +=
              expectDeviceAgreesWithReference(codec, bad, c, stream.get(), trial) != kFrameOk;
        }
        EXPECT_GT(rejected, 4) << "the corruptions should mostly be caught";
        ASSERT_EQ(deviceDecode(codec, c.cpuFrame, c.cpuFrame.size(), c, stream.get(), &out),
                  cclzSuccess);
      }
}

// The real tensors, through both directions, default and smallest chunking.
TEST(LosslessGpuRealTensors, MatchReference) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = realTensorDir();
  if (dir.empty()) GTEST_SKIP() << "no real tensors: set CCLZ_SHARED_DATA";
  const std::vector<RealTensor> tensors = loadRealTensors(dir);
  ASSERT_FALSE(tensors.empty());
  StreamHolder stream;
  for (const CodecSetup& setup : {defaultSetup(), smallChunkSetup()}) {
    CodecPtr codec = makeCodec(setup.apiConfig());
    ASSERT_TRUE(codec);
    for (const RealTensor& t : tensors) {
      SCOPED_TRACE(t.name + " " + setup.name);
      Case c{cclzBfloat16, t.values.size(), {}, {}, 0};
      c.input.resize(2 * t.values.size());
      std::memcpy(c.input.data(), t.values.data(), c.input.size());
      ASSERT_NO_FATAL_FAILURE(prepare(codec, c));
      ASSERT_NO_FATAL_FAILURE(checkEncode(codec, c, 0, stream.get()));
      std::vector<uint8_t> out;
      ASSERT_EQ(deviceDecode(codec, c.cpuFrame, c.cpuFrame.size(), c, stream.get(), &out),
                cclzSuccess);
      EXPECT_EQ(firstMismatch(out.data(), c.input.data(), c.input.size()), SIZE_MAX);
    }
  }
}

// The none codec on the device: the same frame as the host, every dtype.
TEST(NoneGpu, MatchesHost) {
  if (!haveGpu()) GTEST_SKIP() << "no CUDA device";
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = cclzCodecNone;
  CodecPtr codec = makeCodec(config);
  ASSERT_TRUE(codec);
  StreamHolder stream;
  for (int dtype : {cclzInt8, cclzInt32, cclzInt64, cclzFloat16, cclzFloat32, cclzBfloat16}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{4097}, size_t{1000001}}) {
      SCOPED_TRACE(std::string(dtypeLabel(dtype)) + " n=" + std::to_string(count));
      Case c{dtype,
             count,
             makeData(DataKind::kRandomBits, dtype, count, 0, mixSeed(dtype, count)),
             {},
             0};
      ASSERT_NO_FATAL_FAILURE(prepare(codec, c));
      ASSERT_NO_FATAL_FAILURE(checkEncode(codec, c, 0, stream.get()));
      std::vector<uint8_t> out;
      ASSERT_EQ(deviceDecode(codec, c.cpuFrame, c.cpuFrame.size(), c, stream.get(), &out),
                cclzSuccess);
      EXPECT_EQ(firstMismatch(out.data(), c.input.data(), c.input.size()), SIZE_MAX);
      EXPECT_EQ(deviceDecode(codec, c.cpuFrame, c.cpuFrame.size() - 1, c, stream.get(), &out, 0x77),
                cclzCorruptFrame);
      EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0x77; }));
    }
  }
}

}  // namespace
}  // namespace cclz::test
