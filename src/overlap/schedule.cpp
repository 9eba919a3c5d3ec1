#include "overlap/schedule.h"

namespace cclz::overlap {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

Step gatherStep(int me, int n, int s) {
  Step step;
  step.compute = mod(me - s, n);
  if (s < n - 1) {
    step.sendTo = mod(me + 1, n), step.sendChunk = step.compute;
    step.recvFrom = mod(me - 1, n), step.recvChunk = mod(me - s - 1, n);
  }
  return step;
}

Step reduceScatterStep(int me, int n, int s) {
  Step step;
  step.compute = mod(me + s + 1, n);
  if (s < n - 1) {
    step.sendTo = step.compute, step.sendChunk = step.compute;
    step.recvFrom = mod(me - s - 1, n), step.recvChunk = me;
  }
  return step;
}

int reduceOrder(int me, int n, int i) {
  return i == n - 1 ? me : reduceScatterStep(me, n, i).recvFrom;
}

std::vector<NodeStep> twoLevelReduceScatterSteps(const NodeLayout& l, int me) {
  const int a = l.nodeOf[me], j = l.localOf[me], nodes = l.nodes, local = l.perNode;
  std::vector<NodeStep> steps;
  for (int p = 1; p <= nodes; ++p) {
    const int b = mod(a + p, nodes);  // p == nodes: this rank's own node, last
    for (int q = 1; q <= local; ++q) {
      NodeStep step;
      step.compute = l.rankAt(b, mod(j + q, local));
      if (q < local) {
        step.insideTo = l.rankAt(a, mod(j + q, local));
        step.insideFrom = l.rankAt(a, mod(j - q, local));
      } else if (p < nodes) {
        step.acrossTo = step.compute;
        step.acrossFrom = l.rankAt(mod(a - p, nodes), j);
      }
      steps.push_back(step);
    }
  }
  return steps;
}

GatherPlan twoLevelGatherPlan(const NodeLayout& l, int me) {
  const int a = l.nodeOf[me], j = l.localOf[me], nodes = l.nodes, local = l.perNode;
  GatherPlan plan;
  // Node b's chunks: (b, j) first, then those of its other columns in the order j + 1, j + 2, ...
  auto computeNode = [&](int b) {
    for (int q = 0; q < local; ++q) plan.compute.push_back(l.rankAt(b, mod(j + q, local)));
  };
  // Column chunk `chunk` (of node b) out to the node's other ranks, theirs of node b in.
  auto shareInside = [&](int b, int chunk) {
    TransferGroup g;
    for (int q = 1; q < local; ++q) {
      g.sends.push_back({l.rankAt(a, mod(j + q, local)), chunk});
      g.recvs.push_back({l.rankAt(a, mod(j - q, local)), l.rankAt(b, mod(j - q, local))});
    }
    plan.groups.push_back(g);
  };
  computeNode(a);
  shareInside(a, me);
  for (int p = 1; p < nodes; ++p) {
    const int from = l.rankAt(mod(a - p, nodes), j);
    plan.groups.push_back({{{l.rankAt(mod(a + p, nodes), j), me}}, {{from, from}}});
    shareInside(mod(a - p, nodes), from);
    computeNode(mod(a - p, nodes));
  }
  return plan;
}

}  // namespace cclz::overlap
