// Which ranks of a communicator share a node, for the two-level calls (docs/collectives.md,
// "Two-level calls across nodes"): where a communicator spans nodes of several GPUs each, the
// compressed all-gather and reduce-scatter move each frame across the node boundary once and
// do the rest inside the nodes, instead of crossing it with every rank's frames.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cclz {

struct NodeLayout {
  int nodes = 1;
  int perNode = 0;               // ranks per node; 0 where the nodes hold different numbers
  std::vector<int> nodeOf;       // by rank: its node, numbered in the order of their lowest rank
  std::vector<int> localOf;      // by rank: its place among its node's ranks, ascending
  std::vector<std::vector<int>> ranks;  // ranks[node][local]

  // Whether the two-level calls apply: at least two nodes of the same number of ranks, at
  // least two ranks each (with one, there is nothing to do inside a node).
  bool twoLevel() const { return nodes >= 2 && perNode >= 2; }
  int rankAt(int node, int local) const { return ranks[node][local]; }
};

// The layout from every rank's node key (keys[r]: rank r's). One node per distinct key.
NodeLayout nodeLayoutFromKeys(const std::vector<uint64_t>& keys);

// This process's node key: a hash of `name` where it is not empty (tests), else of
// $NCCL_HOSTID where set (NCCL's own override of a node's identity, and how two_nodes.sh
// emulates nodes on one machine), else of the host's name.
uint64_t nodeKey(const std::string& name);

}  // namespace cclz
