// The GEMM of the overlapped tensor-parallel paths on the device: cuBLASLt, row-major, with one
// algorithm per shape of B that splits nothing along k, so that a GEMM of a row chunk of A gives
// the rows of the whole product bit for bit, as the host GEMM does (host_gemm.h;
// docs/overlap.md, "The device path"). Or, for the serial path of an adaptive call, the fastest
// of cuBLASLt's first few choices for each whole shape.
#pragma once

#ifdef CCLZ_HAVE_CUDA

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "overlap/host_gemm.h"

namespace cclz::overlap {

class DeviceGemm {
 public:
  // reservedSms: multiprocessors the GEMMs leave to work beside them (cuBLASLt's SM count
  // target: its persistent kernels then launch on the others only); 0: every one. rowsAlike:
  // every row computed alike whatever m (run() below); false: the fastest of the heuristic's first
  // few algorithms for each (m, n, k, transB, dtype), split-K allowed, timed at its first GEMM
  // (fastestOf).
  explicit DeviceGemm(int reservedSms = 0, bool rowsAlike = true);
  ~DeviceGemm();
  DeviceGemm(const DeviceGemm&) = delete;
  DeviceGemm& operator=(const DeviceGemm&) = delete;

  // C = A * op(B) (+ bias) as GemmArgs says (device memory; leading dimensions in elements),
  // queued on stream. The bias is cuBLASLt's epilogue: added in fp32 before C is rounded. The
  // algorithm is chosen at the first GEMM of a (n, k, transB, dtype) and kept for
  // every row count after it: one that reduces nothing across k (no split-K, no stream-K
  // fix-up), so each row of C is computed alike whatever m is.
  void run(const GemmArgs& g, cudaStream_t stream);

 private:
  // m, n, k, transB, dtype, and the bias: 0 none, else its pointer's alignment up to 16 bytes
  // (which the heuristic's choice may rely on).
  using Key = std::tuple<uint64_t, uint64_t, uint64_t, bool, int, int>;
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  Plan& planFor(const GemmArgs& g, cudaStream_t stream);
  // The bias pointer into the plan's descriptor (the epilogue reads it from there).
  void setBias(const Plan& plan, const GemmArgs& g);
  cublasLtMatmulAlgo_t fastestOf(cublasLtMatmulDesc_t desc,
                                 const std::vector<cublasLtMatmulAlgo_t>& algos, const GemmArgs& g,
                                 cudaStream_t stream);

  int32_t smTarget_ = 0;  // CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET (0: the device's count)
  const bool rowsAlike_;  // the plans are per (n, k, transB, dtype), m is 0 in their keys
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;  // cuBLASLt's scratch, kWorkspaceBytes
  std::map<Key, Plan> plans_;
};

}  // namespace cclz::overlap

#endif  // CCLZ_HAVE_CUDA
