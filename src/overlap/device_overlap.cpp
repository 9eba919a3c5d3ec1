#ifdef CCLZ_HAVE_CUDA

#include "overlap/device_overlap.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "codec/codec.h"
#include "codec/frame.h"
#include "collective/device_kernels.h"
#include "common/dtype.h"
#include "common/error.h"
#include "overlap/device_overlap_parts.h"
#include "transport/nccl/peer_window.h"
#include "overlap/schedule.h"
#include "transport/transport.h"

namespace cclz::overlap {

void exchange(Transport& t, int to, const void* out, int from, void* in, uint64_t bytes,
              cudaStream_t stream) {
  t.groupStart(reinterpret_cast<cclzStream_t>(stream));
  t.send(out, bytes, to);
  t.recv(in, bytes, from, nullptr);
  t.groupEnd();
}

DeviceOverlap::DeviceOverlap(bool highPriority, int smsBesideNccl, int smsBesideCopyEngines,
                             bool mergedGather, OverlapCopy copy, bool pushInTurn)
    : smsBesideNccl_(smsBesideNccl),
      smsBesideCopyEngines_(smsBesideCopyEngines),
      mergedGather_(mergedGather),
      pushInTurn_(pushInTurn),
      copy_(copy) {
  if (copy_ == OverlapCopy::Nccl) gemm_ = std::make_unique<DeviceGemm>(smsBesideNccl_);
  int least = 0, greatest = 0;
  CCLZ_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  CCLZ_CUDA_CHECK(
      cudaStreamCreateWithPriority(&comm_, cudaStreamNonBlocking, highPriority ? greatest : 0));
  for (cudaEvent_t* e : {&start_, &done_, &last_})
    CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
  CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&status_), sizeof(DeviceStatus)));
  CCLZ_CUDA_CHECK(cudaMemset(status_, 0, sizeof(DeviceStatus)));
}

DeviceOverlap::~DeviceOverlap() {
  if (hasLast_) cudaEventSynchronize(last_);
  for (cudaEvent_t e : ready_) cudaEventDestroy(e);
  for (cudaEvent_t e : pushDone_) cudaEventDestroy(e);
  for (cudaEvent_t e : encoded_) cudaEventDestroy(e);
  for (cudaStream_t s : push_) cudaStreamDestroy(s);
  for (cudaEvent_t e : {start_, done_, last_}) cudaEventDestroy(e);
  for (Area* a : {&gathered_, &frames_, &partials_, &acc_, &scratch_, &serial_}) cudaFree(a->p);
  cudaFree(status_);
  cudaStreamDestroy(comm_);
}

uint8_t* DeviceOverlap::area(Area& a, uint64_t bytes, bool capturing) {
  if (bytes <= a.bytes) return a.p;
  CCLZ_REQUIRE(!capturing, cclzInvalidUsage,
               "the overlapped GEMM's buffers must grow, and nothing is allocated while the "
               "stream is captured into a CUDA graph: make a call of this shape before capturing");
  // Queued work of earlier calls may still use the old buffer.
  if (hasLast_) CCLZ_CUDA_CHECK(cudaEventSynchronize(last_));
  cudaFree(a.p);
  a.p = nullptr, a.bytes = 0;
  CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&a.p), bytes));
  a.bytes = bytes;
  return a.p;
}

// The call's start: the transfer stream after the caller's work (and a direct call after the
// last direct one, whose buffers it reuses), and one event per chunk.
void DeviceOverlap::begin(cudaStream_t stream, int chunks, bool capturing) {
  if (!capturing && hasLast_) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, last_));
  while (static_cast<int>(ready_.size()) < chunks) {
    cudaEvent_t e = nullptr;
    CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    ready_.push_back(e);
  }
  // The timeline's origin before start_, which the transfer stream waits for (not in a capture:
  // its report synchronizes the host).
  if (!capturing) timeline_.start(stream);
  CCLZ_CUDA_CHECK(cudaEventRecord(start_, stream));
  CCLZ_CUDA_CHECK(cudaStreamWaitEvent(comm_, start_));
}

