// The fuzz input's prefix (see decode_fuzzer.cpp), shared with the seed generator.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cclz/cclz.h"
#include "common/dtype.h"

namespace cclz::fuzz {

constexpr size_t kPrefixBytes = 4;
constexpr uint64_t kMaxCount = 1u << 20;  // keeps each run small and fast

constexpr cclzDataType_t kLosslessDtypes[3] = {cclzBfloat16, cclzFloat16, cclzFloat32};
constexpr cclzDataType_t kNoneDtypes[8] = {cclzInt8,    cclzUint8,   cclzInt32,   cclzInt64,
                                           cclzFloat16, cclzFloat32, cclzFloat64, cclzBfloat16};
constexpr cclzDataType_t kQgradDtypes[2] = {cclzFloat32, cclzBfloat16};
constexpr cclzDataType_t kFp8Dtypes[3] = {cclzBfloat16, cclzFloat16, cclzFloat32};

// The harness's codec numbers (two option bits) and the library's codec types.
constexpr int kNumCodecs = 4;
constexpr cclzCodecType_t kCodecTypes[kNumCodecs] = {cclzCodecLossless, cclzCodecNone,
                                                    cclzCodecQgrad, cclzCodecFp8};

inline int dtypeFor(int codec, int d) {
  switch (codec) {
    case 0: return kLosslessDtypes[d % 3];
    case 1: return kNoneDtypes[d % 8];
    case 2: return kQgradDtypes[d % 2];
    default: return kFp8Dtypes[d % 3];
  }
}

struct Options {
  int codec;  // index into kCodecTypes
  int dtype;
  uint64_t count;
  bool countFromHeader, fixChecksum, viaApi;
};

inline Options parseOptions(const uint8_t* p) {
  Options o;
  o.codec = (p[0] & 1) | ((p[0] >> 6) & 2);  // bits 0 and 7
  o.dtype = dtypeFor(o.codec, (p[0] >> 1) & 7);
  o.countFromHeader = (p[0] >> 4) & 1;
  o.fixChecksum = (p[0] >> 5) & 1;
  o.viaApi = (p[0] >> 6) & 1;
  o.count = (p[1] | (p[2] << 8) | (uint64_t{p[3]} << 16)) % (kMaxCount + 1);
  return o;
}

// Writes the prefix for a frame of (codec, dtype, count); flags are options bits 4-6.
inline void writePrefix(uint8_t* p, int codec, int dtypeIndex, uint64_t count, int flags) {
  p[0] = static_cast<uint8_t>((codec & 1) | (dtypeIndex << 1) | ((flags & 7) << 4) |
                              ((codec & 2) << 6));
  p[1] = static_cast<uint8_t>(count);
  p[2] = static_cast<uint8_t>(count >> 8);
  p[3] = static_cast<uint8_t>(count >> 16);
}

inline size_t elementSize(int dtype) {
  const size_t bytes = cclz::dtypeSize(static_cast<cclzDataType_t>(dtype));
  return bytes ? bytes : 8;
}

}  // namespace cclz::fuzz
