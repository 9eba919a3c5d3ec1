// How long one collective took, for the tuner: on the host by the clock around a call that
// returns complete, on the device by a pair of timing events on the caller's stream around the
// call's work (so the host never waits while the call is queued, only later, in seconds()).
#pragma once

#include <memory>

#include "cclz/cclz.h"
#include "transport/transport.h"

namespace cclz {

class Stopwatch {
 public:
  virtual ~Stopwatch() = default;
  // Before the call's work is queued on `stream`, and after it.
  virtual void start(cclzStream_t stream) = 0;
  virtual void stop(cclzStream_t stream) = 0;
  // The span in seconds; on the device it waits for the stop event.
  virtual double seconds() = 0;
};

// For an engine of this memory kind (device: needs a build with CUDA).
std::unique_ptr<Stopwatch> makeStopwatch(MemoryKind memory);

}  // namespace cclz
