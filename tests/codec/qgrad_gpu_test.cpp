// The qgrad codec on the GPU, against the CPU reference (DESIGN.md: the kernels produce the
// reference's bytes, compared with memcmp). Built where CUDA is; registered with the ctest label
// "gpu"; every test skips when no device is visible.
//   (1) cclzEncode gives the CPU frame byte for byte, from an aligned source and from one offset by
//       one element (the scalar-load path), its size from cclzCodecSynchronize and the device size_t;
//   (2) cclzEncodeFeedback, three steps from device state, gives the frames and the residuals of
//       cclzEncodeFeedbackHost from host state, byte for byte, with fp32 and bf16 residuals, and
//       advances the step;
//   (3) cclzDecode and cclzDecodeAccumulate of the CPU frame give the CPU decode and the CPU
//       accumulation byte for byte;
//   (4) truncated, corrupt or mismatched frames are reported by cclzCodecSynchronize and write
//       nothing; a NaN/Inf gradient gives the CPU's frame and residual and is reported too.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "cclz/cclz.h"
#include "codec/codec.h"
#include "codec/device.h"
#include "collective/reduce.h"
#include "support/codec_handle.h"
#include "support/data.h"
#include "support/device_buffer.h"
#include "support/frame_view.h"
#include "support/qgrad_setup.h"
#include "support/reduce_steps.h"

