// GEMM + reduce-scatter across nodes on a device communicator (docs/overlap.md, "Across
// nodes"): the two-level schedule of schedule.h (twoLevelReduceScatterSteps) with NCCL's
// transfers. The GEMMs run on the caller's stream in the schedule's order; the transfer stream
// takes each partial as it is computed: inside the node as plain rows, added to the fp32 sum of
// the phase's column chunk as it arrives; at a phase's last step that sum is closed with this
// rank's own partial, rounded to the dtype, encoded once and sent across, while the frame of this
// rank's rows from that phase's other node is decoded into a second fp32 sum. The last phase adds
// the node's partials of this rank's rows to that sum, its own last, and stores the result: the
// host path's bytes (host_overlap.cpp), with cuBLASLt's GEMM.
#ifdef CCLZ_HAVE_CUDA

#include <vector>

#include "codec/codec.h"
#include "collective/device_kernels.h"
#include "common/error.h"
#include "overlap/device_overlap.h"
#include "overlap/device_overlap_parts.h"
#include "overlap/schedule.h"
#include "transport/transport.h"

namespace cclz::overlap {

void DeviceOverlap::matmulReduceScatterTwoLevel(Transport& t, const OverlapCall& call,
                                                cudaStream_t stream) {
  const bool capturing = isCapturing(stream);
  const NodeLayout& nodes = *call.nodes;
  const int n = t.size(), me = t.rank(), local = nodes.perNode;
  const std::vector<NodeStep> steps = twoLevelReduceScatterSteps(nodes, me);
  const uint64_t es = elemBytes(call), elements = call.m * call.n, partialBytes = elements * es;
  const uint64_t wire = wireBytes(call, elements);
  // partials: each step's GEMM output, then the partials arriving from this node's other ranks
  // (one slot per step of a phase), then the node sum rounded to the dtype for its encode.
  uint8_t* partials = area(partials_, (n + local) * partialBytes, capturing);
  uint8_t* inside = partials + n * partialBytes;
  uint8_t* rounded = inside + (local - 1) * partialBytes;
  // frames: the node sum's frame going out, then the frames of this rank's rows coming in.
  uint8_t* frames = area(frames_, nodes.nodes * wire, capturing);
  auto* sums = reinterpret_cast<float*>(area(acc_, 2 * elements * sizeof(float), capturing));
  float* nodeSum = sums;           // the phase's column chunk, of another node
  float* mine = sums + elements;   // this rank's rows
  const DeviceWorkspace ws = workspace(call, elements, capturing);
  begin(stream, n, capturing);

  std::vector<int> order;
  for (const NodeStep& step : steps) order.push_back(step.compute);
  partialGemmsInOrder(call, partials, order, stream);

  int across = 0;  // frames received so far
  for (int s = 0; s < n; ++s) {
    const NodeStep& step = steps[s];
    const bool ownPhase = nodes.nodeOf[step.compute] == nodes.nodeOf[me];
    float* sum = ownPhase ? mine : nodeSum;
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(comm_, ready_[s]));
    const uint8_t* partial = partials + s * partialBytes;
    if (step.insideTo >= 0) {
      if (!ownPhase && s % local == 0)
        CCLZ_CUDA_CHECK(cudaMemsetAsync(nodeSum, 0, elements * sizeof(float), comm_));
      uint8_t* arriving = inside + (s % local) * partialBytes;
      timeline_.open("move", step.compute, comm_);
      exchange(t, step.insideTo, partial, step.insideFrom, arriving, partialBytes, comm_);
      timeline_.open("reduce", step.insideFrom, comm_);
      reduce::accumulateDevice(sum, arriving, elements, call.dtype, comm_);
      continue;
    }
    timeline_.open("reduce", me, comm_);
    reduce::accumulateDevice(sum, partial, elements, call.dtype, comm_);
    if (step.acrossTo < 0) {  // this rank's own rows, last
      const float divisor = call.redOp == cclzAvg ? static_cast<float>(n) : 1.0f;
      reduce::storeDevice(mine, elements, divisor, call.dtype, call.c, comm_);
      break;
    }
    reduce::storeDevice(nodeSum, elements, 1.0f, call.dtype, rounded, comm_);
    timeline_.open("encode", step.compute, comm_);
    call.codec->encodeDevice(call.config, call.dtype, rounded, elements, frames, nullptr, ws,
                             comm_);
    uint8_t* arriving = frames + (1 + across) * wire;
    timeline_.open("move", step.compute, comm_);
    exchange(t, step.acrossTo, frames, step.acrossFrom, arriving, wire, comm_);
    timeline_.open("decode", step.acrossFrom, comm_);
    call.codec->decodeReduceDevice(call.config, arriving, wire, call.dtype, elements,
                                   ReduceStep{mine, across == 0, nullptr, 1.0f}, ws, comm_);
    ++across;
  }
  end(stream, capturing);
}

}  // namespace cclz::overlap

#endif  // CCLZ_HAVE_CUDA