// The caller's stream joins the transfer stream.
void DeviceOverlap::end(cudaStream_t stream, bool capturing) {
  timeline_.close();
  CCLZ_CUDA_CHECK(cudaEventRecord(done_, comm_));
  CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, done_));
  if (!capturing) {
    CCLZ_CUDA_CHECK(cudaEventRecord(last_, stream));
    hasLast_ = true;
    timeline_.report(stream);
  }
}

uint8_t* DeviceOverlap::beginSerial(cudaStream_t stream, uint64_t bytes) {
  const bool capturing = isCapturing(stream);
  uint8_t* scratch = area(serial_, bytes, capturing);
  if (!capturing && hasLast_) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, last_));
  return scratch;
}

void DeviceOverlap::wholeGemm(const GemmArgs& g, cudaStream_t stream) {
  if (!wholeGemm_) wholeGemm_ = std::make_unique<DeviceGemm>(0, /*rowsAlike=*/false);
  wholeGemm_->run(g, stream);
}

void DeviceOverlap::endSerial(cudaStream_t stream) {
  if (isCapturing(stream)) return;
  CCLZ_CUDA_CHECK(cudaEventRecord(last_, stream));
  hasLast_ = true;
}

bool DeviceOverlap::copyEnginesFor(cudaStream_t stream) const {
  CCLZ_REQUIRE(gemm_, cclzInternalError, "the overlapped GEMMs' transfer path was not decided");
  // With auto, a call captured into a CUDA graph takes NCCL's path: a replay would repeat the
  // copy path's call numbers. Every rank captures the same calls, so every rank takes it.
  return useCopyEngines_ && (copy_ != OverlapCopy::Auto || !isCapturing(stream));
}

DeviceWorkspace DeviceOverlap::workspace(const OverlapCall& call, uint64_t elements,
                                         bool capturing) {
  const uint64_t bytes = std::max<uint64_t>(
      256, call.codec->encodeScratchBytes(call.config, call.dtype, elements));
  return DeviceWorkspace{status_, area(scratch_, bytes, capturing), bytes, 0};
}

