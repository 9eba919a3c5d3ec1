// The error-feedback residual of a gradient bucket (cclzFeedback_t): what quantization has not
// yet sent, one value per element, in fp32 or in bf16 (half the memory; each new residual is
// rounded to bf16 to nearest even, docs/formats.md, qgrad, "Error feedback"). Codecs and
// collectives read and write it through this view, whichever its dtype.
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "common/float_bits.h"
#include "common/hd.h"

namespace cclz {

struct Residual {
  void* data = nullptr;  // NULL: no residual (a plain encode)
  int dtype = cclzFloat32;  // cclzFloat32 or cclzBfloat16

  CCLZ_HD explicit operator bool() const { return data != nullptr; }
  CCLZ_HD uint64_t elemBytes() const { return dtype == cclzBfloat16 ? 2 : 4; }
  CCLZ_HD float load(uint64_t i) const { return loadAsFloat(data, dtype, i); }
  // Element i = v, rounded to the residual's dtype to nearest even.
  CCLZ_HD void store(uint64_t i, float v) const { storeFromFloat(data, dtype, i, v); }
  // The residual of elements [offset, ...).
  CCLZ_HD Residual at(uint64_t offset) const {
    return {data ? static_cast<uint8_t*>(data) + offset * elemBytes() : nullptr, dtype};
  }
};

// Whether dtype may hold a residual.
inline bool isResidualDtype(int dtype) {
  return dtype == cclzFloat32 || dtype == cclzBfloat16;
}

}  // namespace cclz
