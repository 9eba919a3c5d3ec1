#include "support/data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "common/dtype.h"

namespace cclz::test {
namespace {

uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

void storeWord(std::vector<uint8_t>& out, size_t i, size_t esize, uint64_t word) {
  std::memcpy(out.data() + i * esize, &word, esize);  // little-endian hosts only
}

// Symbol and raw bits per dtype (IEEE layouts; docs/formats.md, "Lossless payload"): bf16 symbol
// = exponent, raw = sign, mantissa[6:0]; fp16 symbol = bits 14..7 (exponent, mantissa[9:7]), raw
// = sign, mantissa[6:0]; fp32 symbol = exponent, raw = sign, mantissa[22:0].
constexpr uint32_t kRawBitsBf16 = 8, kRawBitsFp16 = 8, kRawBitsFp32 = 24;

uint32_t rawBits(int dtype) {
  return dtype == cclzFloat32 ? kRawBitsFp32 : dtype == cclzFloat16 ? kRawBitsFp16 : kRawBitsBf16;
}

uint64_t gaussWord(int dtype, float v) {
  if (dtype == cclzBfloat16) return floatToBf16(v);
  if (dtype == cclzFloat16) return floatToHalf(v);
  return floatBits(v);
}

// Specials of each dtype: +-0, +-Inf, quiet and signaling NaNs with payloads, subnormals,
// max and min normal.
const std::vector<uint32_t>& specials(int dtype) {
  static const std::vector<uint32_t> bf16 = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81,
                                             0x7fa0, 0x7fff, 0xffff, 0xff81, 0x0001, 0x007f, 0x8001,
                                             0x8040, 0x7f7f, 0xff7f, 0x0080, 0x8080};
  static const std::vector<uint32_t> fp16 = {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01,
                                             0x7d00, 0x7fff, 0xffff, 0xfc01, 0x0001, 0x03ff, 0x8001,
                                             0x8200, 0x7bff, 0xfbff, 0x0400, 0x8400};
  static const std::vector<uint32_t> fp32 = {
      0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001,
      0x7fa00000, 0x7fffffff, 0xffffffff, 0xff800001, 0x00000001, 0x007fffff, 0x80000001,
      0x80400000, 0x7f7fffff, 0xff7fffff, 0x00800000, 0x80800000};
  return dtype == cclzBfloat16 ? bf16 : dtype == cclzFloat16 ? fp16 : fp32;
}

}  // namespace

size_t elementSize(int dtype) {
  const size_t bytes = cclz::dtypeSize(static_cast<cclzDataType_t>(dtype));
  return bytes ? bytes : 8;  // out-of-range values: callers test them, any size will do
}

const char* dtypeLabel(int dtype) { return cclz::dtypeName(static_cast<cclzDataType_t>(dtype)); }

const std::vector<DataKind>& allDataKinds() {
  static const std::vector<DataKind> kinds = {DataKind::kGauss1,
                                              DataKind::kGaussTiny,
                                              DataKind::kGaussHuge,
                                              DataKind::kSpecial,
                                              DataKind::kRandomBits,
                                              DataKind::kConstant,
                                              DataKind::kOneSymbolPerChunk,
                                              DataKind::kTwoSymbolsPerChunk,
                                              DataKind::kSkewed};
  return kinds;
}

const char* dataKindLabel(DataKind kind) {
  switch (kind) {
    case DataKind::kGauss1:
      return "gauss1";
    case DataKind::kGaussTiny:
      return "gauss1em5";
    case DataKind::kGaussHuge:
      return "gauss1e4";
    case DataKind::kSpecial:
      return "special";
    case DataKind::kRandomBits:
      return "randombits";
    case DataKind::kConstant:
      return "constant";
    case DataKind::kOneSymbolPerChunk:
      return "onesymbol";
    case DataKind::kTwoSymbolsPerChunk:
      return "twosymbols";
    case DataKind::kSkewed:
      return "skewed";
  }
  return "unknown";
}

uint32_t symbolOf(int dtype, uint32_t word) {
  if (dtype == cclzBfloat16 || dtype == cclzFloat16) return (word >> 7) & 0xFF;
  return (word >> 23) & 0xFF;
}

uint32_t wordFrom(int dtype, uint32_t symbol, uint32_t raw) {
  symbol &= 0xFF;
  if (dtype == cclzBfloat16 || dtype == cclzFloat16)
    return ((raw >> 7) & 1) << 15 | symbol << 7 | (raw & 0x7F);
  return ((raw >> 23) & 1) << 31 | symbol << 23 | (raw & 0x7FFFFF);
}