namespace cclz::test {
namespace {

size_t esize(int dtype) { return dtype == cclzFloat32 ? 4 : 2; }

// Gaussian gradients with a block-to-block spread of scales (0.001 to 10).
std::vector<uint8_t> gradient(int dtype, size_t count, uint64_t seed) {
  std::vector<uint8_t> f32 = makeData(DataKind::kGauss1, cclzFloat32, count, 0, seed);
  std::vector<float> f(count);
  if (count) std::memcpy(f.data(), f32.data(), 4 * count);
  for (size_t i = 0; i < count; ++i)
    f[i] *= std::pow(10.0f, static_cast<float>((i / 97 + seed) % 5) - 3.0f);
  std::vector<uint8_t> out(count * esize(dtype));
  if (dtype == cclzFloat32) {
    if (count) std::memcpy(out.data(), f.data(), out.size());
  } else {
    for (size_t i = 0; i < count; ++i) {
      const uint16_t h = floatToBf16(f[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

std::vector<uint8_t> hostFrame(const CodecPtr& codec, int dtype, const std::vector<uint8_t>& in,
                               size_t count) {
  return encodeHost(codec.get(), dtype, in, count).bytes;
}

void expectSame(const std::vector<uint8_t>& gpu, const std::vector<uint8_t>& cpu,
                const char* what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  const size_t at = firstMismatch(gpu.data(), cpu.data(), cpu.size());
  EXPECT_EQ(at, SIZE_MAX) << what << " differs from the CPU's at byte " << at << " of "
                          << cpu.size();
}

using GpuParam = std::tuple<int, size_t, int, int, cclzRounding_t>;

class QgradGpu : public testing::TestWithParam<GpuParam> {
 protected:
  void SetUp() override {
    if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  }
};

// (1) plain encode, from src + srcOffsetElems elements.
void checkEncode(const CodecPtr& codec, int dtype, const std::vector<uint8_t>& input,
                 size_t count, const std::vector<uint8_t>& cpu, size_t srcOffsetElems,
                 cclzStream_t stream) {
  SCOPED_TRACE("source offset " + std::to_string(srcOffsetElems) + " elements");
  const auto type = static_cast<cclzDataType_t>(dtype);
  GuardedDeviceBuffer src(std::max<size_t>(16, (count + srcOffsetElems) * esize(dtype)));
  GuardedDeviceBuffer dst(cpu.size()), size(sizeof(size_t));
  ASSERT_TRUE(src.ok() && dst.ok() && size.ok());
  ASSERT_NO_FATAL_FAILURE(src.upload(input.data(), input.size(), srcOffsetElems * esize(dtype)));
  dst.fill(0xEE);  // the kernel must write every byte of the frame, gaps and padding included
  ASSERT_EQ(cclzEncode(codec.get(), src.data() + srcOffsetElems * esize(dtype), count, type,
                       dst.data(), cpu.size(), reinterpret_cast<size_t*>(size.data()), stream),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  size_t last = 0;
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), &last), cclzSuccess) << cclzGetLastError(nullptr);
  EXPECT_EQ(last, cpu.size());
  size_t deviceSize = 0;
  std::memcpy(&deviceSize, size.download(sizeof(size_t)).data(), sizeof(size_t));
  EXPECT_EQ(deviceSize, cpu.size());
  expectSame(dst.download(cpu.size()), cpu, "the GPU frame");
  EXPECT_TRUE(dst.guardsIntact()) << "encode wrote outside the frame";
}

TEST_P(QgradGpu, MatchesReference) {
  const auto& [dtype, count, bits, block, rounding] = GetParam();
  const auto type = static_cast<cclzDataType_t>(dtype);
  CodecPtr codec = makeCodec(qgradConfig(bits, block, rounding, 0xC0FFEE));
  ASSERT_TRUE(codec);
  TestStream stream;
  ASSERT_NE(stream.s, nullptr);
  const std::vector<uint8_t> input = gradient(dtype, count, mixSeed(dtype, count, bits, block));
  const std::vector<uint8_t> cpu = hostFrame(codec, dtype, input, count);

  ASSERT_NO_FATAL_FAILURE(checkEncode(codec, dtype, input, count, cpu, 0, stream.get()));
  if (count) {
    ASSERT_NO_FATAL_FAILURE(checkEncode(codec, dtype, input, count, cpu, 1, stream.get()));
  }

  // (2) error feedback: device state against host state, three steps, with fp32 and bf16
  // residuals.
  for (cclzDataType_t rdtype : {cclzFloat32, cclzBfloat16}) {
    SCOPED_TRACE(std::string("residual ") + dtypeLabel(rdtype));
    const size_t rsize = rdtype == cclzBfloat16 ? 2 : 4;
    FeedbackPtr hostState = makeFeedback(count, cclzMemoryHost, rdtype);
    FeedbackPtr deviceState = makeFeedback(count, cclzMemoryDevice, rdtype);
    ASSERT_TRUE(hostState && deviceState);
    void* deviceResidual = residualBytesOf(deviceState);
    GuardedDeviceBuffer grad(std::max<size_t>(16, count * esize(dtype))), frame(cpu.size());
    ASSERT_TRUE(grad.ok() && frame.ok());
    for (uint64_t step = 0; step < 3; ++step) {
      SCOPED_TRACE("feedback step " + std::to_string(step));
      const std::vector<uint8_t> g = gradient(dtype, count, mixSeed(step, dtype, count, 5));
      const std::vector<uint8_t> cpuFrame =
          encodeFeedbackHost(codec.get(), hostState.get(), g.data(), count, type);
      ASSERT_NO_FATAL_FAILURE(grad.upload(g.data(), g.size()));
      frame.fill(0xEE);
      ASSERT_EQ(cclzEncodeFeedback(codec.get(), deviceState.get(), grad.data(), count, type,
                                   frame.data(), cpu.size(), nullptr, stream.get()),
                cclzSuccess)
          << cclzGetLastError(nullptr);
      ASSERT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess)
          << cclzGetLastError(nullptr);
      expectSame(frame.download(cpuFrame.size()), cpuFrame, "the GPU feedback frame");
      std::vector<uint8_t> gpuResidual(count * rsize);
      if (count) {
        ASSERT_EQ(cudaMemcpy(gpuResidual.data(), deviceResidual, count * rsize,
                             cudaMemcpyDeviceToHost),
                  cudaSuccess);
      }
      const auto* hostResidual = static_cast<const uint8_t*>(residualBytesOf(hostState));
      const std::vector<uint8_t> cpuResidual(hostResidual, hostResidual + count * rsize);
      expectSame(gpuResidual, cpuResidual, "the GPU residual");
      uint64_t next = 0;
      ASSERT_EQ(cclzFeedbackGetState(deviceState.get(), nullptr, nullptr, &next), cclzSuccess);
      EXPECT_EQ(next, step + 1);
      EXPECT_TRUE(frame.guardsIntact());
    }
  }

  // (3) decode and decode-and-accumulate of the CPU frame.
  std::vector<uint8_t> cpuOut(count * esize(dtype));
  ASSERT_EQ(cclzDecodeHost(codec.get(), cpu.data(), cpu.size(), cpuOut.data(), count, type),
            cclzSuccess);
  GuardedDeviceBuffer src(cpu.size()), out(std::max<size_t>(16, count * esize(dtype)));
  ASSERT_TRUE(src.ok() && out.ok());
  ASSERT_NO_FATAL_FAILURE(src.upload(cpu.data(), cpu.size()));
  out.fill(0x5A);
  ASSERT_EQ(cclzDecode(codec.get(), src.data(), cpu.size(), out.data(), count, type, stream.get()),
            cclzSuccess);
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess) << cclzGetLastError(nullptr);
  expectSame(out.download(cpuOut.size()), cpuOut, "the GPU decode");
  EXPECT_TRUE(out.guardsIntact());

  std::vector<float> acc(count);
  for (size_t i = 0; i < count; ++i) acc[i] = 0.125f * static_cast<float>(i % 13) - 0.75f;
  GuardedDeviceBuffer accDevice(std::max<size_t>(16, count * 4));
  ASSERT_TRUE(accDevice.ok());
  ASSERT_NO_FATAL_FAILURE(accDevice.upload(acc.data(), count * 4));
  ASSERT_EQ(cclzDecodeAccumulateHost(codec.get(), cpu.data(), cpu.size(), acc.data(), count, type),
            cclzSuccess);
  ASSERT_EQ(cclzDecodeAccumulate(codec.get(), src.data(), cpu.size(),
                                 reinterpret_cast<float*>(accDevice.data()), count, type,
                                 stream.get()),
            cclzSuccess);
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess) << cclzGetLastError(nullptr);
  const std::vector<uint8_t> accBytes(reinterpret_cast<const uint8_t*>(acc.data()),
                                      reinterpret_cast<const uint8_t*>(acc.data() + count));
  expectSame(accDevice.download(count * 4), accBytes, "the GPU accumulation");
  EXPECT_TRUE(accDevice.guardsIntact());

  // (4) truncated frames write nothing and are reported; the error is cleared afterwards.
  for (size_t cut : {cpu.size() - 1, size_t{63}}) {
    out.fill(0x77);
    ASSERT_EQ(cclzDecode(codec.get(), src.data(), cut, out.data(), count, type, stream.get()),
              cclzSuccess);
    EXPECT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzCorruptFrame) << cut << " bytes";
    const std::vector<uint8_t> after = out.download(count * esize(dtype));
    EXPECT_TRUE(std::all_of(after.begin(), after.end(), [](uint8_t b) { return b == 0x77; }));
  }
  ASSERT_EQ(cclzDecode(codec.get(), src.data(), cpu.size(), out.data(), count, type, stream.get()),
            cclzSuccess);
  EXPECT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess) << cclzGetLastError(nullptr);
}

