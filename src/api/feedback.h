// The error-feedback state behind cclzFeedback_t (cclz.h): shared by the feedback entry points
// (feedback_api.cpp) and the encode that uses it (codec_api.cpp).
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "codec/residual.h"

struct cclzFeedback {
  uint64_t count = 0;
  cclzMemoryType_t memory = cclzMemoryHost;
  cclz::Residual residual;  // count values of its dtype in `memory`; no data when count is 0
  uint64_t step = 0;          // the step of the next encode
  // The residual is known to be all zeros: created, reset, or folded into a plain call's data.
  // A compressed call clears it, and so does cclzFeedbackGetState (the caller may write it). A
  // plain call (adaptive calls, collective/adaptive_path.cpp) skips its fold while it is set.
  bool residualZero = true;
};
