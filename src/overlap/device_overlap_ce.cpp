// The overlapped GEMMs with copy-engine transfers (CCLZ_OVERLAP_COPY=ce; docs/overlap.md,
// "Copy-engine transfers"): each chunk (all-gather) or partial (reduce-scatter) is copied
// straight into its destination's peer window (transport/nccl/peer_window.h) by cudaMemcpyAsync, one
// push stream per peer, and announced by a flag written after the copy; the consumer waits for
// the flag with a stream memory operation. No NCCL kernel and no transfer kernel runs beside the
// GEMMs; with a codec only its encodes and decodes do (on the transfer stream). The chunks move
// all at once rather than around a ring: each GEMM waits only for its own chunk.
//
// Streams: the caller's (the GEMMs), the transfer stream comm_ (encodes, decodes, the sums, the
// closing flags), one push stream per peer (a copy and its flag). Every flag carries the call's
// number, the same on every rank, so a call never mistakes an earlier call's flag for its own.
#ifdef CCLZ_HAVE_CUDA

#include "overlap/device_overlap.h"

#include "collective/device_kernels.h"
#include "common/error.h"
#include "common/trace.h"
#include "overlap/device_overlap_parts.h"
#include "transport/nccl/peer_window.h"
#include "overlap/schedule.h"
#include "transport/nccl/nccl_transport.h"

namespace cclz::overlap {

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

namespace {

uint64_t roundUp256(uint64_t v) { return (v + 255) / 256 * 256; }

void refuseCapture(cudaStream_t stream) {
  CCLZ_REQUIRE(!isCapturing(stream), cclzNotSupported,
               "CCLZ_OVERLAP_COPY=ce: an overlapped call cannot be captured into a CUDA graph (its "
               "flags carry the call's number, which a replay would repeat)");
}

}  // namespace

std::string DeviceOverlap::copyEnginesHere(Transport& t, cudaStream_t stream) const {
  if (t.size() == 1) return "a rank alone has nothing to move";
  if (isCapturing(stream))
    return "the first overlapped call is captured into a CUDA graph (the copy engines' window "
           "cannot be made in a capture)";
  auto* nccl = dynamic_cast<NcclTransport*>(&t);
  if (!nccl) return "the copy engines are for NCCL communicators";
  return PeerWindow::unavailableHere(*nccl);
}

void DeviceOverlap::decideCopy(Transport& t, bool everyRankCan, const std::string& whyNotHere) {
  bool copyEngines = false;
  if (t.size() > 1 && everyRankCan) {
    try {
      window_ = std::make_unique<PeerWindow>(dynamic_cast<NcclTransport&>(t));
      copyEngines = true;
    } catch (const Error& e) {
      // Not one LSA team: the same answer on every rank, so every rank falls back alike.
      if (e.code() != cclzNotSupported || copy_ != OverlapCopy::Auto) throw;
      CCLZ_TRACE("overlap: NCCL's transfers (%s)", e.what());
    }
  } else if (t.size() > 1) {
    CCLZ_REQUIRE(copy_ == OverlapCopy::Auto, cclzNotSupported,
                 "CCLZ_OVERLAP_COPY=ce: " +
                     (whyNotHere.empty() ? std::string("another rank cannot use the copy engines")
                                         : whyNotHere));
    CCLZ_TRACE("overlap: NCCL's transfers (%s)",
               whyNotHere.empty() ? "another rank cannot use the copy engines"
                                  : whyNotHere.c_str());
  }
  useCopyEngines_ = copyEngines;
  gemm_ = std::make_unique<DeviceGemm>(copyEngines ? smsBesideCopyEngines_ : smsBesideNccl_);
}

void DeviceOverlap::startPushes(int n) {
  while (static_cast<int>(push_.size()) < n) {
    cudaStream_t s = nullptr;
    CCLZ_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    push_.push_back(s);
    cudaEvent_t e = nullptr;
    CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    pushDone_.push_back(e);
  }
  while (static_cast<int>(encoded_.size()) < n) {
    cudaEvent_t e = nullptr;
    CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    encoded_.push_back(e);
  }
  for (int p = 0; p < n; ++p) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(push_[p], start_));
}

void DeviceOverlap::joinPushes() {
  for (size_t p = 0; p < push_.size(); ++p) {
    CCLZ_CUDA_CHECK(cudaEventRecord(pushDone_[p], push_[p]));
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(comm_, pushDone_[p]));
  }
}

