#ifdef CCLZ_HAVE_CUDA

#include "collective/timeline.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

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
  openStream_ = nullptr;
  origin_ = event();
  CCLZ_CUDA_CHECK(cudaEventRecord(origin_, stream));
}

void Timeline::close() {
  if (!enabled_ || !openStream_) return;
  CCLZ_CUDA_CHECK(cudaEventRecord(spans_.back().end, openStream_));
  openStream_ = nullptr;
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
}

void Timeline::report(cudaStream_t stream) {
  if (!enabled_ || !origin_) return;
  close();
  cudaEvent_t joined = event();
  CCLZ_CUDA_CHECK(cudaEventRecord(joined, stream));
  CCLZ_CUDA_CHECK(cudaEventSynchronize(joined));
  auto at = [&](cudaEvent_t e) {
    float ms = 0;
    CCLZ_CUDA_CHECK(cudaEventElapsedTime(&ms, origin_, e));
    return 1000.0 * ms;
  };
  const int pid = static_cast<int>(getpid());
  ++calls_;
  for (const Span& s : spans_)
    std::fprintf(stderr, "cclz-timeline pid %d call %llu %-7s slot %d %9.1f .. %9.1f us (%.1f)\n",
                 pid, static_cast<unsigned long long>(calls_), s.label, s.slot,
                 at(s.begin), at(s.end), at(s.end) - at(s.begin));
  std::fprintf(stderr, "cclz-timeline pid %d call %llu end %9.1f us\n", pid,
               static_cast<unsigned long long>(calls_), at(joined));
  origin_ = nullptr;
}

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
