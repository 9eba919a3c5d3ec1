#include "codec/qgrad/ref.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "common/error.h"
#include "common/float_bits.h"

namespace cclz::qgrad {
namespace {

// Calls emit(i, value) for every element of a valid frame, in order.
template <typename Emit>
void forEachValue(const FrameHeader& h, const uint8_t* frame, Emit&& emit) {
  const uint32_t blockElems = h.chunkElems, bits = h.params[0];
  const Layout l = frameLayout(h.count, blockElems, bits);
  const uint8_t* codes = frame + l.codesOffset;
  for (uint64_t k = 0; k < l.numBlocks; ++k) {
    uint16_t scaleBits;
    std::memcpy(&scaleBits, frame + l.scalesOffset + 2 * k, 2);
    const float s = scaleValue(scaleBits);
    const uint64_t end = std::min<uint64_t>(h.count, (k + 1) * blockElems);
    for (uint64_t i = k * blockElems; i < end; ++i) {
      const uint64_t bit = i * bits;
      const uint32_t code = (codes[bit / 8] >> (bit % 8)) & ((1u << bits) - 1u);
      emit(i, dequantize(codeValue(code, bits), s));
    }
  }
}

}  // namespace

uint64_t maxEncodedBytes(const Params& p, uint64_t count) {
  return frameLayout(count, p.blockElems, p.bits).frameBytes;
}

EncodeResult encodeRef(const Params& p, int dtype, const void* src, uint64_t count,
                       Residual residual, uint64_t step, uint8_t* dst, uint64_t capacity) {
  CCLZ_REQUIRE(validParams(p), cclzInvalidArgument, "invalid qgrad parameters");
  CCLZ_REQUIRE(isSupportedDtype(dtype), cclzNotSupported, "qgrad takes fp32 or bf16");
  CCLZ_REQUIRE(count <= kMaxCount, cclzInvalidArgument, "element count too large");
  CCLZ_REQUIRE(count == 0 || src, cclzInvalidArgument, "source is NULL");
  CCLZ_REQUIRE(dst, cclzInvalidArgument, "destination is NULL");
  const Layout l = frameLayout(count, p.blockElems, p.bits);
  CCLZ_REQUIRE(capacity >= l.frameBytes, cclzBufferTooSmall,
               "destination capacity is below the maximum encoded size");

  const FrameHeader h = makeHeader(p, dtype, count);
  std::memcpy(dst, &h, sizeof h);
  std::memset(dst + kFrameHeaderBytes, 0, l.frameBytes - kFrameHeaderBytes);
  uint8_t* codes = dst + l.codesOffset;
  const int qmax = qmaxOf(p.bits);
  const uint64_t key = drawKey(p.seed, step);
  EncodeResult result{l.frameBytes, kNoNonFinite};

  float x[256];
  for (uint64_t k = 0; k < l.numBlocks; ++k) {
    const uint64_t begin = k * p.blockElems;
    const uint64_t n = std::min<uint64_t>(count - begin, p.blockElems);
    float m = 0;
    for (uint64_t j = 0; j < n; ++j) {
      const float g = loadAsFloat(src, dtype, begin + j);
      x[j] = residual ? addRn(g, residual.load(begin + j)) : g;
      m = std::max(m, magnitudeOrInf(x[j]));
    }
    const uint16_t scale = scaleFor(m, qmax);
    std::memcpy(dst + l.scalesOffset + 2 * k, &scale, 2);
    if (scale == kNanScale) {  // codes stay 0, the residual keeps its values
      if (result.firstNonFinite == kNoNonFinite) {
        uint64_t j = 0;
        while (!isInf(magnitudeOrInf(x[j]))) ++j;
        result.firstNonFinite = begin + j;
      }
      continue;
    }
    const float s = scaleValue(scale), rs = reciprocal(s);
    for (uint64_t j = 0; j < n; ++j) {
      const uint64_t i = begin + j;
      const float draw = p.rounding == kRoundStochastic ? uniformDraw(key, i) : 0.0f;
      const int q = quantize(x[j], rs, qmax, static_cast<int>(p.rounding), draw);
      const uint64_t bit = i * p.bits;
      codes[bit / 8] |= static_cast<uint8_t>(codeBits(q, p.bits) << (bit % 8));
      if (residual) residual.store(i, subRn(x[j], dequantize(q, s)));
    }
  }
  return result;
}

uint32_t readHeader(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count,
                    FrameHeader* h) {
  if (!src || srcBytes < kFrameHeaderBytes) return kFrameTruncated;
  std::memcpy(h, src, sizeof *h);
  uint32_t err = checkFrameHeader(*h, srcBytes);
  if (err == kFrameOk) err = checkFrameMatches(*h, cclzCodecQgrad, dtype, count);
  if (err == kFrameOk) err = checkQgradHeader(*h);
  return err;
}

uint32_t decodeRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count, void* dst) {
  FrameHeader h;
  const uint32_t err = readHeader(src, srcBytes, dtype, count, &h);
  if (err != kFrameOk) return err;
  if (dtype == cclzFloat32) {
    float* out = static_cast<float*>(dst);
    forEachValue(h, src, [&](uint64_t i, float y) { out[i] = y; });
  } else {
    uint16_t* out = static_cast<uint16_t*>(dst);
    forEachValue(h, src, [&](uint64_t i, float y) { out[i] = floatToBf16(y); });
  }
  return kFrameOk;
}

uint32_t decodeAccumulateRef(const uint8_t* src, uint64_t srcBytes, int dtype, uint64_t count,
                             float* acc) {
  FrameHeader h;
  const uint32_t err = readHeader(src, srcBytes, dtype, count, &h);
  if (err != kFrameOk) return err;
  forEachValue(h, src, [&](uint64_t i, float y) { acc[i] = addRn(acc[i], y); });
  return kFrameOk;
}

}  // namespace cclz::qgrad
