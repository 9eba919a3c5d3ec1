#ifdef CCLZ_HAVE_CUDA

#include "overlap/device_gemm.h"

#include <algorithm>
#include <string>
#include <vector>

#include "codec/device.h"
#include "common/error.h"

namespace cclz::overlap {
namespace {

constexpr uint64_t kWorkspaceBytes = uint64_t{32} << 20;
constexpr int kCandidates = 16;  // heuristic results looked through for one without split-K

#define CCLZ_CUBLAS_CHECK(call)                                                         \
  do {                                                                                  \
    const cublasStatus_t status_ = (call);                                              \
    if (status_ != CUBLAS_STATUS_SUCCESS)                                               \
      CCLZ_FAIL(cclzUnhandledCudaError, std::string(#call " failed: cuBLAS status ") +  \
                                            std::to_string(static_cast<int>(status_))); \
  } while (0)

cudaDataType_t cudaType(int dtype) {
  switch (dtype) {
    case cclzBfloat16:
      return CUDA_R_16BF;
    case cclzFloat16:
      return CUDA_R_16F;
    case cclzFloat32:
      return CUDA_R_32F;
  }
  CCLZ_FAIL(cclzInvalidArgument, "the overlapped GEMMs take bf16, fp16 or fp32");
}

// cuBLASLt is column-major: the row-major C (m x n) = A (m x k) * op(B) is, seen column-major,
// C^T (n x m) = op(B)^T (n x k) * A^T (k x m). A row-major A is its transpose column-major
// (k x m, leading dimension lda), so cuBLASLt's first operand is B and its second is A,
// untransposed.
struct Layouts {
  cublasLtMatrixLayout_t b = nullptr, a = nullptr, c = nullptr;
  Layouts(const GemmArgs& g) {
    const cudaDataType_t t = cudaType(g.dtype);
    // B stored n x k (transB) is column-major k x n, transposed by the operation; stored k x n
    // it is column-major n x k, taken as it is.
    CCLZ_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(&b, t, g.transB ? g.k : g.n, g.transB ? g.n : g.k, g.ldb));
    CCLZ_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, t, g.k, g.m, g.lda));
    CCLZ_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, t, g.n, g.m, g.ldc));
  }
  ~Layouts() {
    for (cublasLtMatrixLayout_t l : {b, a, c})
      if (l) cublasLtMatrixLayoutDestroy(l);
  }
  Layouts(const Layouts&) = delete;
  Layouts& operator=(const Layouts&) = delete;
};

// The alignment class of a bias pointer in a plan's key: 0 for none, else the largest power of
// two up to 16 that divides its address.
int biasAlignment(const void* bias) {
  if (!bias) return 0;
  const auto address = reinterpret_cast<uintptr_t>(bias);
  int alignment = 16;
  while (address % alignment) alignment /= 2;
  return alignment;
}

}  // namespace

DeviceGemm::DeviceGemm(int reservedSms, bool rowsAlike) : rowsAlike_(rowsAlike) {
  if (reservedSms > 0) {
    int device = 0, sms = 0;
    CCLZ_CUDA_CHECK(cudaGetDevice(&device));
    CCLZ_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    CCLZ_REQUIRE(reservedSms < sms, cclzInvalidArgument,
                 "CCLZ_OVERLAP_COMM_SMS=" + std::to_string(reservedSms) +
                     " leaves the GEMMs none of the " + std::to_string(sms) + " multiprocessors");
    smTarget_ = sms - reservedSms;
  }
  CCLZ_CUBLAS_CHECK(cublasLtCreate(&handle_));
  const cudaError_t err = cudaMalloc(&workspace_, kWorkspaceBytes);
  if (err != cudaSuccess) {
    cublasLtDestroy(handle_);
    CCLZ_CUDA_CHECK(err);
  }
}

DeviceGemm::~DeviceGemm() {
  for (auto& [key, plan] : plans_) cublasLtMatmulDescDestroy(plan.desc);
  cudaFree(workspace_);
  cublasLtDestroy(handle_);
}