// All-gather + GEMM. Window slot r holds rank r's chunk (its rows, or its frame). This rank's
// chunk goes to every peer at once, each copy after the peer has consumed the previous call's;
// the GEMMs run this rank's chunk first, then the others in ring order, each after its flag
// (through the transfer stream's decode with a codec).
void DeviceOverlap::allGatherMatmulCe(Transport& t, const OverlapCall& call,
                                      cudaStream_t stream) {
  refuseCapture(stream);
  const int n = t.size(), me = t.rank();
  const uint64_t es = elemBytes(call), elements = call.m * call.k, chunkBytes = elements * es;
  const uint64_t wire = wireBytes(call, elements), slot = roundUp256(wire);
  const uint64_t outChunk = call.m * call.n * es;
  PeerWindow& w = *window_;
  w.reserve(n * slot);
  const uint32_t epoch = w.nextEpoch();
  uint8_t* window = w.localData();
  // Rows to multiply with a codec (decoded), or to return without one (call.gathered).
  auto* gathered = static_cast<uint8_t*>(call.gathered);
  if (!gathered && call.codec) gathered = area(gathered_, n * chunkBytes, false);
  const DeviceWorkspace ws = call.codec ? workspace(call, elements, false) : DeviceWorkspace{};
  begin(stream, n, false);
  startPushes(n);

  // This rank's chunk: encoded once into its own slot (with a codec), then pushed.
  const uint8_t* own = static_cast<const uint8_t*>(call.a);
  if (call.codec) {
    timeline_.open("encode", me, comm_);
    call.codec->encodeDevice(call.config, call.dtype, call.a, elements, window + me * slot,
                             nullptr, ws, comm_);
    CCLZ_CUDA_CHECK(cudaEventRecord(encoded_[me], comm_));
    own = window + me * slot;
  }
  // The peers in the order they multiply this chunk (gatherStep: rank me + i at its step i), each
  // on a stream of its own, or all on the first one's in turn (pushInTurn_).
  for (int i = 1; i < n; ++i) {
    const int p = (me + i) % n;
    cudaStream_t s = push_[pushInTurn_ ? (me + 1) % n : p];
    if (call.codec && (i == 1 || !pushInTurn_))
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(s, encoded_[me]));
    w.waitConsumed(s, p, epoch - 1);
    CCLZ_CUDA_CHECK(
        cudaMemcpyAsync(w.peerData(p) + me * slot, own, wire, cudaMemcpyDeviceToDevice, s));
    w.setArrived(s, p, epoch);
  }

  // The transfer stream: each chunk in place as it arrives (decoded, or copied out where the
  // caller asked for the gathered rows), in the GEMMs' order.
  for (int s = 0; s < n; ++s) {
    const int c = gatherStep(me, n, s).compute;
    if (c != me) w.waitArrived(comm_, c, epoch);
    if (call.codec) {
      timeline_.open("decode", c, comm_);
      call.codec->decodeDevice(call.config, window + c * slot, wire, call.dtype, elements,
                               gathered + c * chunkBytes, ws, comm_);
    } else if (gathered) {
      timeline_.open("copy", c, comm_);
      CCLZ_CUDA_CHECK(cudaMemcpyAsync(gathered + c * chunkBytes, c == me ? own : window + c * slot,
                                      chunkBytes, cudaMemcpyDeviceToDevice, comm_));
    }
    CCLZ_CUDA_CHECK(cudaEventRecord(ready_[c], comm_));
  }

  // The caller's stream: the GEMMs. Without a codec they read the rows where they landed, the
  // own chunk from the caller's input.
  for (int s = 0; s < n; ++s) {
    const int c = gatherStep(me, n, s).compute;
    const uint8_t* rows = nullptr;
    if (call.codec) {
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, ready_[c]));
      rows = gathered + c * chunkBytes;
    } else if (c == me) {
      rows = own;
    } else {
      w.waitArrived(stream, c, epoch);
      rows = window + c * slot;
    }
    timeline_.open("gemm", c, stream);
    gemm_->run(rowsGemm(call, rows, call.m, static_cast<uint8_t*>(call.c) + c * outChunk), stream);
  }

  // Every read of the window is done once the GEMMs and the transfer stream are: then each
  // peer may write its next call's chunk. (ready_[me] is free again: its wait is queued.)
  CCLZ_CUDA_CHECK(cudaEventRecord(ready_[me], stream));
  CCLZ_CUDA_CHECK(cudaStreamWaitEvent(comm_, ready_[me]));
  for (int p = 0; p < n; ++p)
    if (p != me) w.setConsumed(comm_, p, epoch);
  joinPushes();
  end(stream, false);
}