std::string gpuName(const testing::TestParamInfo<GpuParam>& info) {
  const auto& [dtype, count, bits, block, rounding] = info.param;
  return std::string(dtypeLabel(dtype)) + "_n" + std::to_string(count) + "_int" +
         std::to_string(bits) + "_b" + std::to_string(block) +
         (rounding == cclzRoundStochastic ? "_sr" : "_rn");
}

std::vector<GpuParam> gpuParams() {
  std::vector<GpuParam> params;
  for (int dtype : {cclzFloat32, cclzBfloat16})
    for (size_t count : {size_t{1}, size_t{2}, size_t{7}, size_t{33}, size_t{300}, size_t{4097},
                         size_t{1000001}})
      for (int bits : {8, 4, 2})
        for (int block : {32, 64, 256})
          for (cclzRounding_t r : {cclzRoundNearest, cclzRoundStochastic})
            params.emplace_back(dtype, count, bits, block, r);
  // Many blocks in flight: 16M elements, the default configuration.
  for (int dtype : {cclzFloat32, cclzBfloat16})
    params.emplace_back(dtype, size_t{16} << 20, 4, 64, cclzRoundNearest);
  return params;
}

INSTANTIATE_TEST_SUITE_P(All, QgradGpu, testing::ValuesIn(gpuParams()), gpuName);

// The fused steps of a reduce-scatter's sum (ReduceStep: the first frame from zero, the last one
// stored divided and rounded to the dtype) against the steps apart on the host: zero,
// decode-and-accumulate each frame in order, store (collective/reduce.h). Three frames and one
// alone, every bit width, both dtypes, a count that ends in a partial group; the accumulator
// after two steps too.
TEST(QgradGpuReduce, FusedStepsMatchTheStepsApart) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  const size_t count = 100003;
  for (int bits : {8, 4, 2}) {
    for (int dtype : {int(cclzFloat32), int(cclzBfloat16)}) {
      SCOPED_TRACE("bits " + std::to_string(bits) + " / " + dtypeLabel(dtype));
      const cclzCodecConfig_t config = qgradConfig(bits, 64);
      CodecPtr codec = makeCodec(config);
      ASSERT_TRUE(codec);
      std::vector<std::vector<uint8_t>> frames;
      for (uint64_t seed = 1; seed <= 3; ++seed)
        frames.push_back(hostFrame(codec, dtype, gradient(dtype, count, seed), count));
      expectFusedStepsMatchTheStepsApart(qgradCodec(), config, codec.get(), dtype, count, frames);
    }
  }
}