void DeviceOverlap::allGatherMatmul(Transport& t, const OverlapCall& call, cudaStream_t stream) {
  if (copyEnginesFor(stream)) return allGatherMatmulCe(t, call, stream);
  const bool capturing = isCapturing(stream);
  const int n = t.size(), me = t.rank();
  const uint64_t es = elemBytes(call), elements = call.m * call.k, chunkBytes = elements * es;
  const uint64_t wire = wireBytes(call, elements), outChunk = call.m * call.n * es;
  auto* gathered = static_cast<uint8_t*>(call.gathered);
  if (!gathered) gathered = area(gathered_, n * chunkBytes, capturing);
  uint8_t* frames = call.codec ? area(frames_, n * wire, capturing) : nullptr;
  const DeviceWorkspace ws = call.codec ? workspace(call, elements, capturing) : DeviceWorkspace{};
  begin(stream, n, capturing);

  // The transfer stream: this rank's chunk in place (decoded from its own frame with a codec, so
  // that every rank multiplies the same values), then the ring (across nodes, the two-level
  // plan's routes), each arriving chunk forwarded as it came (a frame is encoded once) and put in
  // place.
  auto land = [&](int chunk) {
    if (call.codec) timeline_.open("decode", chunk, comm_);
    if (call.codec)
      call.codec->decodeDevice(call.config, frames + chunk * wire, wire, call.dtype, elements,
                               gathered + chunk * chunkBytes, ws, comm_);
    CCLZ_CUDA_CHECK(cudaEventRecord(ready_[chunk], comm_));
  };
  timeline_.open(call.codec ? "encode" : "copy", me, comm_);
  if (call.codec)
    call.codec->encodeDevice(call.config, call.dtype, call.a, elements, frames + me * wire,
                             nullptr, ws, comm_);
  else
    CCLZ_CUDA_CHECK(cudaMemcpyAsync(gathered + me * chunkBytes, call.a, chunkBytes,
                                    cudaMemcpyDeviceToDevice, comm_));
  land(me);
  uint8_t* wireBase = call.codec ? frames : gathered;
  std::vector<int> order;  // the chunks in the order of their GEMMs
  if (gathersTwoLevel(call)) {
    // Across nodes, the two-level plan's groups (schedule.h: twoLevelGatherPlan).
    const GatherPlan plan = twoLevelGatherPlan(*call.nodes, me);
    for (const TransferGroup& g : plan.groups) {
      timeline_.open("move", g.recvs.front().chunk, comm_);
      t.groupStart(reinterpret_cast<cclzStream_t>(comm_));
      for (const Transfer& out : g.sends) t.send(wireBase + out.chunk * wire, wire, out.peer);
      for (const Transfer& in : g.recvs)
        t.recv(wireBase + in.chunk * wire, wire, in.peer, nullptr);
      t.groupEnd();
      for (const Transfer& in : g.recvs) land(in.chunk);
    }
    order = plan.compute;
  } else {
    for (int s = 0; s < n; ++s) {
      const Step step = gatherStep(me, n, s);
      order.push_back(step.compute);
      if (s + 1 == n) break;
      timeline_.open("move", step.recvChunk, comm_);
      exchange(t, step.sendTo, wireBase + step.sendChunk * wire, step.recvFrom,
               wireBase + step.recvChunk * wire, wire, comm_);
      land(step.recvChunk);
    }
  }

  // The caller's stream: the GEMMs, this rank's chunk first. Without a codec it multiplies the
  // caller's rows directly and waits for nothing.
  if (mergedGather_ && n > 2) {
    // The own chunk, then every other once all have arrived, in one GEMM over the chunks after
    // this rank's and one over those before it (each a contiguous block of rows).
    const bool direct = !call.codec;
    if (!direct) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, ready_[me]));
    timeline_.open("gemm", me, stream);
    gemm_->run(rowsGemm(call, direct ? call.a : gathered + me * chunkBytes, call.m,
                       static_cast<uint8_t*>(call.c) + me * outChunk),
              stream);
    for (int c = 0; c < n; ++c)
      if (c != me) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, ready_[c]));
    for (const auto& [lo, hi] : {std::pair<int, int>{me + 1, n}, std::pair<int, int>{0, me}}) {
      if (lo >= hi) continue;
      timeline_.open("gemm", lo, stream);
      gemm_->run(rowsGemm(call, gathered + lo * chunkBytes, (hi - lo) * call.m,
                         static_cast<uint8_t*>(call.c) + lo * outChunk),
                stream);
    }
    end(stream, capturing);
    return;
  }
  for (int s = 0; s < n; ++s) {
    const int c = order[s];
    const bool direct = s == 0 && !call.codec;
    if (!direct) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, ready_[c]));
    timeline_.open("gemm", c, stream);
    gemm_->run(rowsGemm(call, direct ? call.a : gathered + c * chunkBytes, call.m,
                       static_cast<uint8_t*>(call.c) + c * outChunk),
              stream);
  }
  end(stream, capturing);
}

