// The fused NVLink paths with the frames moved by the copy engines (CCLZ_FUSED=ce;
// fused_nvlink.h; docs/collectives.md, "Fused NVLink paths"). The measured case against the
// kernel-stored frames (fused_nvlink.cpp): there every step of a piece took multiprocessors, and
// an encode beside a decode ran 1.5x as long as alone; here no multiprocessor moves a byte or
// waits for a peer, so the codec's kernels have the GPU to themselves.
//
// A call's frames, every piece of every rank, sit in a PeerWindow (transport/nccl/peer_window.h):
// rank r's frame of piece k at r * rankBytes + k * slot on every rank, so nothing of a call is
// reused within it, and the pieces flow without closing barriers. Streams and steps, piece k:
//   E encode stream: the codec's encode: an all-gather's frame into this rank's own place of its
//      window; a reduce-scatter's frame per destination into a local area;
//   P push stream of peer p: after E(k) (and, for the first piece, once consumed[p] >= 1: p has
//      read this rank's frames of the last call; then consumed[p] = 0), the copy of p's frame
//      into this rank's place of p's window (cudaMemcpyAsync: a copy engine), then arrived[me] =
//      k + 1 in p's window (a stream memory operation, ordered after the copy);
//   D decode stream: after E(k) (the own frame) and arrived[r] >= k + 1 for every peer r (a
//      stream wait on local memory), the frames decoded: every rank's for an all-gather (one
//      kernel), summed in rank order in fp32 for a reduce-scatter.
// After the last piece, D sets its own arrived flags back to 0, then consumed[me] = 1 in every
// peer's window. Every flag's value is the same in every call, so a call captured into a CUDA
// graph replays correctly (the stream memory operations become graph nodes). The frames are the
// pipeline's (plan.pieceElems), so the outputs are its bytes.
#include "collective/fused_nvlink.h"
#include "transport/nccl/nccl_symmetric.h"  // CCLZ_HAVE_NCCL_DEVICE_API where NCCL has it

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codec/device.h"
#include "codec/frame.h"
#include "collective/fused_local.h"
#include "collective/fused_nvlink_kernel.h"
#include "collective/plan.h"
#include "collective/timeline.h"
#include "common/error.h"
#include "common/trace.h"
#include "transport/nccl/nccl_transport.h"
#include "transport/nccl/peer_window.h"

