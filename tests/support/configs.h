// The codec configurations the tests sweep: the default and the corners of each parameter.
#pragma once

#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "codec/lossless/format.h"

namespace cclz::test {

struct CodecSetup {
  const char* name;
  int chunkElems;       // as in cclzCodecConfig_t: 0 = default
  int streamsPerChunk;  // 0 = default
  int maxCodeLength;    // 0 = default
  int formatVersion = 0;  // 0 = default (2), or 1

  // The API's defaults (cclz.h, docs/formats.md), derived here independently: the largest power
  // of two up to 16384 that cuts the message into ~512 chunks, at least 4096; chunkElems/256
  // streams; 10 bits (cclz.h).
  static uint32_t defaultChunkElems(uint64_t count) {
    uint32_t chunk = 16384;
    while (chunk > 4096 && count / chunk < 512) chunk /= 2;
    return chunk;
  }

  lossless::Params params(uint64_t count) const {
    if (formatVersion != 1)  // version 2: chunkElems (default 4096) and nothing else
      return lossless::Params{chunkElems ? static_cast<uint32_t>(chunkElems) : 4096u, 0, 0, 2};
    const uint32_t chunk =
        chunkElems ? static_cast<uint32_t>(chunkElems) : defaultChunkElems(count);
    const uint32_t streams = streamsPerChunk ? static_cast<uint32_t>(streamsPerChunk) : chunk / 256;
    uint32_t log2 = 0;
    while ((1u << log2) < streams) ++log2;
    return lossless::Params{chunk, log2,
                            maxCodeLength ? static_cast<uint32_t>(maxCodeLength) : 10u};
  }

  cclzCodecConfig_t apiConfig(cclzCodecType_t codec = cclzCodecLossless) const {
    cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
    c.codec = codec;
    c.chunkElems = chunkElems;
    c.streamsPerChunk = streamsPerChunk;
    c.maxCodeLength = maxCodeLength;
    c.formatVersion = formatVersion;
    return c;
  }
};

// Version 1's configurations first (tests pick some by index), then version 2's: the default
// (version 2) and its smallest chunk.
inline const std::vector<CodecSetup>& losslessSetups() {
  static const std::vector<CodecSetup> setups = {
      {"v1", 0, 0, 0, 1},        {"c1024s16", 1024, 16, 0, 1}, {"c65536s1024", 65536, 1024, 0, 1},
      {"len8", 0, 0, 8, 1},      {"len12", 0, 0, 12, 1},       {"default", 0, 0, 0},
      {"v2c1024", 1024, 0, 0, 2},
  };
  return setups;
}

// The two formats' defaults and smallest chunks: what suites that cannot afford every setup run.
inline const CodecSetup& v2Setup() { return losslessSetups()[5]; }
inline const CodecSetup& v2SmallSetup() { return losslessSetups()[6]; }

inline const std::vector<int>& losslessDtypes() {
  static const std::vector<int> dtypes = {cclzBfloat16, cclzFloat16, cclzFloat32};
  return dtypes;
}

// STYLE.md's ragged sizes, the empty frame, and more than one chunk of every configuration.
inline const std::vector<size_t>& testSizes() {
  static const std::vector<size_t> sizes = {0, 1, 2, 7, 4097, 1000001};
  return sizes;
}

}  // namespace cclz::test
