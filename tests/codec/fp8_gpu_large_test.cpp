// The fp8 decoders on a message past the largest grid (16384 blocks): a warp of the plain decode
// and of decode-and-accumulate then takes more than one step, reading the accumulator of each
// next step after it stored the one before (decode_kernel.cu). The CPU reference would take
// minutes at this size, so the device's own results are checked against each other:
// decode-and-accumulate must equal decode followed by the sum on the host, bit for bit (the sum
// adds what decode stores, back in fp32: docs/formats.md). The smaller sizes of fp8_gpu_test.cpp
// check both decoders against the reference.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "common/float_bits.h"
#include "common/float_rn.h"
#include "support/codec_handle.h"
#include "support/device_buffer.h"
#include "support/stress.h"

namespace cclz::test {
namespace {

TEST(Fp8GpuLarge, AccumulateOverManyStepsEqualsDecodeThenAdd) {
  if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  // One step of the largest grid covers 16384 blocks x 8 warps x 1024 values; the rest is a
  // second step for some warps, ending in a piece of 3 values.
  const size_t count = size_t{16384} * 8 * 1024 + 100003;
  // Gaussian values from a table with a prime period (the rows differ), NaN and Inf sprinkled in
  // so that some whole pieces take the per-value path.
  std::vector<uint16_t> input(count);
  {
    uint64_t state = 17;
    std::vector<uint16_t> table(1048573);
    for (auto& t : table) t = floatToBf16(float(normalFrom(state)));
    for (size_t i = 0; i < count; ++i) input[i] = table[i % table.size()];
    for (size_t i = 5; i < count; i += 1000003) input[i] = floatToBf16(NAN);
    for (size_t i = 77; i < count; i += 700001) input[i] = floatToBf16(INFINITY);
  }
  cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
  config.codec = cclzCodecFp8;
  config.fp8RowElems = 1024;
  CodecPtr codec = makeCodec(config);
  ASSERT_TRUE(codec);
  size_t capacity = 0;
  ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), count, cclzBfloat16, &capacity), cclzSuccess);

  GuardedDeviceBuffer src(2 * count), frame(capacity), out(2 * count), acc(4 * count), size(8);
  ASSERT_TRUE(src.ok() && frame.ok() && out.ok() && acc.ok() && size.ok());
  src.upload(input.data(), 2 * count);
  ASSERT_EQ(cclzEncode(codec.get(), src.data(), count, cclzBfloat16, frame.data(), capacity,
                       reinterpret_cast<size_t*>(size.data()), nullptr),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  size_t frameBytes = 0;
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), &frameBytes), cclzSuccess)
      << cclzGetLastError(nullptr);
  ASSERT_EQ(cclzDecode(codec.get(), frame.data(), frameBytes, out.data(), count, cclzBfloat16,
                       nullptr),
            cclzSuccess)
      << cclzGetLastError(nullptr);

  std::vector<float> expected(count);
  for (size_t i = 0; i < count; ++i) expected[i] = float(i % 1000) * 0.25f - 100.0f;
  acc.upload(expected.data(), 4 * count);
  ASSERT_EQ(cclzDecodeAccumulate(codec.get(), frame.data(), frameBytes,
                                 reinterpret_cast<float*>(acc.data()), count, cclzBfloat16,
                                 nullptr),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  ASSERT_EQ(cclzCodecSynchronize(codec.get(), nullptr), cclzSuccess) << cclzGetLastError(nullptr);

  const std::vector<uint8_t> decoded = out.download(2 * count);
  for (size_t i = 0; i < count; ++i) {
    uint16_t bits;
    std::memcpy(&bits, &decoded[2 * i], 2);
    expected[i] = accumulateRn(expected[i], bf16ToFloat(bits));
  }
  const std::vector<uint8_t> got = acc.download(4 * count);
  size_t mismatches = 0, first = count;
  for (size_t i = 0; i < count; ++i)
    if (std::memcmp(&got[4 * i], &expected[i], 4) != 0) {
      if (first == count) first = i;
      ++mismatches;
    }
  EXPECT_EQ(mismatches, 0u) << "first at value " << first << " of " << count;
  EXPECT_TRUE(acc.guardsIntact() && out.guardsIntact());
}

}  // namespace
}  // namespace cclz::test
