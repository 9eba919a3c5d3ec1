#ifdef CCLZ_HAVE_CUDA

#include "collective/timeline.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "codec/device.h"
#include "common/error.h"

namespace cclz {
namespace {

const char* stageName(Stage s) {
  switch (s) {
    case Stage::Encode: return "encode";
    case Stage::Move: return "move";
    case Stage::Decode: return "decode";
  }
  return "?";
}

}  // namespace

Timeline::Timeline() {
  const char* v = std::getenv("CCLZ_TIMELINE");
  enabled_ = v && std::strcmp(v, "1") == 0;
}

Timeline::~Timeline() {
  for (cudaEvent_t e : pool_) cudaEventDestroy(e);
}

cudaEvent_t Timeline::event() {
  if (used_ == pool_.size()) {
    cudaEvent_t e = nullptr;
    CCLZ_CUDA_CHECK(cudaEventCreate(&e));  // with timing
    pool_.push_back(e);
  }
  return pool_[used_++];
}

void Timeline::start(cudaStream_t stream) {
  if (!enabled_) return;
  used_ = 0;
  spans_.clear();
  spanOpen_ = false;
  origin_ = event();
  CCLZ_CUDA_CHECK(cudaEventRecord(origin_, stream));
}

void Timeline::close() {
  if (!enabled_ || !spanOpen_) return;
  CCLZ_CUDA_CHECK(cudaEventRecord(spans_.back().end, openStream_));
  spanOpen_ = false;
}

void Timeline::open(Stage stage, int slot, cudaStream_t stream) {
  open(stageName(stage), slot, stream);
}

void Timeline::open(const char* label, int slot, cudaStream_t stream) {
  if (!enabled_ || !origin_) return;
  close();
  Span span{label, slot, event(), event()};
  CCLZ_CUDA_CHECK(cudaEventRecord(span.begin, stream));
  spans_.push_back(span);
  openStream_ = stream;
  spanOpen_ = true;
}

void Timeline::report(cudaStream_t stream) {
  if (!enabled_ || !origin_) return;
  close();
  cudaEvent_t joined = event();
  CCLZ_CUDA_CHECK(cudaEventRecord(joined, stream));
  CCLZ_CUDA_CHECK(cudaEventSynchronize(joined));
  // A span whose time cannot be read prints "-" and the runtime's reason once, rather than
  // failing the call: the timeline is a diagnostic (cudaEventElapsedTime answers "invalid
  // resource handle" for an event never recorded).
  const char* unreadable = nullptr;
  auto at = [&](cudaEvent_t e) {
    float ms = 0;
    const cudaError_t status = cudaEventElapsedTime(&ms, origin_, e);
    if (status == cudaSuccess) return 1000.0 * ms;
    (void)cudaGetLastError();  // not sticky: clear it, so that no later check reports it
    if (!unreadable) unreadable = cudaGetErrorString(status);
    return std::nan("");
  };
  const int pid = static_cast<int>(getpid());
  ++calls_;
  auto print = [](double us) {
    char text[24];
    if (std::isnan(us))
      std::snprintf(text, sizeof text, "%9s", "-");
    else
      std::snprintf(text, sizeof text, "%9.1f", us);
    return std::string(text);
  };
  for (const Span& s : spans_) {
    const double begin = at(s.begin), end = at(s.end);
    std::fprintf(stderr, "cclz-timeline pid %d call %llu %-7s slot %d %s .. %s us (%s)\n", pid,
                 static_cast<unsigned long long>(calls_), s.label, s.slot, print(begin).c_str(),
                 print(end).c_str(),
                 print(end - begin).c_str());
  }
  std::fprintf(stderr, "cclz-timeline pid %d call %llu end %s us\n", pid,
               static_cast<unsigned long long>(calls_), print(at(joined)).c_str());
  if (unreadable)
    std::fprintf(stderr, "cclz-timeline pid %d call %llu: spans marked - could not be read (%s)\n",
                 pid, static_cast<unsigned long long>(calls_), unreadable);
  origin_ = nullptr;
}

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
