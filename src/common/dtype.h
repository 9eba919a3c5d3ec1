// Element sizes and names of cclzDataType_t.
#pragma once

#include <cstddef>

#include "cclz/cclz.h"

namespace cclz {

// Bytes per element; 0 for a value outside the enum.
inline size_t dtypeSize(cclzDataType_t t) {
  switch (t) {
    case cclzInt8:
    case cclzUint8:
      return 1;
    case cclzFloat16:
    case cclzBfloat16:
      return 2;
    case cclzInt32:
    case cclzUint32:
    case cclzFloat32:
      return 4;
    case cclzInt64:
    case cclzUint64:
    case cclzFloat64:
      return 8;
    default:
      return 0;
  }
}

inline const char* dtypeName(cclzDataType_t t) {
  switch (t) {
    case cclzInt8:
      return "int8";
    case cclzUint8:
      return "uint8";
    case cclzInt32:
      return "int32";
    case cclzUint32:
      return "uint32";
    case cclzInt64:
      return "int64";
    case cclzUint64:
      return "uint64";
    case cclzFloat16:
      return "fp16";
    case cclzFloat32:
      return "fp32";
    case cclzFloat64:
      return "fp64";
    case cclzBfloat16:
      return "bf16";
    default:
      return "unknown";
  }
}

}  // namespace cclz
