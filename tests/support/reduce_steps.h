// The fused steps of a reduce-scatter's sum on the device (Codec::decodeReduceDevice with a
// ReduceStep: the first frame from zero, the last one stored divided and rounded to the dtype)
// against the steps apart on the host: zero, cclzDecodeAccumulateHost of each frame in order,
// store (collective/reduce.h). Every codec with a fused decode runs it: the GPU suites of fp8 and
// qgrad. The whole sum in one pass (Codec::decodeSumDevice) against the same.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "codec/codec.h"
#include "codec/device.h"
#include "collective/reduce.h"
#include "support/data.h"
#include "support/device_buffer.h"

namespace cclz::test {

// Sums all of `frames` (host frames of `count` elements of dtype, made by hostCodec), then the
// first alone (first and last at once): the device's accumulator after two steps and its stored
// sum must equal the host's byte for byte, no decode may reject its frame, no guard may break.
inline void expectFusedStepsMatchTheStepsApart(const Codec& codec, const cclzCodecConfig_t& config,
                                               cclzCodec_t hostCodec, int dtype, size_t count,
                                               const std::vector<std::vector<uint8_t>>& frames) {
  const auto type = static_cast<cclzDataType_t>(dtype);
  const size_t esize = elementSize(dtype);
  GuardedDeviceBuffer status(sizeof(DeviceStatus)), acc(4 * count), out(count * esize);
  ASSERT_TRUE(status.ok() && acc.ok() && out.ok());
  const std::vector<uint8_t> zeros(sizeof(DeviceStatus), 0);
  status.upload(zeros.data(), zeros.size());
  const DeviceWorkspace ws{reinterpret_cast<DeviceStatus*>(status.data()), nullptr, 0};
  auto expectSame = [](const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                       const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    const size_t at = firstMismatch(got.data(), want.data(), got.size());
    EXPECT_EQ(at, SIZE_MAX) << what << ": first differing byte " << at;
  };
  for (size_t n : {frames.size(), size_t{1}}) {
    SCOPED_TRACE(std::to_string(n) + " frames");
    const float divisor = float(n);
    std::vector<float> hostAcc(count, 0.0f);
    std::vector<std::unique_ptr<GuardedDeviceBuffer>> onDevice;
    for (size_t r = 0; r < n; ++r) {
      onDevice.push_back(std::make_unique<GuardedDeviceBuffer>(frames[r].size()));
      onDevice.back()->upload(frames[r].data(), frames[r].size());
      ASSERT_EQ(cclzDecodeAccumulateHost(hostCodec, frames[r].data(), frames[r].size(),
                                         hostAcc.data(), count, type),
                cclzSuccess);
      const bool last = r + 1 == n;
      const ReduceStep step{reinterpret_cast<float*>(acc.data()), r == 0,
                            last ? static_cast<void*>(out.data()) : nullptr, divisor};
      codec.decodeReduceDevice(config, onDevice.back()->data(), frames[r].size(), dtype, count,
                               step, ws, nullptr);
      if (r == 1) {  // the accumulator after a first and a plain step
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        std::vector<uint8_t> want(4 * count);
        std::memcpy(want.data(), hostAcc.data(), 4 * count);
        expectSame(acc.download(4 * count), want, "accumulator after two frames");
      }
    }
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<uint8_t> want(count * esize);
    for (size_t i = 0; i < count; ++i)
      reduce::storeElement(hostAcc.data(), i, divisor, dtype, want.data());
    expectSame(out.download(count * esize), want, "stored sum of " + std::to_string(n) + " frames");
    DeviceStatus after{};
    std::memcpy(&after, status.download(sizeof after).data(), sizeof after);
    EXPECT_EQ(after.decodeError, 0u) << "a decode rejected its frame";
    EXPECT_TRUE(acc.guardsIntact() && out.guardsIntact());
  }
}

// The sum of all of `frames` in one pass (Codec::decodeSumDevice, which must take it) against
// the host's steps apart, byte for byte: no decode may reject its frame, no guard may break.
inline void expectOnePassSumMatchesTheStepsApart(const Codec& codec,
                                                 const cclzCodecConfig_t& config,
                                                 cclzCodec_t hostCodec, int dtype, size_t count,
                                                 const std::vector<std::vector<uint8_t>>& frames) {
  const auto type = static_cast<cclzDataType_t>(dtype);
  const size_t esize = elementSize(dtype), n = frames.size();
  const float divisor = float(n);
  GuardedDeviceBuffer status(sizeof(DeviceStatus)), out(count * esize);
  ASSERT_TRUE(status.ok() && out.ok());
  const std::vector<uint8_t> zeros(sizeof(DeviceStatus), 0);
  status.upload(zeros.data(), zeros.size());
  const DeviceWorkspace ws{reinterpret_cast<DeviceStatus*>(status.data()), nullptr, 0};
  std::vector<float> hostAcc(count, 0.0f);
  std::vector<std::unique_ptr<GuardedDeviceBuffer>> onDevice;
  FrameSum sum;
  sum.n = int(n), sum.frameBytes = frames[0].size(), sum.store = out.data();
  sum.divisor = divisor;
  for (size_t r = 0; r < n; ++r) {
    ASSERT_EQ(frames[r].size(), sum.frameBytes) << "the frames of a sum have one size";
    onDevice.push_back(std::make_unique<GuardedDeviceBuffer>(frames[r].size()));
    onDevice.back()->upload(frames[r].data(), frames[r].size());
    sum.frames[r] = onDevice.back()->data();
    ASSERT_EQ(cclzDecodeAccumulateHost(hostCodec, frames[r].data(), frames[r].size(),
                                       hostAcc.data(), count, type),
              cclzSuccess);
  }
  ASSERT_TRUE(codec.sumsInOnePass(config, int(n)));
  codec.decodeSumDevice(config, sum, dtype, count, ws, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> want(count * esize);
  for (size_t i = 0; i < count; ++i)
    reduce::storeElement(hostAcc.data(), i, divisor, dtype, want.data());
  const std::vector<uint8_t> got = out.download(count * esize);
  const size_t at = firstMismatch(got.data(), want.data(), got.size());
  EXPECT_EQ(at, SIZE_MAX) << "sum of " << n << " frames in one pass: first differing byte " << at;
  DeviceStatus after{};
  std::memcpy(&after, status.download(sizeof after).data(), sizeof after);
  EXPECT_EQ(after.decodeError, 0u) << "a decode rejected its frame";
  EXPECT_TRUE(out.guardsIntact());
  for (const auto& f : onDevice) EXPECT_TRUE(f->guardsIntact());
}

}  // namespace cclz::test
