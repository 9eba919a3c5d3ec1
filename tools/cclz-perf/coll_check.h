// The check of a collective's output (cclz-perf -c 1): the expected output of a rank from every
// rank's contributions, and the comparison with what a call produced. Plain C++, no MPI, so that
// tests/tools can run it on made-up results; coll_reference.cpp gathers the contributions.
#pragma once

#include <cstdint>
#include <vector>

#include "cclz/cclz.h"

namespace perf::coll {

// The expected output of this rank: exact bytes, and per element the float64 value and the sum of
// the contributions' magnitudes.
struct Reference {
  std::vector<uint8_t> exact;  // the none/lossless result: fp32 sums in rank order, rounded
  std::vector<double> value;
  std::vector<float> magnitude;
};

// The reference of a reduction: parts holds `ranks` blocks of `elems` elements of dtype, block r
// being rank r's contribution to this rank's output (op: sum or average).
Reference reduceReference(const std::vector<uint8_t>& parts, int ranks, uint64_t elems,
                          cclzDataType_t dtype, cclzRedOp_t op);
// The reference of a move (all-gather, all-to-all, send/recv): the bytes this rank must receive.
Reference moveReference(std::vector<uint8_t> bytes, cclzDataType_t dtype);

struct Check {
  uint64_t wrong = 0;  // exact codecs: elements whose bits differ; lossy: non-finite elements
  double nmse = 0, maxRelErr = 0;
};
// tolerance > 0 (exact codecs): an element is wrong when it is further than tolerance x the sum
// of the magnitudes from the value, instead of when its bits differ (reductions that the network
// computes itself: networkTolerance). A NaN where a number is expected is always wrong.
Check check(const Reference& ref, cclzDataType_t dtype, bool lossy,
            const std::vector<uint8_t>& output, double tolerance = 0);

// The tolerance of a reduction computed by the network itself (NCCL's, or MPI's with the
// user-defined bf16/fp16 sums of cclz and of cclz-perf's baseline), relative to the sum of the
// contributions' magnitudes: 2 (ranks + 1) unit roundoffs of the dtype. Why (coll_check.cpp).
double networkTolerance(cclzDataType_t dtype, int ranks);

// The tolerance cclz's output of one call is checked with: networkTolerance where the call's
// reduction was the network's own, that is where it sent plain data (the codec none, or an
// adaptive call that ran plain: cclzCommGetLastPath), on NCCL and on MPI alike; 0 (exact bytes,
// or the lossy codec's checks) where cclz reduced decoded frames itself, in fp32 in rank order.
double callTolerance(bool reduces, bool plainData, cclzDataType_t dtype, int ranks);

}  // namespace perf::coll
