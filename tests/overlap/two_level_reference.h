// What the two-level GEMM + reduce-scatter (docs/overlap.md, "Across nodes") gives rank `me`,
// built from its description rather than from the schedule: every rank's partial of me's rows
// (partialOf(q): rows of the dtype), each other node's sum of them taken at that node's rank of
// me's column (its node's other partials in the order they arrive there, (b, j - 1), (b, j - 2),
// ..., its own last, in fp32, rounded to the dtype, then through the codec), added to an fp32 sum
// in the order they come, from node a - 1, a - 2, ...; then me's node's partials in the same
// order, me's own last; stored divided by `divisor`.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "collective/node_layout.h"
#include "collective/reduce.h"

namespace cclz::test {

inline std::vector<uint8_t> twoLevelReduceScatterReference(
    const NodeLayout& l, int me, int dtype, uint64_t elements, size_t elemBytes, float divisor,
    const std::function<std::vector<uint8_t>(int)>& partialOf,
    const std::function<std::vector<uint8_t>(const std::vector<uint8_t>&)>& throughCodec) {
  const int a = l.nodeOf[me], j = l.localOf[me], local = l.perNode;
  auto mod = [](int x, int n) { return ((x % n) + n) % n; };
  // Node b's partials of me's rows added to sum as they arrive at (b, j), (b, j)'s own last.
  auto addNode = [&](std::vector<float>& sum, int b) {
    for (int q = 1; q <= local; ++q) {
      const std::vector<uint8_t> p = partialOf(l.rankAt(b, mod(j - q, local)));
      for (uint64_t i = 0; i < elements; ++i)
        reduce::accumulateElement(sum.data(), i, p.data(), dtype);
    }
  };
  std::vector<float> mine(elements, 0.0f);
  for (int p = 1; p < l.nodes; ++p) {
    std::vector<float> nodeSum(elements, 0.0f);
    addNode(nodeSum, mod(a - p, l.nodes));
    std::vector<uint8_t> rounded(elements * elemBytes);
    for (uint64_t i = 0; i < elements; ++i)
      reduce::storeElement(nodeSum.data(), i, 1.0f, dtype, rounded.data());
    const std::vector<uint8_t> frame = throughCodec(rounded);
    for (uint64_t i = 0; i < elements; ++i)
      reduce::accumulateElement(mine.data(), i, frame.data(), dtype);
  }
  addNode(mine, a);
  std::vector<uint8_t> out(elements * elemBytes);
  for (uint64_t i = 0; i < elements; ++i)
    reduce::storeElement(mine.data(), i, divisor, dtype, out.data());
  return out;
}

}  // namespace cclz::test
