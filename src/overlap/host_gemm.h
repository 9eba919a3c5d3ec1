// The GEMM of the overlapped tensor-parallel paths on host memory: the CPU path's compute and
// the reference its tests compare with (the device path runs cuBLASLt).
#pragma once

#include <cstdint>

namespace cclz::overlap {

// C (m x n) = A (m x k) * op(B), row-major, leading dimensions in elements. op(B) = B^T with B
// stored n x k (a Linear's weight: torch's layout, y = x W^T) when transB, else B stored k x n.
// A, B and C hold `dtype` (a cclzDataType_t: bf16, fp16 or fp32).
struct GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  uint64_t m = 0, n = 0, k = 0;
  bool transB = true;
  int dtype = 0;
  uint64_t lda = 0, ldb = 0, ldc = 0;
  const void* bias = nullptr;  // NULL, or n values of dtype added to every row of C
};

// Each element of C is the fp32 sum over k in increasing order (one fused multiply-add a step),
// plus its column's bias where there is one (one fp32 addition), rounded once to the dtype: a
// row of C depends on its row of A and on B alone, so GEMMs of row
// chunks give the rows of the whole product bit for bit, which the schedules rely on.
void gemmHost(const GemmArgs& g);

}  // namespace cclz::overlap
