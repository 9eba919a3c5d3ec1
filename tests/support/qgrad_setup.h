// Configurations and host calls the qgrad tests share.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cclz/cclz.h"
#include "support/codec_handle.h"

namespace cclz::test {

inline cclzCodecConfig_t qgradConfig(int bits, int blockElems,
                                     cclzRounding_t rounding = cclzRoundNearest,
                                     uint64_t seed = 0) {
  cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
  c.codec = cclzCodecQgrad;
  c.bits = bits;
  c.blockElems = blockElems;
  c.rounding = rounding;
  c.seed = seed;
  return c;
}

// RAII for cclzFeedback_t.
struct FeedbackDeleter {
  void operator()(cclzFeedback* f) const { cclzFeedbackDestroy(f); }
};
using FeedbackPtr = std::unique_ptr<cclzFeedback, FeedbackDeleter>;

inline FeedbackPtr makeFeedback(size_t count, cclzMemoryType_t memory = cclzMemoryHost,
                                cclzDataType_t residualDtype = cclzFloat32) {
  cclzFeedback_t raw = nullptr;
  EXPECT_EQ(cclzFeedbackCreateWithDtype(&raw, count, memory, residualDtype), cclzSuccess)
      << cclzGetLastError(nullptr);
  return FeedbackPtr(raw);
}

// The residual's address, whatever its dtype.
inline void* residualBytesOf(const FeedbackPtr& f) {
  void* r = nullptr;
  EXPECT_EQ(cclzFeedbackGetResidual(f.get(), &r, nullptr), cclzSuccess);
  return r;
}

inline float* residualOf(const FeedbackPtr& f) {
  float* r = nullptr;
  EXPECT_EQ(cclzFeedbackGetState(f.get(), &r, nullptr, nullptr), cclzSuccess);
  return r;
}

// Error-feedback encode on the host; failures are test failures. Returns the trimmed frame.
inline std::vector<uint8_t> encodeFeedbackHost(cclzCodec_t codec, cclzFeedback_t feedback,
                                               const void* grad, size_t count,
                                               cclzDataType_t dtype) {
  size_t capacity = 0, size = 0;
  EXPECT_EQ(cclzCodecMaxEncodedSize(codec, count, dtype, &capacity), cclzSuccess);
  std::vector<uint8_t> frame(capacity);
  EXPECT_EQ(cclzEncodeFeedbackHost(codec, feedback, grad, count, dtype, frame.data(), capacity,
                                   &size),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  frame.resize(size);
  return frame;
}

}  // namespace cclz::test
