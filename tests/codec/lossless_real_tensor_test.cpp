// The lossless codec on real bf16 training tensors (../shared/data/gpt-small-tensors): exact
// round trips, and a ratio within 3% of the bound 16 / (8 + H), H the empirical entropy of the
// tensor's exponent field (8 raw bits per element plus an ideal code of the exponent).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/codec_handle.h"
#include "support/configs.h"
#include "support/data.h"
#include "support/guarded_buffer.h"
#include "support/tensors.h"

namespace cclz::test {
namespace {

class LosslessRealTensors : public testing::TestWithParam<CodecSetup> {
 protected:
  static void SetUpTestSuite() {
    const std::string dir = realTensorDir();
    if (!dir.empty()) tensors_ = new std::vector<RealTensor>(loadRealTensors(dir));
  }
  static void TearDownTestSuite() {
    delete tensors_;
    tensors_ = nullptr;
  }
  static std::vector<RealTensor>* tensors_;
};
std::vector<RealTensor>* LosslessRealTensors::tensors_ = nullptr;

TEST_P(LosslessRealTensors, RoundTripExactAndNearTheEntropyBound) {
  if (!tensors_)
    GTEST_SKIP() << "no real tensors: set CCLZ_SHARED_DATA (environment or CMake cache)";
  ASSERT_FALSE(tensors_->empty());
  const CodecSetup& setup = GetParam();
  CodecPtr codec = makeCodec(setup.apiConfig());
  ASSERT_TRUE(codec);
  for (const RealTensor& t : *tensors_) {
    SCOPED_TRACE(t.name);
    const size_t n = t.values.size();
    size_t capacity = 0;
    ASSERT_EQ(cclzCodecMaxEncodedSize(codec.get(), n, cclzBfloat16, &capacity), cclzSuccess);
    std::vector<uint8_t> frame(capacity);
    size_t bytes = 0;
    ASSERT_EQ(cclzEncodeHost(codec.get(), t.values.data(), n, cclzBfloat16, frame.data(), capacity,
                             &bytes),
              cclzSuccess);
    GuardedBuffer out(2 * n);
    ASSERT_EQ(cclzDecodeHost(codec.get(), frame.data(), bytes, out.data(), n, cclzBfloat16),
              cclzSuccess);
    ASSERT_EQ(firstMismatch(out.data(), t.values.data(), 2 * n), SIZE_MAX);
    EXPECT_TRUE(out.guardsIntact());

    const double h = exponentEntropy(t.values);
    const double bound = 16.0 / (8.0 + h);
    const double ratio = 2.0 * static_cast<double>(n) / static_cast<double>(bytes);
    std::printf("%-28s %-12s H=%.3f bound=%.4f ratio=%.4f (%.1f%% of bound)\n", t.name.c_str(),
                setup.name, h, bound, ratio, 100.0 * ratio / bound);
    // The target is for the default chunking; smaller chunks pay more per chunk.
    if (std::string(setup.name) == "default") {
      EXPECT_GE(ratio, 0.97 * bound);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, LosslessRealTensors, testing::ValuesIn(losslessSetups()),
                         [](const testing::TestParamInfo<CodecSetup>& info) {
                           return std::string(info.param.name);
                         });

}  // namespace
}  // namespace cclz::test
