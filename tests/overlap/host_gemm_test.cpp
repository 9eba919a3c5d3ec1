// The host GEMM: within one rounding of the dtype of the float64 product, op(B) either way
// round, and row chunks giving the whole product's rows bit for bit (the schedules' premise).
#include "overlap/host_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cclz/cclz.h"
#include "common/float_bits.h"
#include "support/data.h"

namespace cclz::overlap {
namespace {

struct Matrix {
  Matrix(uint64_t rows, uint64_t cols, int dtype, uint64_t seed)
      : rows(rows), cols(cols), dtype(dtype),
        bytes(test::makeData(test::DataKind::kGauss1, dtype, rows * cols, 0, seed)) {}
  float at(uint64_t r, uint64_t c) const { return loadAsFloat(bytes.data(), dtype, r * cols + c); }
  uint64_t rows, cols;
  int dtype;
  std::vector<uint8_t> bytes;
};

GemmArgs args(const Matrix& a, const Matrix& b, std::vector<uint8_t>& c, bool transB) {
  GemmArgs g;
  g.a = a.bytes.data(), g.b = b.bytes.data(), g.c = c.data();
  g.m = a.rows, g.k = a.cols, g.n = transB ? b.rows : b.cols, g.transB = transB;
  g.dtype = a.dtype, g.lda = a.cols, g.ldb = b.cols, g.ldc = g.n;
  return g;
}

class HostGemm : public ::testing::TestWithParam<int> {};

TEST_P(HostGemm, IsTheProductWithinOneRoundingOfTheDtype) {
  const int dtype = GetParam();
  const Matrix a(37, 129, dtype, 1), b(23, 129, dtype, 2);  // b: n x k (transB)
  std::vector<uint8_t> c(37 * 23 * test::elementSize(dtype));
  gemmHost(args(a, b, c, true));
  // The fp32 sum's own error over k terms is far below the dtype's rounding except for fp32.
  const double ulp = dtype == cclzFloat32 ? 0x1p-23 * 8 : dtype == cclzFloat16 ? 0x1p-10 : 0x1p-7;
  for (uint64_t i = 0; i < a.rows; ++i)
    for (uint64_t j = 0; j < b.rows; ++j) {
      double want = 0, scale = 0;
      for (uint64_t p = 0; p < a.cols; ++p) {
        want += double(a.at(i, p)) * b.at(j, p);
        scale += std::fabs(double(a.at(i, p)) * b.at(j, p));
      }
      const double got = loadAsFloat(c.data(), dtype, i * b.rows + j);
      EXPECT_LE(std::fabs(got - want), ulp * std::fabs(want) + 1e-6 * scale) << i << "," << j;
    }
}

TEST_P(HostGemm, TransposedAndPlainBGiveTheSameBits) {
  const int dtype = GetParam();
  const Matrix a(16, 40, dtype, 3), bt(24, 40, dtype, 4);  // bt: n x k
  Matrix b(40, 24, dtype, 0);                               // its transpose, k x n
  const size_t es = test::elementSize(dtype);
  for (uint64_t j = 0; j < bt.rows; ++j)
    for (uint64_t p = 0; p < bt.cols; ++p)
      std::memcpy(&b.bytes[(p * b.cols + j) * es], &bt.bytes[(j * bt.cols + p) * es], es);
  std::vector<uint8_t> c1(16 * 24 * es), c2(c1.size());
  gemmHost(args(a, bt, c1, true));
  gemmHost(args(a, b, c2, false));
  EXPECT_EQ(c1, c2);
}

TEST_P(HostGemm, RowChunksGiveTheWholeProductsRowsBitForBit) {
  const int dtype = GetParam();
  const Matrix a(30, 64, dtype, 5), b(20, 64, dtype, 6);
  const size_t es = test::elementSize(dtype);
  std::vector<uint8_t> whole(30 * 20 * es), chunked(whole.size(), 0xA5);
  gemmHost(args(a, b, whole, true));
  for (uint64_t first = 0; first < 30; first += 7) {  // chunks of 7 rows, the last of 2
    const uint64_t rows = std::min<uint64_t>(7, 30 - first);
    GemmArgs g = args(a, b, chunked, true);
    g.a = a.bytes.data() + first * 64 * es, g.c = chunked.data() + first * 20 * es, g.m = rows;
    gemmHost(g);
  }
  EXPECT_EQ(whole, chunked);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, HostGemm,
                         ::testing::Values(int(cclzBfloat16), int(cclzFloat16), int(cclzFloat32)),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(test::dtypeLabel(info.param));
                         });

}  // namespace
}  // namespace cclz::overlap
