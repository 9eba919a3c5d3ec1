// The overlapped tensor-parallel GEMMs on host memory, over any host transport (MPI, loopback):
// the schedules of overlap/schedule.h run step by step, each step's transfer (a group of sends
// and receives) beside its GEMM (overlap/host_gemm.h). A host transport completes a group
// before it returns, so nothing overlaps here: this path is what CPU ranks run and what the
// device path's results are compared with (docs/overlap.md).
#pragma once

#include <cstdint>

#include "cclz/cclz.h"
#include "collective/node_layout.h"
#include "overlap/host_gemm.h"

namespace cclz {

class Codec;
class Transport;

namespace overlap {

// One call. Row-major; op(B) as in GemmArgs (transB: B is n x k, a Linear's weight).
//   allGatherMatmul: a holds this rank's m rows (m x k) of the gathered matrix (ranks x m rows);
//     c (ranks * m x n) = gathered * op(B) + bias; gathered (may be NULL) receives the gathered
//     matrix, which a backward pass needs for the weight's gradient; bias (may be NULL): n values
//     added to every row in fp32 before the rounding (a GEMM's bias epilogue, as a Linear's).
//   matmulReduceScatter: a holds ranks * m rows (ranks * m x k); c (m x n) = rows
//     [rank * m, (rank + 1) * m) of the sum over the ranks of a * op(B) (divided by the ranks for
//     cclzAvg), each rank's partial rounded to the dtype as a GEMM stores it, summed in fp32 in
//     the order the partials arrive, this rank's own last (schedule.h: reduceOrder).
// codec NULL: plain rows move; else each chunk (m rows) is one frame of `config`, encoded once:
// an all-gather forwards frames unchanged around the ring and every rank decodes every chunk,
// its own included, so all ranks multiply the same gathered matrix; a reduce-scatter encodes
// every partial, its own included (the collectives' rule: quantized once, reduced once).
// nodes: where set, with NodeLayout::twoLevel, the calls run two-level across the nodes
// (schedule.h). The all-gather moves each chunk's frame (or rows) unchanged, by other routes: the
// same gathered matrix. The reduce-scatter, with a codec only (twoLevelReduceScatterSteps): plain
// partials inside each node, summed in fp32 as they arrive, this rank's own last; each other
// node's chunk's sum rounded to the dtype and encoded once; this rank's rows summed from the other
// nodes' frames in the order they came, then its node's partials, its own last. Without a codec
// a reduce-scatter stays direct, so its result keeps fp32 summation of the exact partials.
struct OverlapCall {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;  // all-gather only
  void* c = nullptr;
  void* gathered = nullptr;
  uint64_t m = 0, n = 0, k = 0;
  bool transB = true;
  int dtype = cclzBfloat16;
  int redOp = cclzSum;
  const Codec* codec = nullptr;
  cclzCodecConfig_t config{};
  const NodeLayout* nodes = nullptr;
};

// The GEMM of `rows` rows of a (row-major, k wide) into c (n wide), with the call's B and bias.
inline GemmArgs rowsGemm(const OverlapCall& call, const void* a, uint64_t rows, void* c) {
  GemmArgs g;
  g.a = a, g.b = call.b, g.c = c, g.m = rows, g.n = call.n, g.k = call.k;
  g.transB = call.transB, g.dtype = call.dtype;
  g.lda = call.k, g.ldb = call.transB ? call.k : call.n, g.ldc = call.n;
  g.bias = call.bias;
  return g;
}

inline bool gathersTwoLevel(const OverlapCall& call) {
  return call.nodes && call.nodes->twoLevel();
}
inline bool reducesTwoLevel(const OverlapCall& call) {
  return call.codec && gathersTwoLevel(call);
}

void allGatherMatmulHost(Transport& t, const OverlapCall& call);
void matmulReduceScatterHost(Transport& t, const OverlapCall& call);

}  // namespace overlap
}  // namespace cclz
