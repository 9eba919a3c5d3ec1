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
//
// GEMM + reduce-scatter across nodes (two-level, with a codec; docs/overlap.md, "Across nodes"):
// the direct schedule sends every partial across the node boundary, each rank's partials for
// every rank of the other nodes. The two-level schedule adds inside the node first and crosses it
// with one frame per rank and other node, as the collectives' two-level reduce-scatter does
// (collective/two_level.cpp). Rank (a, j), the j-th of node a, computes the chunks node by node,
// the other nodes first in the order a + 1, a + 2, ... and its own node last; within node b's
// phase the chunks of ranks (b, j + 1), (b, j + 2), ... and (b, j) last. Each chunk of another
// column goes, as plain rows, to the rank of this node in its column while the partial of
// (b, j) comes from rank (a, j - q); so when (b, j) is computed, its node sum lacks only this
// rank's own partial. That sum (in fp32, rounded to the dtype) is encoded once and crosses to
// rank (b, j), while the frame of this rank's rows comes from rank (a - p, j), node a - p's sum.
// The last phase sums this rank's own rows: the other nodes' frames in the order they came, then
// the node's partials in the order they came, its own last.
#pragma once

#include <vector>

#include "collective/node_layout.h"

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

// A step of the two-level GEMM + reduce-scatter: the chunk it computes, then either its partial
// to a rank of this node while another partial of the phase's column chunk comes in, or (the
// phase's last step) the node sum closed with this partial and, for another node's chunk, its
// frame across while a frame of this rank's rows comes back.
struct NodeStep {
  int compute = 0;
  int insideTo = -1;    // the rank of this node this step's partial goes to (-1: the last step)
  int insideFrom = -1;  // the rank whose partial of the phase's column chunk arrives meanwhile
  int acrossTo = -1;    // the last step of another node's phase: the node sum's frame goes here
  int acrossFrom = -1;  // and the frame of that node's sum of this rank's rows comes from here
};

// The schedule of rank `me` for a layout with NodeLayout::twoLevel: one step per rank, in order.
std::vector<NodeStep> twoLevelReduceScatterSteps(const NodeLayout& l, int me);

// All-gather + GEMM across nodes (two-level): each chunk's frame crosses the node boundary once
// per other node, from its owner to the owner's column there, where the direct ring crosses it
// with every frame on the ring's boundary links. Rank (a, j) computes its own chunk first, then
// its node's, then node a - 1's ((a - 1, j) first, which came across; then those its node's
// other ranks forward), node a - 2's, ... The transfers, in groups whose sends and receives run
// at once and match their peers' same group: its own frame to the node's other ranks (theirs
// in); then for p = 1 .. nodes - 1 its own frame to (a + p, j) while (a - p, j)'s comes across,
// and that frame forwarded to the node's other ranks while theirs from node a - p come in.
struct Transfer {
  int peer = -1;
  int chunk = -1;
};
struct TransferGroup {
  std::vector<Transfer> sends, recvs;
};
struct GatherPlan {
  std::vector<int> compute;  // the chunks in the order of their GEMMs
  std::vector<TransferGroup> groups;
};
GatherPlan twoLevelGatherPlan(const NodeLayout& l, int me);

}  // namespace cclz::overlap