// The empty message: a bare header, on the device too.
TEST(QgradGpuEdge, EmptyMessage) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  CodecPtr codec = makeCodec(qgradConfig(4, 64));
  TestStream stream;
  const std::vector<uint8_t> cpu = hostFrame(codec, cclzFloat32, {}, 0);
  ASSERT_EQ(cpu.size(), 64u);
  ASSERT_NO_FATAL_FAILURE(checkEncode(codec, cclzFloat32, {}, 0, cpu, 0, stream.get()));
}

// A handle decodes only frames of its own block size and bit width on the device.
TEST(QgradGpuEdge, OtherConfigurationIsCorrupt) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  CodecPtr int4 = makeCodec(qgradConfig(4, 64));
  CodecPtr int2 = makeCodec(qgradConfig(2, 64));
  CodecPtr block32 = makeCodec(qgradConfig(4, 32));
  TestStream stream;
  const size_t n = 1000;
  const std::vector<uint8_t> cpu = hostFrame(int4, cclzFloat32, gradient(cclzFloat32, n, 3), n);
  GuardedDeviceBuffer src(cpu.size()), out(n * 4);
  ASSERT_NO_FATAL_FAILURE(src.upload(cpu.data(), cpu.size()));
  for (const CodecPtr* other : {&int2, &block32}) {
    out.fill(0x77);
    ASSERT_EQ(cclzDecode(other->get(), src.data(), cpu.size(), out.data(), n, cclzFloat32,
                         stream.get()),
              cclzSuccess);
    EXPECT_EQ(cclzCodecSynchronize(other->get(), nullptr), cclzCorruptFrame);
    const std::vector<uint8_t> after = out.download(n * 4);
    EXPECT_TRUE(std::all_of(after.begin(), after.end(), [](uint8_t b) { return b == 0x77; }));
  }
  // A corrupt header (checksum) too.
  std::vector<uint8_t> bad = cpu;
  bad[kOffParams] = 2;
  ASSERT_NO_FATAL_FAILURE(src.upload(bad.data(), bad.size()));
  ASSERT_EQ(cclzDecode(int4.get(), src.data(), bad.size(), out.data(), n, cclzFloat32,
                       stream.get()),
            cclzSuccess);
  EXPECT_EQ(cclzCodecSynchronize(int4.get(), nullptr), cclzCorruptFrame);
}

// NaN and Inf: the device frame and residual are the CPU's; the encode is reported once.
TEST(QgradGpuEdge, NonFiniteMatchesReference) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  CodecPtr codec = makeCodec(qgradConfig(2, 64));
  TestStream stream;
  const size_t n = 1000;
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(static_cast<float>(i));
  g[70] = std::nanf("");
  g[500] = INFINITY;
  FeedbackPtr hostState = makeFeedback(n, cclzMemoryHost);
  FeedbackPtr deviceState = makeFeedback(n, cclzMemoryDevice);
  size_t capacity = 0, size = 0;
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), n, cclzFloat32, &capacity), cclzSuccess);
  std::vector<uint8_t> cpu(capacity);
  ASSERT_EQ(cclzEncodeFeedbackHost(codec.get(), hostState.get(), g.data(), n, cclzFloat32,
                                   cpu.data(), capacity, &size),
            cclzInvalidArgument);
  GuardedDeviceBuffer grad(n * 4), frame(capacity);
  ASSERT_NO_FATAL_FAILURE(grad.upload(g.data(), n * 4));
  ASSERT_EQ(cclzEncodeFeedback(codec.get(), deviceState.get(), grad.data(), n, cclzFloat32,
                               frame.data(), capacity, nullptr, stream.get()),
            cclzSuccess);
  EXPECT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzInvalidArgument);
  EXPECT_NE(std::string(cclzGetLastError(nullptr)).find("NaN or Inf"), std::string::npos);
  EXPECT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess) << "the flag was cleared";
  expectSame(frame.download(capacity), cpu, "the GPU frame");
  float* deviceResidual = nullptr;
  ASSERT_EQ(cclzFeedbackGetState(deviceState.get(), &deviceResidual, nullptr, nullptr),
            cclzSuccess);
  std::vector<uint8_t> gpuResidual(n * 4);
  ASSERT_EQ(cudaMemcpy(gpuResidual.data(), deviceResidual, n * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  const float* r = residualOf(hostState);
  expectSame(gpuResidual,
             std::vector<uint8_t>(reinterpret_cast<const uint8_t*>(r),
                                  reinterpret_cast<const uint8_t*>(r + n)),
             "the GPU residual");
}

}  // namespace
}  // namespace cclz::test
