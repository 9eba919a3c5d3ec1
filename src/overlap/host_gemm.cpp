#include "overlap/host_gemm.h"

#include <cmath>
#include <vector>

#include "common/float_bits.h"

namespace cclz::overlap {

void gemmHost(const GemmArgs& g) {
  // op(B) as fp32 columns: column j is contiguous, so the inner loop reads both operands in order.
  std::vector<float> columns(g.n * g.k);
  for (uint64_t j = 0; j < g.n; ++j)
    for (uint64_t p = 0; p < g.k; ++p)
      columns[j * g.k + p] =
          loadAsFloat(g.b, g.dtype, g.transB ? j * g.ldb + p : p * g.ldb + j);
  std::vector<float> row(g.k);
  for (uint64_t i = 0; i < g.m; ++i) {
    for (uint64_t p = 0; p < g.k; ++p) row[p] = loadAsFloat(g.a, g.dtype, i * g.lda + p);
    for (uint64_t j = 0; j < g.n; ++j) {
      const float* column = columns.data() + j * g.k;
      float sum = 0.0f;
      for (uint64_t p = 0; p < g.k; ++p) sum = std::fma(row[p], column[p], sum);
      if (g.bias) sum += loadAsFloat(g.bias, g.dtype, j);
      storeFromFloat(g.c, g.dtype, i * g.ldc + j, sum);
    }
  }
}

}  // namespace cclz::overlap
