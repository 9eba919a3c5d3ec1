// A lossless frame from the CPU reference, for the tests that replay a kernel's
// arithmetic on the CPU against it.
#pragma once

#include <cstdint>
#include <vector>

#include "codec/lossless/ref.h"

namespace cclz::test {

// count values of dtype in chunks of chunkElems.
inline std::vector<uint8_t> encodeRefFrame(int dtype, const std::vector<uint8_t>& input,
                                           uint64_t count, uint32_t chunkElems) {
  const lossless::Params params{chunkElems};
  std::vector<uint8_t> frame(lossless::maxEncodedBytes(params, dtype, count));
  frame.resize(lossless::encodeRef(params, dtype, input.data(), count, frame.data(), frame.size()));
  return frame;
}

}  // namespace cclz::test
