// The fused NVLink paths of the fp8 codec (fused_nvlink.h; docs/collectives.md, "Fused NVLink
// paths"). Piece k takes slot set k % kSlotSets of the window and runs in four steps, each on a
// stream of its own so that the steps of consecutive pieces overlap (E(k+1) and P(k+1) while
// D(k) decodes):
//   E encode stream: the codec's own encode (Codec::encodeDevice: its sampling kernels and its
//      encode kernel): an all-gather's one frame into this rank's own slot of its window; a
//      reduce-scatter's frame per destination into a local area. The host path's bytes;
//   P push stream: pushFrameKernel stores peer d's frame into slot `me` of peer d's window over
//      NVLink, then meets the peers at an LSA barrier per CTA: after it, every peer's frame of
//      the piece is in this rank's window. With direct_ (CCLZ_FUSED=direct) E encodes each
//      peer's frame straight into that slot (an all-gather's one frame into every peer's, a batch
//      of n encodes), and P is one CTA's barrier;
//   D decode stream: the frames decoded from local memory: decodeFramesKernel for the all-gather
//      (its own frame after E, while P pushes it, on the SMs that P leaves; the peers' after P);
//      the codec's decode-and-reduce steps in rank order for the reduce-scatter;
//   C decode stream, after D: closeKernel, one CTA's LSA barrier: after it no peer still reads
//      the slot set, so piece k + kSlotSets may be pushed into it.
// Events order them: P(k) after E(k) and C(k - kSlotSets); D(k) after P(k) (an all-gather's own
// frame: after E(k)); E(k) after D(k - kSlotSets) (which read what E overwrites). Only P and C
// wait for peers, and they never fill the GPU (kFusedPushCtas CTAs, one CTA), so the encodes and
// decodes that peers wait for always find room to run. The encode stays its own launches because
// its choices (row length, smoothing) are made from the whole frame's data before any value is
// written: a grid-wide step that a kernel cannot take without a grid sync. The pieces are the
// path's own (fusedPieceBytes) unless CCLZ_PIECE_BYTES sets them; the frames and the outputs
// are the same bytes as the pipeline's with the same pieces.
#include "collective/fused_nvlink.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "collective/fused_local.h"
#include "collective/plan.h"
#include "collective/timeline.h"
#include "common/error.h"
#include "common/trace.h"
#include "transport/nccl/nccl_symmetric.h"
#include "transport/nccl/nccl_transport.h"

#ifdef CCLZ_HAVE_NCCL_DEVICE_API
#include "codec/device.h"
#include "codec/frame.h"
#include "collective/fused_nvlink_kernel.h"
#include "transport/nccl/peer_window.h"
#endif

