// The codec configurations the tests sweep: the default and the corners of each parameter.
#pragma once

#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "codec/lossless/format.h"

namespace cclz::test {

struct CodecSetup {
  const char* name;
  int chunkElems;  // as in cclzCodecConfig_t: 0 = default (4096)

  lossless::Params params() const {
    return lossless::Params{chunkElems ? static_cast<uint32_t>(chunkElems) : 4096u};
  }

  cclzCodecConfig_t apiConfig(cclzCodecType_t codec = cclzCodecLossless) const {
    cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
    c.codec = codec;
    c.chunkElems = chunkElems;
    return c;
  }
};

// The default (4096-element chunks) and the other chunk sizes.
inline const std::vector<CodecSetup>& losslessSetups() {
  static const std::vector<CodecSetup> setups = {{"default", 0}, {"c2048", 2048}, {"c1024", 1024}};
  return setups;
}

// The default and the smallest chunk: what suites that cannot afford every setup run.
inline const CodecSetup& defaultSetup() { return losslessSetups()[0]; }
inline const CodecSetup& smallChunkSetup() { return losslessSetups()[2]; }

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