// GEMM + reduce-scatter. Window slot r holds rank r's partial of this rank's rows. Step s's
// partial (the own rows last) goes to its owner as soon as its GEMM is done (encoded once with a
// codec); the transfer stream adds each arriving partial to the fp32 sum in reduceOrder, the own
// last, as the transport path does: the same bytes.
void DeviceOverlap::matmulReduceScatterCe(Transport& t, const OverlapCall& call,
                                          cudaStream_t stream) {
  refuseCapture(stream);
  const int n = t.size(), me = t.rank();
  const uint64_t es = elemBytes(call), outElements = call.m * call.n;
  const uint64_t partialBytes = outElements * es;
  const uint64_t wire = wireBytes(call, outElements), slot = roundUp256(wire);
  PeerWindow& w = *window_;
  w.reserve(n * slot);
  const uint32_t epoch = w.nextEpoch();
  uint8_t* window = w.localData();
  uint8_t* partials = area(partials_, n * partialBytes, false);
  uint8_t* frames = call.codec ? area(frames_, n * slot, false) : nullptr;
  auto* acc = reinterpret_cast<float*>(area(acc_, outElements * sizeof(float), false));
  const DeviceWorkspace ws = call.codec ? workspace(call, outElements, false) : DeviceWorkspace{};
  begin(stream, n, false);
  startPushes(n);

  partialGemms(call, partials, n, me, stream);

  if (!call.codec) CCLZ_CUDA_CHECK(cudaMemsetAsync(acc, 0, outElements * sizeof(float), comm_));
  auto add = [&](const uint8_t* values, int i) { addPartial(call, acc, values, wire, i, n, ws); };
  // Step s: its partial out (encoded on the transfer stream first, with a codec), then the
  // partial that arrives at step s added. At every rank the step's encode is queued before its
  // wait, so no two ranks' transfer streams wait for each other.
  for (int s = 0; s < n; ++s) {
    const Step step = reduceScatterStep(me, n, s);
    const uint8_t* partial = partials + s * partialBytes;
    const uint8_t* out = partial;
    if (call.codec) {
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(comm_, ready_[s]));
      timeline_.open("encode", step.compute, comm_);
      call.codec->encodeDevice(call.config, call.dtype, partial, outElements, frames + s * slot,
                               nullptr, ws, comm_);
      CCLZ_CUDA_CHECK(cudaEventRecord(encoded_[s], comm_));
      out = frames + s * slot;
    }
    if (step.sendTo < 0) {  // the last step: this rank's own rows
      if (!call.codec) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(comm_, ready_[s]));
      timeline_.open("reduce", me, comm_);
      add(out, n - 1);
      continue;
    }
    cudaStream_t push = push_[step.sendTo];
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(push, call.codec ? encoded_[s] : ready_[s]));
    w.waitConsumed(push, step.sendTo, epoch - 1);
    CCLZ_CUDA_CHECK(
        cudaMemcpyAsync(w.peerData(step.sendTo) + me * slot, out, wire, cudaMemcpyDeviceToDevice,
                        push));
    w.setArrived(push, step.sendTo, epoch);
    w.waitArrived(comm_, step.recvFrom, epoch);
    timeline_.open("reduce", step.recvFrom, comm_);
    add(window + step.recvFrom * slot, s);  // reduceOrder(me, n, s) == step.recvFrom
  }
  for (int p = 0; p < n; ++p)
    if (p != me) w.setConsumed(comm_, p, epoch);
  joinPushes();
  end(stream, false);
}

void DeviceOverlap::abort() noexcept {
  if (window_) window_->release();
}

#else  // no NCCL device API

void DeviceOverlap::abort() noexcept {}

std::string DeviceOverlap::copyEnginesHere(Transport& t, cudaStream_t) const {
  if (t.size() == 1) return "a rank alone has nothing to move";
  return "the copy engines need NCCL's device API (NCCL 2.28 or later at build time)";
}
void DeviceOverlap::decideCopy(Transport& t, bool, const std::string& whyNotHere) {
  CCLZ_REQUIRE(t.size() == 1 || copy_ == OverlapCopy::Auto, cclzNotSupported,
               "CCLZ_OVERLAP_COPY=ce: " + whyNotHere);
  useCopyEngines_ = false;
  gemm_ = std::make_unique<DeviceGemm>(smsBesideNccl_);
}
void DeviceOverlap::startPushes(int) {}
void DeviceOverlap::joinPushes() {}
void DeviceOverlap::allGatherMatmulCe(Transport&, const OverlapCall&, cudaStream_t) {}
void DeviceOverlap::matmulReduceScatterCe(Transport&, const OverlapCall&, cudaStream_t) {}

#endif  // CCLZ_HAVE_NCCL_DEVICE_API

}  // namespace cclz::overlap

#endif  // CCLZ_HAVE_CUDA