DeviceGemm::Plan& DeviceGemm::planFor(const GemmArgs& g, cudaStream_t stream) {
  const Key key{rowsAlike_ ? 0 : g.m, g.n, g.k, g.transB, g.dtype, biasAlignment(g.bias)};
  auto found = plans_.find(key);
  if (found != plans_.end()) return found->second;

  Plan plan;
  CCLZ_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t opB = g.transB ? CUBLAS_OP_T : CUBLAS_OP_N, opA = CUBLAS_OP_N;
  CCLZ_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opB, sizeof opB));
  CCLZ_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof opA));
  if (smTarget_ > 0) {
    const cublasStatus_t status = cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &smTarget_, sizeof smTarget_);
    if (status != CUBLAS_STATUS_SUCCESS) cublasLtMatmulDescDestroy(plan.desc);
    CCLZ_CUBLAS_CHECK(status);
  }
  if (g.bias) {  // a vector of dtype (the output's, cuBLASLt's default), one value per column
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    cublasStatus_t status = cublasLtMatmulDescSetAttribute(
        plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                              &g.bias, sizeof g.bias);
    if (status != CUBLAS_STATUS_SUCCESS) cublasLtMatmulDescDestroy(plan.desc);
    CCLZ_CUBLAS_CHECK(status);
  }
  cublasLtMatmulPreference_t pref = nullptr;
  CCLZ_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t workspace = kWorkspaceBytes;
  // NOTE: no reduction across k where rows must be alike: an algorithm that splits k sums its
  // parts in an order that may depend on m, and the schedules need every row computed alike
  // whatever the chunk.
  const uint32_t scheme =
      rowsAlike_ ? CUBLASLT_REDUCTION_SCHEME_NONE : CUBLASLT_REDUCTION_SCHEME_MASK;
  cublasLtMatmulHeuristicResult_t results[kCandidates]{};
  int found_count = 0;
  {
    const Layouts l(g);
    cublasStatus_t status = cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &scheme, sizeof scheme);
    if (status == CUBLAS_STATUS_SUCCESS)
      status = cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, l.b, l.a, l.c, l.c, pref,
                                              kCandidates, results, &found_count);
    cublasLtMatmulPreferenceDestroy(pref);
    if (status != CUBLAS_STATUS_SUCCESS) cublasLtMatmulDescDestroy(plan.desc);
    CCLZ_CUBLAS_CHECK(status);
  }
  std::vector<cublasLtMatmulAlgo_t> usable;
  for (int i = 0; i < found_count; ++i) {
    int32_t splits = 1;
    cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                         sizeof splits, nullptr);
    if (results[i].state == CUBLAS_STATUS_SUCCESS && (splits <= 1 || !rowsAlike_))
      usable.push_back(results[i].algo);
  }
  if (!usable.empty()) {
    plan.algo = rowsAlike_ ? usable.front() : fastestOf(plan.desc, usable, g, stream);
    return plans_.emplace(key, plan).first->second;
  }
  cublasLtMatmulDescDestroy(plan.desc);
  CCLZ_FAIL(cclzNotSupported,
            std::string("cuBLASLt has no algorithm") + (rowsAlike_ ? " without split-K" : "") +
                " for n = " + std::to_string(g.n) + ", k = " + std::to_string(g.k));
}

// The whole GEMM's algorithm: cuBLASLt's heuristic ranks by a model, and its first choice can be
// several percent slower than the next at a framework's large shapes; the first kTimedCandidates
// usable ones are timed on the call's own buffers (one untimed run, then kTimedRuns), once per
// shape. Not while the stream is captured into a CUDA graph (nothing could be timed): then the
// first.
cublasLtMatmulAlgo_t DeviceGemm::fastestOf(cublasLtMatmulDesc_t desc,
                                           const std::vector<cublasLtMatmulAlgo_t>& algos,
                                           const GemmArgs& g, cudaStream_t stream) {
  constexpr size_t kTimedCandidates = 4;
  constexpr int kTimedRuns = 2;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  CCLZ_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone || algos.size() == 1) return algos.front();
  const Layouts l(g);
  const float alpha = 1.0f, beta = 0.0f;
  cudaEvent_t start = nullptr, stop = nullptr;
  CCLZ_CUDA_CHECK(cudaEventCreate(&start));
  CCLZ_CUDA_CHECK(cudaEventCreate(&stop));
  cublasLtMatmulAlgo_t best = algos.front();
  float bestMs = 0;
  for (size_t i = 0; i < std::min(algos.size(), kTimedCandidates); ++i) {
    auto gemm = [&] {
      return cublasLtMatmul(handle_, desc, &alpha, g.b, l.b, g.a, l.a, &beta, g.c, l.c, g.c, l.c,
                            &algos[i], workspace_, kWorkspaceBytes, stream);
    };
    if (gemm() != CUBLAS_STATUS_SUCCESS) continue;
    CCLZ_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int r = 0; r < kTimedRuns; ++r) gemm();
    CCLZ_CUDA_CHECK(cudaEventRecord(stop, stream));
    CCLZ_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CCLZ_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    if (i == 0 || ms < bestMs) best = algos[i], bestMs = ms;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

void DeviceGemm::setBias(const Plan& plan, const GemmArgs& g) {
  if (g.bias)
    CCLZ_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                     &g.bias, sizeof g.bias));
}

void DeviceGemm::run(const GemmArgs& g, cudaStream_t stream) {
  if (g.m == 0) return;
  Plan& plan = planFor(g, stream);
  setBias(plan, g);  // a plan is made once per shape; the bias may move from call to call
  const Layouts l(g);
  const float alpha = 1.0f, beta = 0.0f;
  CCLZ_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, g.b, l.b, g.a, l.a, &beta, g.c, l.c,
                                   g.c, l.c, &plan.algo, workspace_, kWorkspaceBytes, stream));
}

}  // namespace cclz::overlap

#endif  // CCLZ_HAVE_CUDA
