// The device engine's element kernels (collective/device_kernels.h) against their host
// reference, the element operations of collective/reduce.h applied in a loop, as the host
// engine applies them: the residual added into the data of a plain call with error feedback
// (addResidualDevice) and the all-reduce's second quantization folded into the residual
// (foldDevice). Byte for byte, on every float dtype, fp32 and bf16 residuals, ragged counts,
// special values (NaN, Inf, subnormals) and in place; no write outside the buffers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "collective/device_kernels.h"
#include "collective/reduce.h"
#include "support/data.h"
#include "support/device_buffer.h"

namespace cclz::test {
namespace {

constexpr int kDtypes[] = {cclzBfloat16, cclzFloat16, cclzFloat32};
constexpr size_t kCounts[] = {0, 1, 7, 4097, 1000001};

// Residual-like floats: small, of both signs, with a few specials among them.
std::vector<float> residualValues(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> gauss(0.0f, 1e-2f);
  std::vector<float> r(count);
  for (size_t i = 0; i < count; ++i) r[i] = gauss(rng);
  if (count > 8) {
    r[1] = std::nanf("");
    r[2] = INFINITY;
    r[3] = -0.0f;
    r[4] = 1e-40f;  // subnormal
  }
  return r;
}

// Equal bytes, except that a NaN may come out with another payload on the device (its adds
// return the canonical NaN; the host's keep an operand's).
void expectSameFloats(int dtype, const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const size_t esize = elementSize(dtype);
  for (size_t i = 0; i < want.size() / esize; ++i) {
    if (std::memcmp(&got[i * esize], &want[i * esize], esize) == 0) continue;
    const float g = elementAsFloat(dtype, got, i), w = elementAsFloat(dtype, want, i);
    ASSERT_TRUE(std::isnan(g) && std::isnan(w))
        << what << ": element " << i << " is " << g << ", the host's " << w;
  }
}

class ReduceKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!haveCudaDevice()) GTEST_SKIP() << "no CUDA device";
  }
  TestStream stream;
};

// The residual in its dtype (fp32, or bf16 rounded to nearest even), as bytes.
std::vector<uint8_t> residualBytes(const std::vector<float>& v, int dtype) {
  std::vector<uint8_t> b(v.size() * elementSize(dtype));
  for (size_t i = 0; i < v.size(); ++i) storeFromFloat(b.data(), dtype, i, v[i]);
  return b;
}

constexpr int kResidualDtypes[] = {cclzFloat32, cclzBfloat16};

TEST_F(ReduceKernels, AddResidualMatchesTheHost) {
  for (int rdtype : kResidualDtypes)
    for (int dtype : kDtypes)
      for (size_t count : kCounts)
        for (bool inPlace : {false, true}) {
          const std::string what = std::string(dtypeLabel(dtype)) + " n" +
                                   std::to_string(count) + (inPlace ? " in place" : "") +
                                   " residual " + dtypeLabel(rdtype);
          SCOPED_TRACE(what);
          const size_t esize = elementSize(dtype), rsize = elementSize(rdtype);
          const std::vector<uint8_t> data =
              makeData(DataKind::kSpecial, dtype, count, 4096, 7 + count);
          const std::vector<uint8_t> residual =
              residualBytes(residualValues(count, 11 + count), rdtype);

          std::vector<uint8_t> wantOut(count * esize, 0x5A);
          std::vector<uint8_t> wantResidual = residual;
          std::vector<uint8_t> hostIn = data;
          void* hostDst = inPlace ? static_cast<void*>(hostIn.data()) : wantOut.data();
          for (size_t i = 0; i < count; ++i)
            reduce::addResidualElement(hostDst, hostIn.data(),
                                       Residual{wantResidual.data(), rdtype}, i, dtype);
          if (inPlace) wantOut = hostIn;

          GuardedDeviceBuffer in(count * esize), out(count * esize), res(count * rsize);
          ASSERT_TRUE(in.ok() && out.ok() && res.ok());
          in.upload(data.data(), data.size());
          out.fill(0x5A);
          res.upload(residual.data(), residual.size());
          void* dst = inPlace ? in.data() : out.data();
          reduce::addResidualDevice(dst, in.data(), Residual{res.data(), rdtype}, count, dtype,
                                    stream.s);
          ASSERT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
          expectSameFloats(dtype, (inPlace ? in : out).download(count * esize), wantOut,
                           "output");
          EXPECT_EQ(res.download(count * rsize), wantResidual) << "residual";
          EXPECT_EQ(wantResidual, std::vector<uint8_t>(count * rsize, 0));
          EXPECT_TRUE(in.guardsIntact() && out.guardsIntact() && res.guardsIntact());
        }
}

TEST_F(ReduceKernels, FoldMatchesTheHost) {
  for (int rdtype : kResidualDtypes)
    for (int dtype : kDtypes)
      for (size_t count : kCounts) {
        SCOPED_TRACE(std::string(dtypeLabel(dtype)) + " n" + std::to_string(count) +
                     " residual " + dtypeLabel(rdtype));
        const size_t esize = elementSize(dtype), rsize = elementSize(rdtype);
        const std::vector<uint8_t> intended = makeData(DataKind::kSpecial, dtype, count, 4096, 3);
        const std::vector<uint8_t> got = makeData(DataKind::kGauss1, dtype, count, 4096, 5);
        const std::vector<uint8_t> residual =
            residualBytes(residualValues(count, 13 + count), rdtype);
        const float factor = 4.0f;  // an average over 4 ranks
        std::vector<uint8_t> want = residual;
        for (size_t i = 0; i < count; ++i)
          reduce::foldElement(Residual{want.data(), rdtype}, i, intended.data(), got.data(),
                              dtype, factor);

        GuardedDeviceBuffer dIntended(count * esize), dGot(count * esize), res(count * rsize);
        ASSERT_TRUE(dIntended.ok() && dGot.ok() && res.ok());
        dIntended.upload(intended.data(), intended.size());
        dGot.upload(got.data(), got.size());
        res.upload(residual.data(), residual.size());
        reduce::foldDevice(Residual{res.data(), rdtype}, dIntended.data(), dGot.data(), count,
                           dtype, factor, stream.s);
        ASSERT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
        expectSameFloats(rdtype, res.download(count * rsize), want, "residual");
        EXPECT_TRUE(dIntended.guardsIntact() && dGot.guardsIntact() && res.guardsIntact());
      }
}

}  // namespace
}  // namespace cclz::test