void DeviceOverlap::matmulReduceScatter(Transport& t, const OverlapCall& call,
                                        cudaStream_t stream) {
  if (copyEnginesFor(stream)) return matmulReduceScatterCe(t, call, stream);
  if (reducesTwoLevel(call)) return matmulReduceScatterTwoLevel(t, call, stream);
  const bool capturing = isCapturing(stream);
  const int n = t.size(), me = t.rank();
  const uint64_t es = elemBytes(call), outElements = call.m * call.n, partialBytes = outElements * es;
  const uint64_t wire = wireBytes(call, outElements);
  // partials: the GEMM's output of each step; frames: the n partials of this rank's rows as they
  // travel (rank r's at r), plus, with a codec, each step's encoded partial at n + s.
  uint8_t* partials = area(partials_, n * partialBytes, capturing);
  uint8_t* frames = area(frames_, (call.codec ? 2 * n : n) * wire, capturing);
  auto* acc = reinterpret_cast<float*>(area(acc_, outElements * sizeof(float), capturing));
  const DeviceWorkspace ws = call.codec ? workspace(call, outElements, capturing)
                                        : DeviceWorkspace{};
  begin(stream, n, capturing);

  partialGemms(call, partials, n, me, stream);

  // The transfer stream: each partial to its owner as soon as it is computed (encoded once with
  // a codec), and each partial of this rank's rows added to the fp32 sum as it arrives, while
  // the later GEMMs run; this rank's own last, then the sum stored (reduceOrder, the host path's
  // bytes), so that only the own partial's addition follows the last GEMM.
  if (!call.codec) CCLZ_CUDA_CHECK(cudaMemsetAsync(acc, 0, outElements * sizeof(float), comm_));
  auto add = [&](const uint8_t* values, int i) { addPartial(call, acc, values, wire, i, n, ws); };
  for (int s = 0; s < n; ++s) {
    const Step step = reduceScatterStep(me, n, s);
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(comm_, ready_[s]));
    const uint8_t* partial = partials + s * partialBytes;
    uint8_t* encoded = frames + (step.sendTo < 0 ? me : n + s) * wire;
    if (call.codec) {
      timeline_.open("encode", step.compute, comm_);
      call.codec->encodeDevice(call.config, call.dtype, partial, outElements, encoded, nullptr,
                               ws, comm_);
    }
    if (step.sendTo < 0) {  // the last step: this rank's own rows
      timeline_.open("reduce", me, comm_);
      add(call.codec ? encoded : partial, n - 1);
      continue;
    }
    timeline_.open("move", step.compute, comm_);
    exchange(t, step.sendTo, call.codec ? encoded : partial, step.recvFrom,
             frames + step.recvFrom * wire, wire, comm_);
    timeline_.open("reduce", step.recvFrom, comm_);
    add(frames + step.recvFrom * wire, s);  // reduceOrder(me, n, s) == step.recvFrom
  }
  end(stream, capturing);
}

// The direct schedule's partial products (reduceScatterStep), this rank's own last.
void DeviceOverlap::partialGemms(const OverlapCall& call, uint8_t* partials, int n, int me,
                                 cudaStream_t stream) {
  std::vector<int> order;
  for (int s = 0; s < n; ++s) order.push_back(reduceScatterStep(me, n, s).compute);
  partialGemmsInOrder(call, partials, order, stream);
}

// The partial products of the chunks in `order` on the caller's stream, step s's into
// partials + s * its bytes; ready_[s] after each.
void DeviceOverlap::partialGemmsInOrder(const OverlapCall& call, uint8_t* partials,
                                        const std::vector<int>& order, cudaStream_t stream) {
  const uint64_t es = elemBytes(call), partialBytes = call.m * call.n * es;
  for (size_t s = 0; s < order.size(); ++s) {
    timeline_.open("gemm", order[s], stream);
    gemm_->run(rowsGemm(call, static_cast<const uint8_t*>(call.a) + order[s] * call.m * call.k * es,
                       call.m, partials + s * partialBytes),
              stream);
    CCLZ_CUDA_CHECK(cudaEventRecord(ready_[s], stream));
  }
}

// The i-th of n partials (a frame of wire bytes with a codec, else rows) into the fp32 sum on
// the transfer stream; the last stores sum / divisor into call.c. Without a codec acc starts
// zeroed by the caller.
void DeviceOverlap::addPartial(const OverlapCall& call, float* acc, const uint8_t* values,
                               uint64_t wire, int i, int n, const DeviceWorkspace& ws) {
  const uint64_t elements = call.m * call.n;
  const float divisor = call.redOp == cclzAvg ? static_cast<float>(n) : 1.0f;
  const bool last = i == n - 1;
  if (call.codec) {
    call.codec->decodeReduceDevice(call.config, values, wire, call.dtype, elements,
                                   ReduceStep{acc, i == 0, last ? call.c : nullptr, divisor}, ws,
                                   comm_);
    return;
  }
  reduce::accumulateDevice(acc, values, elements, call.dtype, comm_);
  if (last) reduce::storeDevice(acc, elements, divisor, call.dtype, call.c, comm_);
}

cclzResult_t DeviceOverlap::pollError(std::string* message) {
  return takeDecodeError(status_, "an overlapped GEMM's decode", message);
}

}  // namespace cclz::overlap

#endif  // CCLZ_HAVE_CUDA
