// RAII for cclzCodec_t in tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

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

// A host-encoded frame and the capacity the codec asked for (failures are test failures).
struct HostFrame {
  std::vector<uint8_t> bytes;  // the frame, trimmed to its size
  size_t capacity = 0;         // cclzCodecMaxEncodedSize
};

inline HostFrame encodeHost(cclzCodec_t codec, int dtype, const std::vector<uint8_t>& input,
                            size_t count) {
  HostFrame f;
  const auto type = static_cast<cclzDataType_t>(dtype);
  EXPECT_EQ(cclzCodecMaxEncodedSize(codec, count, type, &f.capacity), cclzSuccess)
      << cclzGetLastError(nullptr);
  f.bytes.resize(f.capacity);
  size_t size = 0;
  EXPECT_EQ(cclzEncodeHost(codec, input.data(), count, type, f.bytes.data(), f.bytes.size(), &size),
            cclzSuccess)
      << cclzGetLastError(nullptr);
  f.bytes.resize(size);
  return f;
}

}  // namespace cclz::test