uint16_t floatToBf16(float f) {
  const uint32_t u = floatBits(f);
  if ((u & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

uint16_t floatToHalf(float f) {
  const uint32_t u = floatBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t a = u & 0x7FFFFFFF;
  if (a > 0x7F800000) return sign | 0x7E00 | ((a >> 13) & 0x1FF);  // quiet NaN, payload kept
  if (a >= 0x477FF000) return sign | 0x7C00;                       // rounds past 65504: Inf
  if (a < 0x38800000) {                                            // below 2^-14: subnormal
    const float scaled = std::fabs(f) * 16777216.0f;               // units of 2^-24, exact
    return sign | static_cast<uint16_t>(std::nearbyint(scaled));   // default mode: to even
  }
  const uint32_t rebased = a - (112u << 23);  // exponent 127 -> 15
  return sign | static_cast<uint16_t>((rebased + 0xFFF + ((rebased >> 13) & 1)) >> 13);
}

uint64_t mixSeed(uint64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (uint64_t v : {a, b, c, d}) {
    h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h = (h ^ (h >> 31)) * 0xBF58476D1CE4E5B9ull;
  }
  return h;
}

uint64_t fnv1a64(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

size_t firstMismatch(const void* a, const void* b, size_t bytes) {
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  if (bytes == 0 || std::memcmp(x, y, bytes) == 0) return SIZE_MAX;
  return static_cast<size_t>(std::mismatch(x, x + bytes, y).first - x);
}

std::vector<uint8_t> makeData(DataKind kind, int dtype, size_t count, uint32_t chunkElems,
                              uint64_t seed) {
  const size_t esize = elementSize(dtype);
  if (esize == 0) throw std::invalid_argument("makeData: unknown dtype");
  std::vector<uint8_t> out(count * esize);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  const uint64_t rawMask = (1ull << rawBits(dtype)) - 1;
  auto gauss = [&](float scale) {
    for (size_t i = 0; i < count; ++i)
      storeWord(out, i, esize, gaussWord(dtype, scale * normal(rng)));
  };
  // Per-chunk kinds: a chunk's symbols, each element's raw bits random.
  auto perChunk = [&](auto&& fillChunk) {
    if (chunkElems == 0) throw std::invalid_argument("makeData: chunkElems is 0");
    for (size_t first = 0; first < count; first += chunkElems) {
      const size_t n = std::min<size_t>(chunkElems, count - first);
      std::vector<uint32_t> symbols(n);
      fillChunk(symbols);
      for (size_t i = 0; i < n; ++i)
        storeWord(out, first + i, esize, wordFrom(dtype, symbols[i], rng() & rawMask));
    }
  };

  switch (kind) {
    case DataKind::kGauss1:
      gauss(1.0f);
      break;
    case DataKind::kGaussTiny:
      gauss(1e-5f);
      break;
    case DataKind::kGaussHuge:
      gauss(1e4f);
      break;
    case DataKind::kSpecial: {
      const auto& sp = specials(dtype);
      for (size_t i = 0; i < count; ++i) {
        const uint64_t r = rng();
        storeWord(out, i, esize,
                  r % 4 == 0 ? sp[(r >> 8) % sp.size()] : gaussWord(dtype, normal(rng)));
      }
      // Every special appears at least once where there is room for it.
      for (size_t j = 0; j < sp.size() && 3 * j < count; ++j) storeWord(out, 3 * j, esize, sp[j]);
      break;
    }
    case DataKind::kRandomBits:
      for (size_t i = 0; i < count; ++i) storeWord(out, i, esize, rng());
      break;
    case DataKind::kConstant: {
      const bool isFloat = dtype == cclzBfloat16 || dtype == cclzFloat16 || dtype == cclzFloat32;
      const uint64_t word = isFloat ? gaussWord(dtype, 2.0f + 0.25f * normal(rng))  // in (0, 4)
                                    : rng() | 0x0101010101010101ull;                // no zero byte
      for (size_t i = 0; i < count; ++i) storeWord(out, i, esize, word);
      break;
    }
    case DataKind::kOneSymbolPerChunk:
      perChunk([&](std::vector<uint32_t>& s) {
        std::fill(s.begin(), s.end(), static_cast<uint32_t>(rng() & 0xFF));
      });
      break;
    case DataKind::kTwoSymbolsPerChunk:
      perChunk([&](std::vector<uint32_t>& s) {
        const uint32_t a = rng() & 0xFF;
        const uint32_t b = (a + 1 + rng() % 255) & 0xFF;  // != a
        const uint64_t skew = 1 + rng() % 15;             // P(a) = skew/16
        for (auto& v : s) v = rng() % 16 < skew ? a : b;
        if (s.size() >= 2) {
          s[0] = a;
          s[1] = b;
        }
      });
      break;
    case DataKind::kSkewed:
      perChunk([&](std::vector<uint32_t>& s) {
        // Counts 1, 1, 2, 3, 5, 8, ... while they fit; the rest goes to the most frequent symbol.
        // Huffman gives such a histogram codes as long as the number of symbols minus one.
        std::vector<uint64_t> counts;
        uint64_t a = 1, b = 1, used = 0;
        while (used + a <= s.size() && counts.size() < 200) {
          counts.push_back(a);
          used += a;
          const uint64_t next = a + b;
          a = b;
          b = next;
        }
        if (counts.empty()) counts.push_back(0);
        counts.back() += s.size() - used;
        const uint32_t base = static_cast<uint32_t>(rng() % (257 - counts.size()));
        size_t i = 0;
        for (size_t k = 0; k < counts.size(); ++k)
          for (uint64_t c = 0; c < counts[k]; ++c) s[i++] = base + static_cast<uint32_t>(k);
        std::shuffle(s.begin(), s.end(), rng);
      });
      break;
  }
  return out;
}

float elementAsFloat(int dtype, const std::vector<uint8_t>& data, size_t i) {
  if (dtype == cclzFloat32) {
    float f;
    std::memcpy(&f, data.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, data.data() + 2 * i, 2);
  if (dtype == cclzBfloat16) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  const float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exponent == 0x1F) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  return sign * std::ldexp(static_cast<float>(mantissa + 1024), exponent - 25);
}

}  // namespace cclz::test