namespace cclz {
namespace {

using fused::isCapturing;
using fused::LocalArea;
using fused::roundUp;

class CopyEngineFused final : public FusedNvlink {
 public:
  explicit CopyEngineFused(NcclTransport& t) : t_(t) {
    // What this rank alone can tell fails the creation, as CCLZ_FUSED=1 without NCCL's device
    // API does; what the window's collective creation finds (not one LSA team: the same answer
    // on every rank) leaves an object that takes no call.
    const std::string why = PeerWindow::unavailableHere(t);
    CCLZ_REQUIRE(why.empty(), cclzNotSupported, "CCLZ_FUSED=ce: " + why);
    try {
      window_ = std::make_unique<PeerWindow>(t);
    } catch (const Error& e) {
      if (e.code() != cclzNotSupported) throw;
      CCLZ_TRACE("fused (copy engines): off, %s", e.what());
    }
    CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&status_), sizeof(DeviceStatus)));
    CCLZ_CUDA_CHECK(cudaMemset(status_, 0, sizeof(DeviceStatus)));
    for (cudaStream_t* st : {&encode_, &decode_})
      CCLZ_CUDA_CHECK(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&start_, &encoded_, &joinEncode_, &done_, &last_})
      CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    for (int p = 0; p < t.size(); ++p) {
      cudaStream_t s = nullptr;
      CCLZ_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
      push_.push_back(s);
      cudaEvent_t e = nullptr;
      CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
      pushed_.push_back(e);
    }
  }
  ~CopyEngineFused() override {
    if (hasLast_ && !lastCaptured_) cudaEventSynchronize(last_);
    for (cudaEvent_t e : {start_, encoded_, joinEncode_, done_, last_}) cudaEventDestroy(e);
    for (cudaEvent_t e : pushed_) cudaEventDestroy(e);
    for (cudaStream_t s : push_) cudaStreamDestroy(s);
    for (cudaStream_t s : {encode_, decode_}) cudaStreamDestroy(s);
    cudaFree(status_);
  }

  void abort() noexcept override {
    if (window_) window_->release();
    CCLZ_TRACE("fused (copy engines): flags released");
  }

  bool takes(const CollArgs& a, const Plan& plan) const override {
    return window_ && (a.op == CollOp::AllGather || a.op == CollOp::ReduceScatter) &&
           plan.use.config.codec == cclzCodecFp8 && a.count > 0 && a.step == nullptr;
  }

  void run(const CollArgs& a, const Plan& plan) override {
    auto stream = reinterpret_cast<cudaStream_t>(a.stream);
    const bool capturing = isCapturing(stream);
    const Codec& codec = *plan.use.codec;
    const cclzCodecConfig_t& config = plan.use.config;
    const int n = t_.size(), me = t_.rank(), dtype = plan.use.dtype;
    const bool gather = a.op == CollOp::AllGather;
    const uint64_t eb = plan.elemBytes, count = a.count, pieceElems = plan.pieceElems;
    const uint64_t pieces = pieceCount(count, pieceElems);
    const uint64_t first = std::min(pieceElems, count), last = count - (pieces - 1) * pieceElems;
    // Output parts that are not 16-byte aligned are decoded into an aligned area and copied out
    // after each piece (as on the kernel path).
    const bool staged = reinterpret_cast<uintptr_t>(a.recv) % 16 != 0 ||
                        (gather && (count * eb) % 16 != 0) ||
                        (pieces > 1 && (pieceElems * eb) % 16 != 0);
    const uint64_t stagedStride = roundUp(first * eb, 16);

    // The window: every rank's frames of every piece (rankBytes a rank). Reserving is collective
    // and the same on every rank (the same call); it grows only where the window is too small,
    // after waiting for the device. The rest is this rank's alone: the encode's scratch, a
    // reduce-scatter's outgoing frames (one per destination and piece) and fp32 accumulator,
    // the staging area.
    const uint64_t slot = frameStride(plan), rankBytes = pieces * slot;
    const uint64_t scratchBytes =
        roundUp(std::max(codec.encodeScratchBytes(config, dtype, first),
                         codec.encodeScratchBytes(config, dtype, last)),
                256);
    const uint64_t outgoingBytes = gather ? 0 : n * rankBytes;
    const uint64_t accBytes = gather ? 0 : roundUp(first * sizeof(float), 256);
    const uint64_t stagingBytes = staged ? (gather ? n : 1) * stagedStride : 0;
    if (!window_->covers(n * rankBytes) || !scratch_.covers(scratchBytes) ||
        !outgoing_.covers(outgoingBytes) || !acc_.covers(accBytes) ||
        !staging_.covers(stagingBytes)) {
      CCLZ_REQUIRE(!capturing, cclzInvalidUsage,
                   "the fused path's window or scratch must grow (the window's registration is "
                   "collective, and nothing is allocated while the stream is captured into a "
                   "CUDA graph): make a call of this size before capturing");
      if (hasLast_ && !lastCaptured_) CCLZ_CUDA_CHECK(cudaEventSynchronize(last_));
      // The same decision on every rank (the same call, the same window so far).
      if (window_->reserve(n * rankBytes)) window_->markConsumed(1);
      scratch_.grow(scratchBytes);
      outgoing_.grow(outgoingBytes);
      acc_.grow(accBytes);
      staging_.grow(stagingBytes);
    }

    // After the caller's work, and a direct call after this communicator's last direct fused
    // call (whose areas it reuses). A captured call waits for none (the runtime refuses a wait on
    // work outside the capture): there the caller's stream orders the calls, as on the kernel
    // path.
    if (!capturing && hasLast_ && !lastCaptured_)
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, last_));
    if (!capturing) timeline_.start(stream);
    CCLZ_CUDA_CHECK(cudaEventRecord(start_, stream));
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(encode_, start_));
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(decode_, start_));
    for (int p = 0; p < n; ++p)
      if (p != me) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(push_[p], start_));

    const Call call{a, plan, slot, rankBytes, staged, stagedStride,
                    DeviceWorkspace{status_, scratch_.get(), scratchBytes, 0}};
    for (uint64_t k = 0; k < pieces; ++k) {
      const Span piece = pieceOf(Span{0, count}, pieceElems, k);
      const auto arrived = static_cast<uint32_t>(k + 1);  // arrived[r]'s value for the piece
      timeline_.open(Stage::Encode, static_cast<int>(k), encode_);
      encode(call, k, piece);
      CCLZ_CUDA_CHECK(cudaEventRecord(encoded_, encode_));
      push(call, k, piece, arrived);
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(decode_, encoded_));
      for (int r = 0; r < n; ++r)
        if (r != me) window_->waitArrived(decode_, r, arrived);
      timeline_.open(Stage::Decode, static_cast<int>(k), decode_);
      if (gather)
        decodeGather(call, k, piece);
      else
        decodeReduceScatter(call, k, piece);
    }
    timeline_.close();
    // Every frame this rank was sent has been read: its flags back to 0, then the peers may
    // write their next call's (they wait for consumed >= 1 before their first copy).
    for (int r = 0; r < n; ++r)
      if (r != me) window_->setOwnArrived(decode_, r, 0);
    for (int r = 0; r < n; ++r)
      if (r != me) window_->setConsumed(decode_, r, 1);

    // The caller's stream joins every stream of the call.
    CCLZ_CUDA_CHECK(cudaEventRecord(joinEncode_, encode_));
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, joinEncode_));
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      CCLZ_CUDA_CHECK(cudaEventRecord(pushed_[p], push_[p]));
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, pushed_[p]));
    }
    CCLZ_CUDA_CHECK(cudaEventRecord(done_, decode_));
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, done_));
    CCLZ_CUDA_CHECK(cudaEventRecord(last_, stream));
    hasLast_ = true, lastCaptured_ = capturing;
    if (!capturing) timeline_.report(stream);
    CCLZ_TRACE("fused (copy engines): %s of %llu values per rank, %llu pieces, %s%s",
               collOpName(a.op), static_cast<unsigned long long>(count),
               static_cast<unsigned long long>(pieces),
               staged ? "staged output" : "decoded in place", capturing ? ", captured" : "");
  }

  cclzResult_t pollError(std::string* message) override {
    return takeDecodeError(status_, "the fused path's decode", message);
  }

 private:
  // What every piece of a call shares.
  struct Call {
    const CollArgs& a;
    const Plan& plan;
    uint64_t slot;       // bytes between consecutive pieces' frames
    uint64_t rankBytes;  // bytes of one rank's frames, every piece
    bool staged;
    uint64_t stagedStride;
    DeviceWorkspace ws;
  };

  // Where rank r's frame of piece k sits in a window (this rank's, or a peer's as mapped here).
  static uint64_t placeOf(const Call& c, int r, uint64_t k) {
    return r * c.rankBytes + k * c.slot;
  }
  uint8_t* outgoing(const Call& c, int d, uint64_t k) const {
    return outgoing_.get() + placeOf(c, d, k);
  }
  static uint64_t frameBytes(const Call& c, const Span& piece) {
    return c.plan.use.codec->maxEncodedBytes(c.plan.use.config, c.plan.use.dtype, piece.count);
  }

  // E(k): an all-gather's frame into this rank's own place of its window; a reduce-scatter's
  // frame per destination (piece k of each destination's chunk) into the outgoing area.
  void encode(const Call& c, uint64_t k, const Span& piece) {
    const Codec& codec = *c.plan.use.codec;
    const cclzCodecConfig_t& config = c.plan.use.config;
    const uint64_t eb = c.plan.elemBytes;
    const auto* send = static_cast<const uint8_t*>(c.a.send);
    if (c.a.op == CollOp::AllGather) {
      codec.encodeDevice(config, c.plan.use.dtype, send + piece.offset * eb, piece.count,
                         window_->localData() + placeOf(c, t_.rank(), k), nullptr, c.ws, encode_);
      return;
    }
    for (int d = 0; d < t_.size(); ++d) {
      const Span block = pieceOf(c.plan.chunks[d], c.plan.pieceElems, k);
      codec.encodeDevice(config, c.plan.use.dtype,
                         send + (c.plan.chunks[d].offset + block.offset) * eb, block.count,
                         outgoing(c, d, k), nullptr, c.ws, encode_);
    }
  }

  // P(k): each peer's frame into this rank's place of the peer's window, then its flag. The
  // first piece's copy waits until the peer has read the previous call's frames.
  void push(const Call& c, uint64_t k, const Span& piece, uint32_t arrived) {
    const int me = t_.rank();
    const uint64_t bytes = frameBytes(c, piece);
    bool spanned = false;
    for (int p = 0; p < t_.size(); ++p) {
      if (p == me) continue;
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(push_[p], encoded_));
      if (k == 0) {
        window_->waitConsumed(push_[p], p, 1);
        window_->setOwnConsumed(push_[p], p, 0);
      }
      // The timeline's move span: the first peer's copy and flag (the others run beside it).
      if (!spanned) timeline_.open(Stage::Move, static_cast<int>(k), push_[p]), spanned = true;
      const uint8_t* frame = c.a.op == CollOp::AllGather
                                 ? window_->localData() + placeOf(c, me, k)
                                 : outgoing(c, p, k);
      CCLZ_CUDA_CHECK(cudaMemcpyAsync(window_->peerData(p) + placeOf(c, me, k), frame, bytes,
                                      cudaMemcpyDeviceToDevice, push_[p]));
      window_->setArrived(push_[p], p, arrived);
    }
  }

  // All-gather D(k): the n frames of piece k, one rankBytes apart, decoded into each rank's part
  // of the output (the kernel path's decode kernel).
  void decodeGather(const Call& c, uint64_t k, const Span& piece) {
    const int n = t_.size();
    const uint64_t eb = c.plan.elemBytes;
    uint8_t* out = static_cast<uint8_t*>(c.a.recv) + piece.offset * eb;
    launchFusedDecode(c.plan.use.dtype, fusedDecodeGrid(piece.count), decode_,
                      window_->localData() + k * c.slot, c.rankBytes, frameBytes(c, piece),
                      piece.count, t_.rank(), n, c.staged ? staging_.get() : out,
                      c.staged ? c.stagedStride : c.a.count * eb, status_);
    if (c.staged)
      fused::copyStagedOut(out, c.a.count * eb, staging_.get(), c.stagedStride,
                           piece.count * eb, n, decode_);
  }

  // Reduce-scatter D(k): the owner sums the n frames of its piece in rank order in fp32 (its own
  // from the outgoing area) and stores sum / divisor in the dtype: the pipeline's bytes.
  void decodeReduceScatter(const Call& c, uint64_t k, const Span& piece) {
    const Codec& codec = *c.plan.use.codec;
    const int n = t_.size(), me = t_.rank();
    const uint64_t eb = c.plan.elemBytes;
    uint8_t* out = static_cast<uint8_t*>(c.a.recv) + piece.offset * eb;
    const float divisor = c.a.redOp == cclzAvg ? static_cast<float>(n) : 1.0f;
    auto* acc = reinterpret_cast<float*>(acc_.get());
    for (int r = 0; r < n; ++r) {  // ranks in order, so that every rank and path sums alike
      const uint8_t* frame =
          r == me ? outgoing(c, me, k) : window_->localData() + placeOf(c, r, k);
      const ReduceStep step{acc, r == 0, r == n - 1 ? (c.staged ? staging_.get() : out) : nullptr,
                            divisor};
      codec.decodeReduceDevice(c.plan.use.config, frame, c.slot, c.plan.use.dtype, piece.count,
                               step, c.ws, decode_);
    }
    if (c.staged)
      CCLZ_CUDA_CHECK(cudaMemcpyAsync(out, staging_.get(), piece.count * eb,
                                      cudaMemcpyDeviceToDevice, decode_));
  }

  NcclTransport& t_;
  std::unique_ptr<PeerWindow> window_;  // null where the ranks are not all in one LSA team
  LocalArea scratch_, outgoing_, acc_, staging_;
  DeviceStatus* status_ = nullptr;
  cudaStream_t encode_ = nullptr, decode_ = nullptr;
  std::vector<cudaStream_t> push_;  // one per peer (this rank's own is not used)
  std::vector<cudaEvent_t> pushed_;
  cudaEvent_t start_ = nullptr, encoded_ = nullptr, joinEncode_ = nullptr, done_ = nullptr;
  cudaEvent_t last_ = nullptr;  // recorded after the last call's work
  bool hasLast_ = false, lastCaptured_ = false;
  // CCLZ_TIMELINE=1: each piece's encode, move (the first peer's copy) and decode, printed after
  // the call.
  Timeline timeline_;
};

}  // namespace

std::unique_ptr<FusedNvlink> makeFusedCopyEngines(NcclTransport& transport) {
  return std::make_unique<CopyEngineFused>(transport);
}

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL_DEVICE_API
