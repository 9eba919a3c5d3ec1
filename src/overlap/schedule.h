// The peer-to-peer schedules of the overlapped tensor-parallel GEMMs (issue 37; DESIGN.md,
// src/overlap): which row chunk each step computes and what it sends and receives meanwhile, as
// functions of (rank, ranks, step), so that every rank's engine and the tests read one schedule.
//
// n ranks, n steps, chunk c = rows [c * m, (c + 1) * m) of the gathered or reduced matrix.
//
// All-gather + GEMM (column-parallel under sequence parallelism): step s computes chunk
// (me - s) mod n, this rank's own first, so the first GEMM waits for nothing; while it runs, the
// chunk it computes goes on to rank me + 1 and chunk (me - s - 1) mod n arrives from rank me - 1,
// ready for step s + 1 (a ring: each chunk's frame is forwarded as it arrived, encoded once). The
// last step sends and receives nothing, so no transfer is left exposed after the last GEMM.
//
// GEMM + reduce-scatter (row-parallel): step s computes the partial product of chunk
// (me + s + 1) mod n, this rank's own last; steps before the last send their partial to its
// owner directly, and at step s the partial for this rank's chunk arrives from rank
// (me - s - 1) mod n. The owner adds each partial to an fp32 sum as it arrives (reduceOrder: the
// peers' in the order they come, its own last; each quantized once, reduced once), so that only
// the own partial's addition is left after the last GEMM. That order differs from the
// collectives' rank order: the result equals GEMM-then-reduce-scatter within fp32
// summation-order rounding, not bit for bit.
#pragma once

namespace cclz::overlap {

// A step's work: the chunk it computes, and the transfer under way meanwhile (-1: none).
struct Step {
  int compute = 0;
  int sendTo = -1;     // the peer this step's send goes to
  int sendChunk = -1;  // which chunk it carries
  int recvFrom = -1;   // the peer this step's receive comes from
  int recvChunk = -1;  // which chunk it carries (all-gather) or whose partial (reduce-scatter)
};

Step gatherStep(int me, int n, int s);
Step reduceScatterStep(int me, int n, int s);
// GEMM + reduce-scatter: the rank whose partial of this rank's rows is added i-th to the sum,
// i = 0 .. n - 1: the peers' in the order they arrive, this rank's own last.
int reduceOrder(int me, int n, int i);

}  // namespace cclz::overlap
