// RAII for cclzCodec_t in tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "cclz/cclz.h"

namespace cclz::test {

struct CodecDeleter {
  void operator()(cclzCodec* c) const { cclzCodecDestroy(c); }
};
using CodecPtr = std::unique_ptr<cclzCodec, CodecDeleter>;

// Creates a codec or fails the current test (ASSERT_NO_FATAL_FAILURE around the call).
inline CodecPtr makeCodec(const cclzCodecConfig_t& config) {
  cclzCodec_t raw = nullptr;
  const cclzResult_t r = cclzCodecCreate(&raw, &config);
  EXPECT_EQ(r, cclzSuccess) << cclzGetLastError(nullptr);
  return CodecPtr(raw);
}

}  // namespace cclz::test