namespace cclz {

#ifdef CCLZ_HAVE_NCCL_DEVICE_API
namespace {

using fused::isCapturing;
using fused::LocalArea;
using fused::roundUp;

class NcclFusedNvlink final : public FusedNvlink {
 public:
  NcclFusedNvlink(NcclTransport& t, uint64_t pieceBytesSetting, bool direct)
      : t_(t),
        symmetric_(t.commHandle(), kFusedBarriers),
        pieceBytesSetting_(pieceBytesSetting),
        direct_(direct) {
    if (!symmetric_.wholeTeam())
      CCLZ_TRACE("fused: off, the LSA team holds %d of %d ranks (not all on NVLink)",
                 symmetric_.lsaSize(), t.size());
    CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&status_), sizeof(DeviceStatus)));
    CCLZ_CUDA_CHECK(cudaMemset(status_, 0, sizeof(DeviceStatus)));
    CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(&last_, cudaEventDisableTiming));
    for (cudaStream_t* st : {&encode_, &push_, &decode_})
      CCLZ_CUDA_CHECK(cudaStreamCreateWithFlags(st, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&start_, &joinEncode_, &joinPush_, &done_})
      CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    for (int k = 0; k < kSlotSets; ++k)
      for (cudaEvent_t* e : {&encoded_[k], &pushed_[k], &decoded_[k], &closed_[k]})
        CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    void* flag = nullptr;
    CCLZ_CUDA_CHECK(cudaHostAlloc(&flag, sizeof(uint32_t), cudaHostAllocMapped));
    abortFlag_ = static_cast<volatile uint32_t*>(flag);
    *abortFlag_ = 0;
    void* onDevice = nullptr;
    CCLZ_CUDA_CHECK(cudaHostGetDevicePointer(&onDevice, flag, 0));
    abortFlagDevice_ = static_cast<const volatile uint32_t*>(onDevice);
  }
  ~NcclFusedNvlink() override {
    if (hasLast_ && !lastCaptured_) cudaEventSynchronize(last_);
    cudaEventDestroy(last_);
    for (cudaEvent_t e : {start_, joinEncode_, joinPush_, done_}) cudaEventDestroy(e);
    for (int k = 0; k < kSlotSets; ++k)
      for (cudaEvent_t e : {encoded_[k], pushed_[k], decoded_[k], closed_[k]}) cudaEventDestroy(e);
    for (cudaStream_t st : {encode_, push_, decode_}) cudaStreamDestroy(st);
    cudaFree(status_);
    cudaFreeHost(const_cast<uint32_t*>(abortFlag_));
  }

  void abort() noexcept override {
    if (abortFlag_) *abortFlag_ = 1;
    CCLZ_TRACE("fused: abort flag set");
  }

  bool takes(const CollArgs& a, const Plan& plan) const override {
    const int codec = plan.use.config.codec;
    const bool fp8 =
        codec == cclzCodecFp8 && (a.op == CollOp::AllGather || a.op == CollOp::ReduceScatter);
    const bool lossless = codec == cclzCodecLossless && a.op == CollOp::AllGather;
    return symmetric_.wholeTeam() && (fp8 || lossless) && a.count > 0 && a.step == nullptr;
  }

  void run(const CollArgs& a, const Plan& asked) override {
    // The pieces: this path's own (fusedPieceBytes: the whole block, up to a cap) unless
    // CCLZ_PIECE_BYTES sets them, so that with it set the frames are the pipeline's.
    Plan plan = asked;
    uint64_t largest = 0;
    for (const Span& c : plan.chunks) largest = std::max(largest, c.count);
    plan.pieceElems = wholeUnits(
        std::max<uint64_t>(1, fusedPieceBytes(pieceBytesSetting_, largest * plan.elemBytes) /
                                  plan.elemBytes),
        plan.use.codec->pieceAlignment(plan.use.config), largest);
    auto stream = reinterpret_cast<cudaStream_t>(a.stream);
    const bool capturing = isCapturing(stream);
    const Codec& codec = *plan.use.codec;
    const cclzCodecConfig_t& config = plan.use.config;
    const int n = t_.size(), dtype = plan.use.dtype;
    const bool gather = a.op == CollOp::AllGather;
    const uint64_t eb = plan.elemBytes, count = a.count, pieceElems = plan.pieceElems;
    const uint64_t pieces = pieceCount(count, pieceElems);
    const uint64_t first = std::min(pieceElems, count), last = count - (pieces - 1) * pieceElems;
    // Output parts that are not 16-byte aligned (a rank's part, or a piece, at an odd offset)
    // are decoded into an aligned area and copied out after each piece.
    const bool staged = reinterpret_cast<uintptr_t>(a.recv) % 16 != 0 ||
                        (gather && (count * eb) % 16 != 0) ||
                        (pieces > 1 && (pieceElems * eb) % 16 != 0);
    const uint64_t stagedStride = roundUp(first * eb, 16);

    // The window: kSlotSets sets of one frame slot per rank, slot r of set k at
    // (k * n + r) * slot on every rank (the same call), which rank r's push fills. Growing it is
    // collective, and the old one may still be written by the peers' last pushes until this
    // rank's own last call has finished (its closing barriers): the host waits for that first.
    // The rest is this rank's alone: the encode's scratch (one batch of encodes at a time, on the
    // encode stream), a reduce-scatter's outgoing frames (one per destination, per slot set) and
    // fp32 accumulator (none where the codec sums in one pass), the staging area (one decode at a
    // time, on the decode stream).
    const uint64_t slot = frameStride(plan);
    const uint64_t setBytes = n * slot;
    const uint64_t scratchBytes =
        roundUp(std::max(codec.encodeBlocksScratchBytes(config, dtype, first, n),
                         codec.encodeBlocksScratchBytes(config, dtype, last, n)),
                256);
    const uint64_t outgoingBytes = gather ? 0 : kSlotSets * setBytes;
    const bool onePass = codec.sumsInOnePass(config, n);  // the sum needs no accumulator
    const uint64_t accBytes = gather || onePass ? 0 : roundUp(first * sizeof(float), 256);
    const uint64_t stagingBytes = staged ? (gather ? n : 1) * stagedStride : 0;
    if (kSlotSets * setBytes > symmetric_.windowBytes() || !scratch_.covers(scratchBytes) ||
        !outgoing_.covers(outgoingBytes) || !acc_.covers(accBytes) ||
        !staging_.covers(stagingBytes)) {
      CCLZ_REQUIRE(!capturing, cclzInvalidUsage,
                   "the fused path's window or scratch must grow (the window's registration is "
                   "collective, and nothing is allocated while the stream is captured into a "
                   "CUDA graph): make a call of this size before capturing");
      if (hasLast_ && !lastCaptured_) CCLZ_CUDA_CHECK(cudaEventSynchronize(last_));
      symmetric_.growWindow(kSlotSets * setBytes);
      // The peers' windows as mapped here, for encodes that store into them (direct_).
      if (direct_) peerPointers(symmetric_.window(), n, &peers_);
      scratch_.grow(scratchBytes);
      outgoing_.grow(outgoingBytes);
      acc_.grow(accBytes);
      staging_.grow(stagingBytes);
    }

    // Calls on different streams share the slots: a direct call waits for the last direct one.
    // A captured call waits for none (the runtime refuses a captured call's wait on work outside
    // its capture, and an event last recorded in another capture), and a direct call for no
    // event recorded in a capture: there the caller's stream orders the calls, as for the
    // engine (docs/collectives.md, "CUDA graphs").
    if (!capturing && hasLast_ && !lastCaptured_)
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, last_));
    // The timeline's origin before start_, which the other streams wait for (not in a capture:
    // its report waits on the host).
    if (!capturing) timeline_.start(stream);
    CCLZ_CUDA_CHECK(cudaEventRecord(start_, stream));
    for (cudaStream_t st : {encode_, push_, decode_})
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(st, start_));

    const Step step{a, plan, slot, setBytes, staged, stagedStride,
                    DeviceWorkspace{status_, scratch_.get(), scratchBytes, 0}};
    for (uint64_t k = 0; k < pieces; ++k) {
      const Span piece = pieceOf(Span{0, count}, pieceElems, k);
      const int set = static_cast<int>(k % kSlotSets);
      const bool reused = k >= kSlotSets;  // the set held piece k - kSlotSets of this call
      const bool stores = direct_;         // E(k) stores the frames into the peers' windows
      // E(k): after D(k - kSlotSets), which read this rank's own slot (or outgoing frames); where
      // it stores into the peers' windows, after C(k - kSlotSets) too: every peer has decoded
      // that piece from the set.
      if (reused) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(encode_, decoded_[set]));
      if (reused && stores) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(encode_, closed_[set]));
      timeline_.open(Stage::Encode, set, encode_);
      if (gather)
        encodeGather(step, set, piece);
      else
        encodeReduceScatter(step, set, k);
      CCLZ_CUDA_CHECK(cudaEventRecord(encoded_[set], encode_));
      // P(k): after E(k), and after C(k - kSlotSets): every peer has decoded that piece.
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(push_, encoded_[set]));
      if (reused) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(push_, closed_[set]));
      timeline_.open(Stage::Move, set, push_);
      if (stores)
        launchFusedArrival(push_, symmetric_.devComm(), abortFlagDevice_);
      else
        push(step, set, piece, gather);
      CCLZ_CUDA_CHECK(cudaEventRecord(pushed_[set], push_));
      // An fp8 all-gather's own frame: decoded after E(k), while P(k) pushes it (on fewer SMs, so
      // that the push CTAs find room beside it) or waits for the peers' encodes. (The lossless
      // decoder takes the whole GPU: its frames all wait for P.)
      const bool ownBeside = gather && config.codec == cclzCodecFp8;
      if (ownBeside) {
        CCLZ_CUDA_CHECK(cudaStreamWaitEvent(decode_, encoded_[set]));
        timeline_.open("decode own", set, decode_);
        decodeGather(
            step, set, piece, FrameRange{0, 1},
            stores ? fusedDecodeGrid(piece.count) : fusedDecodeGridBesidePush(piece.count));
      }
      // D(k) and C(k): after P(k), whose barrier saw every peer's frame arrive.
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(decode_, pushed_[set]));
      timeline_.open(Stage::Decode, set, decode_);
      if (gather)
        decodeGather(step, set, piece, FrameRange{ownBeside ? 1 : 0, n},
                     fusedDecodeGrid(piece.count));
      else
        decodeReduceScatter(step, set, piece);
      CCLZ_CUDA_CHECK(cudaEventRecord(decoded_[set], decode_));
      launchFusedClose(decode_, symmetric_.devComm(), abortFlagDevice_);
      CCLZ_CUDA_CHECK(cudaEventRecord(closed_[set], decode_));
    }
    // The caller's stream joins all three (a capture needs every stream it forked joined).
    timeline_.close();
    CCLZ_CUDA_CHECK(cudaEventRecord(joinEncode_, encode_));
    CCLZ_CUDA_CHECK(cudaEventRecord(joinPush_, push_));
    CCLZ_CUDA_CHECK(cudaEventRecord(done_, decode_));
    for (cudaEvent_t e : {joinEncode_, joinPush_, done_})
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, e));
    CCLZ_CUDA_CHECK(cudaEventRecord(last_, stream));
    hasLast_ = true, lastCaptured_ = capturing;
    timeline_.report(stream);
    CCLZ_TRACE("fused: %s of %llu values per rank, %llu pieces, %s", collOpName(a.op),
               static_cast<unsigned long long>(count), static_cast<unsigned long long>(pieces),
               staged ? "staged output" : "decoded in place");
  }

 private:
  // The slot sets of the window (and of a reduce-scatter's outgoing frames): consecutive pieces
  // take turns, so that up to kSlotSets pieces are in flight.
  static constexpr int kSlotSets = 3;

  // What every piece of a call shares.
  struct Step {
    const CollArgs& a;
    const Plan& plan;
    uint64_t slot;      // bytes between the window's slots (and the outgoing frames)
    uint64_t setBytes;  // bytes of a slot set: n slots
    bool staged;
    uint64_t stagedStride;
    DeviceWorkspace ws;
  };

  uint8_t* windowSlot(const Step& s, int set, int rank) const {
    return static_cast<uint8_t*>(symmetric_.windowBase()) + set * s.setBytes + rank * s.slot;
  }

  // All-gather E: this rank's frame of the piece into its own slot of the set; with direct_,
  // into slot `me` of every peer's window too, as one batch of n encodes of the same values
  // (the same bytes n times: the peers' frames leave as the encode writes them, where a push
  // would wait for the whole frame first).
  void encodeGather(const Step& s, int set, const Span& piece) {
    const int me = t_.rank();
    const uint8_t* src = static_cast<const uint8_t*>(s.a.send) + piece.offset * s.plan.elemBytes;
    std::vector<EncodeBlock> blocks;
    for (int d = 0; d < t_.size(); ++d)
      if (d == me || direct_)
        blocks.push_back(
            {src, piece.count,
             d == me ? windowSlot(s, set, me) : peers_[d] + set * s.setBytes + me * s.slot});
    s.plan.use.codec->encodeBlocksDevice(s.plan.use.config, s.plan.use.dtype, blocks.data(),
                                         blocks.size(), s.ws, encode_);
  }

  // Reduce-scatter E, as the pipeline's reducePieces: piece k of every destination's chunk
  // encoded once, as one batch (Codec::encodeBlocksDevice), into the set's outgoing frames; with
  // direct_, each peer's frame straight into slot `me` of the set in that peer's window (this
  // rank's own frame still into the outgoing area).
  void encodeReduceScatter(const Step& s, int set, uint64_t k) {
    const uint64_t eb = s.plan.elemBytes;
    const int me = t_.rank();
    const auto* send = static_cast<const uint8_t*>(s.a.send);
    std::vector<EncodeBlock> blocks(t_.size());
    for (int d = 0; d < t_.size(); ++d) {
      const Span block = pieceOf(s.plan.chunks[d], s.plan.pieceElems, k);
      uint8_t* frame = direct_ && d != me ? peers_[d] + set * s.setBytes + me * s.slot
                                          : outgoing(s, set) + d * s.slot;
      blocks[d] = {send + (s.plan.chunks[d].offset + block.offset) * eb, block.count, frame};
    }
    s.plan.use.codec->encodeBlocksDevice(s.plan.use.config, s.plan.use.dtype, blocks.data(),
                                         blocks.size(), s.ws, encode_);
  }

  uint8_t* outgoing(const Step& s, int set) const { return outgoing_.get() + set * s.setBytes; }

  // P: the all-gather's one frame to every peer, or the reduce-scatter's frame d to peer d, into
  // slot `me` of the peers' set. A frame of variable size (lossless) moves the bytes its header
  // gives, at most its largest.
  void push(const Step& s, int set, const Span& piece, bool gather) {
    const int me = t_.rank();
    const Codec& codec = *s.plan.use.codec;
    const uint64_t frameBytes =
        codec.maxEncodedBytes(s.plan.use.config, s.plan.use.dtype, piece.count);
    const uint8_t* frames = gather ? windowSlot(s, set, me) : outgoing(s, set);
    launchFusedPush(fusedPushGrid(), push_, symmetric_.devComm(), symmetric_.window(), frames,
                    gather ? 0 : s.slot, set * s.setBytes + me * s.slot, roundUp(frameBytes, 16),
                    !codec.fixedFrameSize(), abortFlagDevice_);
  }

  // All-gather D: frames of the set decoded into their ranks' parts of the output (frame k:
  // rank me + k's); the staged parts copied out once the last frame is decoded. No peers' frames
  // where this rank is alone.
  void decodeGather(const Step& s, int set, const Span& piece, FrameRange frames, unsigned grid) {
    const int n = t_.size(), me = t_.rank();
    const uint64_t eb = s.plan.elemBytes;
    const uint64_t frameBytes =
        s.plan.use.codec->maxEncodedBytes(s.plan.use.config, s.plan.use.dtype, piece.count);
    uint8_t* out = static_cast<uint8_t*>(s.a.recv) + piece.offset * eb;
    uint8_t* into = s.staged ? staging_.get() : out;
    const uint64_t intoStride = s.staged ? s.stagedStride : s.a.count * eb;
    if (s.plan.use.config.codec != cclzCodecFp8) {  // lossless: the codec's decode, frame by frame
      for (int k = frames.from; k < frames.to; ++k) {
        const int r = (me + k) % n;
        s.plan.use.codec->decodeDevice(s.plan.use.config, windowSlot(s, set, r), s.slot,
                                       s.plan.use.dtype, piece.count, into + r * intoStride,
                                       DeviceWorkspace{status_, nullptr, 0}, decode_);
      }
    } else if (frames.from < frames.to) {
      launchFusedDecode(s.plan.use.dtype, grid, decode_, windowSlot(s, set, 0), s.slot, frameBytes,
                        piece.count, me, n, frames, into, intoStride, status_);
    }
    if (s.staged && frames.to == n)
      fused::copyStagedOut(out, s.a.count * eb, staging_.get(), s.stagedStride, piece.count * eb,
                           n, decode_);
  }

  // Reduce-scatter D: the owner sums the n frames of its piece in rank order in fp32 (its own
  // from the outgoing frames) and stores sum / divisor in the dtype: the pipeline's bytes, in one
  // pass where the codec has one (fused::decodeSum).
  void decodeReduceScatter(const Step& s, int set, const Span& piece) {
    const Codec& codec = *s.plan.use.codec;
    const int n = t_.size(), me = t_.rank();
    const uint64_t eb = s.plan.elemBytes;
    uint8_t* out = static_cast<uint8_t*>(s.a.recv) + piece.offset * eb;
    const float divisor = s.a.redOp == cclzAvg ? static_cast<float>(n) : 1.0f;
    fused::decodeSum(
        codec, s.plan.use.config, s.plan.use.dtype, n,
        [&](int r) { return r == me ? outgoing(s, set) + me * s.slot : windowSlot(s, set, r); },
        s.slot, piece.count, reinterpret_cast<float*>(acc_.get()),
        s.staged ? staging_.get() : out, divisor, s.ws, decode_);
    if (s.staged)
      CCLZ_CUDA_CHECK(cudaMemcpyAsync(out, staging_.get(), piece.count * eb,
                                      cudaMemcpyDeviceToDevice, decode_));
  }

 public:
  cclzResult_t pollError(std::string* message) override {
    return takeDecodeError(status_, "the fused path's decode", message);
  }

 private:
  NcclTransport& t_;
  NcclSymmetric symmetric_;
  const uint64_t pieceBytesSetting_;  // CCLZ_PIECE_BYTES (0: fusedPieceBytes' default)
  const bool direct_;                 // CCLZ_FUSED=direct
  std::vector<uint8_t*> peers_;       // every rank's window as mapped here (direct_)
  LocalArea scratch_, outgoing_, acc_, staging_;
  DeviceStatus* status_ = nullptr;
  cudaEvent_t last_ = nullptr;  // recorded after the last call's work
  cudaStream_t encode_ = nullptr, push_ = nullptr, decode_ = nullptr;
  cudaEvent_t start_ = nullptr, joinEncode_ = nullptr, joinPush_ = nullptr, done_ = nullptr;
  cudaEvent_t encoded_[kSlotSets]{}, pushed_[kSlotSets]{}, decoded_[kSlotSets]{},
      closed_[kSlotSets]{};
  Timeline timeline_;  // CCLZ_TIMELINE=1: each step's span, printed after the call
  bool hasLast_ = false, lastCaptured_ = false;
  volatile uint32_t* abortFlag_ = nullptr;              // pinned, mapped: abort() sets it
  const volatile uint32_t* abortFlagDevice_ = nullptr;  // the same word, for the kernel
};

}  // namespace

std::unique_ptr<FusedNvlink> makeFusedNvlink(Transport& transport, bool copyEngines,
                                             bool replayGraphs, uint64_t pieceBytesSetting,
                                             bool direct) {
  auto* nccl = dynamic_cast<NcclTransport*>(&transport);
  CCLZ_REQUIRE(nccl, cclzNotSupported, "CCLZ_FUSED is for device (NCCL) communicators");
  if (copyEngines) return makeFusedCopyEngines(*nccl, replayGraphs);
  return std::make_unique<NcclFusedNvlink>(*nccl, pieceBytesSetting, direct);
}

#else  // no NCCL device API

std::unique_ptr<FusedNvlink> makeFusedNvlink(Transport&, bool, bool, uint64_t, bool) {
  CCLZ_FAIL(cclzNotSupported,
            "CCLZ_FUSED needs NCCL's device API (NCCL 2.28 or later at build time)");
}

#endif

}  // namespace cclz
