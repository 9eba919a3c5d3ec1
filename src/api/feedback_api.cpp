// The entry points of the error-feedback state (cclz.h, "Error feedback"): create, destroy, reset,
// get and set. The encodes that use it are in codec_api.cpp, next to the other encodes.
#include <cstring>
#include <memory>
#include <new>

#include "api/feedback.h"
#include "api/guard.h"
#include "codec/device.h"
#include "common/error.h"

namespace cclz {
namespace {

constexpr std::align_val_t kHostAlign{64};
constexpr uint64_t kMaxFeedbackCount = uint64_t{1} << 36;  // the qgrad codec's largest message

void checkFeedback(cclzFeedback_t feedback) {
  CCLZ_REQUIRE(feedback, cclzInvalidArgument, "feedback is NULL");
}

void freeResidual(cclzFeedback* f) {
  if (!f->residual) return;
  if (f->memory == cclzMemoryHost) {
    ::operator delete(f->residual, kHostAlign);
  } else {
#ifdef CCLZ_HAVE_CUDA
    CCLZ_CUDA_CHECK(cudaFree(f->residual));
#endif
  }
  f->residual = nullptr;
}

}  // namespace
}  // namespace cclz

using namespace cclz;

extern "C" {

cclzResult_t cclzFeedbackCreate(cclzFeedback_t* feedback, size_t count, cclzMemoryType_t memory) {
  return guarded(__func__, [&] {
    CCLZ_REQUIRE(feedback, cclzInvalidArgument, "feedback is NULL");
    *feedback = nullptr;
    CCLZ_REQUIRE(memory == cclzMemoryHost || memory == cclzMemoryDevice, cclzInvalidArgument,
                 "memory must be cclzMemoryHost or cclzMemoryDevice");
    CCLZ_REQUIRE(count <= kMaxFeedbackCount, cclzInvalidArgument,
                 "element count too large (at most 2^36)");
#ifndef CCLZ_HAVE_CUDA
    CCLZ_REQUIRE(memory == cclzMemoryHost, cclzInvalidUsage,
                 "this build of cclz has no CUDA support: device feedback state is not available");
#endif
    auto f = std::make_unique<cclzFeedback>();
    f->count = count;
    f->memory = memory;
    const uint64_t bytes = count * sizeof(float);
    if (count && memory == cclzMemoryHost) {
      f->residual = static_cast<float*>(::operator new(bytes, kHostAlign));
      std::memset(f->residual, 0, bytes);
    }
#ifdef CCLZ_HAVE_CUDA
    if (count && memory == cclzMemoryDevice) {
      void* p = nullptr;
      CCLZ_CUDA_CHECK(cudaMalloc(&p, bytes));
      f->residual = static_cast<float*>(p);
      const cudaError_t zeroed = cudaMemset(p, 0, bytes);
      const cudaError_t synced = zeroed == cudaSuccess ? cudaDeviceSynchronize() : zeroed;
      if (synced != cudaSuccess) {
        freeResidual(f.get());
        CCLZ_CUDA_CHECK(synced);
      }
    }
#endif
    *feedback = f.release();
  });
}

cclzResult_t cclzFeedbackDestroy(cclzFeedback_t feedback) {
  return guarded(__func__, [&] {
    if (!feedback) return;
    std::unique_ptr<cclzFeedback> owned(feedback);
    freeResidual(feedback);
  });
}

cclzResult_t cclzFeedbackReset(cclzFeedback_t feedback, cclzStream_t stream) {
  return guarded(__func__, [&] {
    checkFeedback(feedback);
    (void)stream;
    if (feedback->residual && feedback->memory == cclzMemoryHost)
      std::memset(feedback->residual, 0, feedback->count * sizeof(float));
#ifdef CCLZ_HAVE_CUDA
    if (feedback->residual && feedback->memory == cclzMemoryDevice)
      CCLZ_CUDA_CHECK(cudaMemsetAsync(feedback->residual, 0, feedback->count * sizeof(float),
                                      reinterpret_cast<cudaStream_t>(stream)));
#endif
    feedback->step = 0;
    feedback->residualZero = true;
  });
}

cclzResult_t cclzFeedbackGetState(cclzFeedback_t feedback, float** residual, size_t* count,
                                  uint64_t* step) {
  return guarded(__func__, [&] {
    checkFeedback(feedback);
    if (residual) {
      *residual = feedback->residual;
      feedback->residualZero = false;  // the caller may write through it
    }
    if (count) *count = feedback->count;
    if (step) *step = feedback->step;
  });
}

cclzResult_t cclzFeedbackSetStep(cclzFeedback_t feedback, uint64_t step) {
  return guarded(__func__, [&] {
    checkFeedback(feedback);
    feedback->step = step;
  });
}

}  // extern "C"
