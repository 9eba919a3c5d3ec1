// Reads a qgrad frame at the offsets docs/formats.md gives ("qgrad"), without src/'s helpers, so
// that the tests pin the format rather than whatever the code happens to do.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "support/frame_view.h"

namespace cclz::test {

struct QgradView {
  uint64_t count = 0, numBlocks = 0, scalesOffset = 64, codesOffset = 0, frameBytes = 0;
  uint32_t blockElems = 0, bits = 0;

  explicit QgradView(const uint8_t* f) {
    count = readLE<uint64_t>(f + kOffCount);
    blockElems = readLE<uint32_t>(f + kOffChunkElems);
    bits = f[kOffParams];
    numBlocks = (count + blockElems - 1) / blockElems;
    codesOffset = align16(64 + 2 * numBlocks);
    frameBytes = codesOffset + align16((count * bits + 7) / 8);
  }
  // The bf16 scale of block k, as a float.
  static float bf16(uint16_t h) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  }
  uint16_t scaleBits(const uint8_t* f, uint64_t k) const {
    return readLE<uint16_t>(f + scalesOffset + 2 * k);
  }
  float scale(const uint8_t* f, uint64_t k) const { return bf16(scaleBits(f, k)); }
  // Element i's signed code.
  int code(const uint8_t* f, uint64_t i) const {
    const uint64_t bit = i * bits;
    const uint32_t raw = (f[codesOffset + bit / 8] >> (bit % 8)) & ((1u << bits) - 1u);
    return raw >= (1u << (bits - 1)) ? static_cast<int>(raw) - (1 << bits) : static_cast<int>(raw);
  }
  // Element i's value: code * scale, in fp32.
  float value(const uint8_t* f, uint64_t i) const {
    return static_cast<float>(code(f, i)) * scale(f, i / blockElems);
  }
};

}  // namespace cclz::test
