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
    ::operator delete(f->residual.data, kHostAlign);
  } else {
#ifdef CCLZ_HAVE_CUDA
    CCLZ_CUDA_CHECK(cudaFree(f->residual.data));
#endif
  }
  f->residual.data = nullptr;
}

uint64_t residualBytes(const cclzFeedback* f) { return f->count * f->residual.elemBytes(); }

}  // namespace
}  // namespace cclz

using namespace cclz;

extern "C" {

cclzResult_t cclzFeedbackCreate(cclzFeedback_t* feedback, size_t count, cclzMemoryType_t memory) {
  return cclzFeedbackCreateWithDtype(feedback, count, memory, cclzFloat32);
}

cclzResult_t cclzFeedbackCreateWithDtype(cclzFeedback_t* feedback, size_t count,
                                         cclzMemoryType_t memory, cclzDataType_t residualDtype) {
  return guarded(__func__, [&] {
    CCLZ_REQUIRE(feedback, cclzInvalidArgument, "feedback is NULL");
    *feedback = nullptr;
    CCLZ_REQUIRE(memory == cclzMemoryHost || memory == cclzMemoryDevice, cclzInvalidArgument,
                 "memory must be cclzMemoryHost or cclzMemoryDevice");
    CCLZ_REQUIRE(isResidualDtype(residualDtype), cclzNotSupported,
                 "a residual is cclzFloat32 or cclzBfloat16");
    CCLZ_REQUIRE(count <= kMaxFeedbackCount, cclzInvalidArgument,
                 "element count too large (at most 2^36)");
#ifndef CCLZ_HAVE_CUDA
    CCLZ_REQUIRE(memory == cclzMemoryHost, cclzInvalidUsage,
                 "this build of cclz has no CUDA support: device feedback state is not available");
#endif
    auto f = std::make_unique<cclzFeedback>();
    f->count = count;
    f->memory = memory;
    f->residual.dtype = residualDtype;
    const uint64_t bytes = residualBytes(f.get());
    if (count && memory == cclzMemoryHost) {
      f->residual.data = ::operator new(bytes, kHostAlign);
      std::memset(f->residual.data, 0, bytes);
    }
#ifdef CCLZ_HAVE_CUDA
    if (count && memory == cclzMemoryDevice) {
      void* p = nullptr;
      CCLZ_CUDA_CHECK(cudaMalloc(&p, bytes));
      f->residual.data = p;
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
      std::memset(feedback->residual.data, 0, residualBytes(feedback));
#ifdef CCLZ_HAVE_CUDA
    if (feedback->residual && feedback->memory == cclzMemoryDevice)
      CCLZ_CUDA_CHECK(cudaMemsetAsync(feedback->residual.data, 0, residualBytes(feedback),
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
      CCLZ_REQUIRE(feedback->residual.dtype == cclzFloat32, cclzInvalidUsage,
                   "the residual is bf16: its address is cclzFeedbackGetResidual's");
      *residual = static_cast<float*>(feedback->residual.data);
      feedback->residualZero = false;  // the caller may write through it
    }
    if (count) *count = feedback->count;
    if (step) *step = feedback->step;
  });
}

cclzResult_t cclzFeedbackGetResidual(cclzFeedback_t feedback, void** residual,
                                     cclzDataType_t* dtype) {
  return guarded(__func__, [&] {
    checkFeedback(feedback);
    CCLZ_REQUIRE(residual, cclzInvalidArgument, "residual is NULL");
    *residual = feedback->residual.data;
    feedback->residualZero = false;  // the caller may write through it
    if (dtype) *dtype = static_cast<cclzDataType_t>(feedback->residual.dtype);
  });
}

cclzResult_t cclzFeedbackSetStep(cclzFeedback_t feedback, uint64_t step) {
  return guarded(__func__, [&] {
    checkFeedback(feedback);
    feedback->step = step;
  });
}

}  // extern "C"
