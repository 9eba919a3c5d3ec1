// The fused NVLink paths with the frames moved by the copy engines (CCLZ_FUSED=ce;
// fused_nvlink.h; docs/collectives.md, "Fused NVLink paths"). The measured case against the
// kernel-stored frames (fused_nvlink.cpp): there every step of a piece took multiprocessors, and
// an encode beside a decode ran 1.5x as long as alone; here no multiprocessor moves a byte or
// waits for a peer, so the codec's kernels have the GPU to themselves.
//
// The all-gather, the reduce-scatter and the all-reduce (a reduce-scatter into this rank's
// shard, then an all-gather of the shards), for the codecs of fixed-size frames (fp8, qgrad),
// with error feedback: the pipeline's algorithms (algorithms.cpp: gatherPieces, reducePieces,
// runPlan's all-reduce) on the pipeline's frames (plan.pieceElems, plan.chunks), so the outputs
// and residuals are its bytes. Each of those passes is a phase:
//   gather: every rank's own piece k to every rank, each decoded into its place of the output;
//   reduce: piece k of each destination's block to its owner, which sums the n frames of its
//     piece in rank order in fp32 and stores sum / divisor in the dtype.
// A phase's frames, every piece of every rank, sit in a PeerWindow (transport/nccl/peer_window.h):
// rank r's frame of piece k at r * rankBytes + k * slot on every rank, so nothing is reused
// within a phase, and the pieces flow without closing barriers. Streams and steps, piece k:
//   E encode stream: the codec's encode: a gather's own frame into this rank's place of its
//      window; a reduction's frame per destination into a local area (with feedback, through
//      the residual);
//   P push stream of peer p: after E(k) (and, for the first piece, once consumed[p] >= 1: p has
//      read this rank's frames of the last phase; then consumed[p] = 0), the copy of p's frame
//      into this rank's place of p's window (cudaMemcpyAsync: a copy engine), then arrived[me] =
//      k + 1 in p's window (a stream memory operation, ordered after the copy);
//   D decode stream: after E(k) (the own frame) and arrived[r] >= k + 1 for every peer r (a
//      stream wait on local memory), the frames decoded (gather) or summed (reduce).
// After a phase's last piece, D sets its own arrived flags back to 0, then consumed[me] = 1 in
// every peer's window. Every flag's value is the same in every phase and call, so a call
// captured into a CUDA graph replays correctly (the stream memory operations become graph nodes).
// That is also how direct calls run where their arguments repeat (CCLZ_FUSED_GRAPHS): the first
// is captured into a graph of the path's own, and it and the later ones launch it, one runtime
// call instead of tens a piece (run; collective/call_graphs.h).
#include "collective/fused_nvlink.h"
#include "transport/nccl/nccl_symmetric.h"  // CCLZ_HAVE_NCCL_DEVICE_API where NCCL has it

#ifdef CCLZ_HAVE_NCCL_DEVICE_API

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <vector>

#include "codec/device.h"
#include "codec/frame.h"
#include "collective/call_graphs.h"
#include "collective/device_kernels.h"
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

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

class CopyEngineFused final : public FusedNvlink {
 public:
  CopyEngineFused(NcclTransport& t, bool replayGraphs) : t_(t), replayGraphs_(replayGraphs) {
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
    for (cudaEvent_t* e : {&start_, &encoded_, &reduced_, &joinEncode_, &done_, &last_})
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
    for (cudaEvent_t e : {start_, encoded_, reduced_, joinEncode_, done_, last_})
      cudaEventDestroy(e);
    for (cudaEvent_t e : pushed_) cudaEventDestroy(e);
    for (cudaStream_t s : push_) cudaStreamDestroy(s);
    for (cudaStream_t s : {encode_, decode_}) cudaStreamDestroy(s);
    cudaFree(status_);
  }

  void abort() noexcept override {
    if (window_) window_->release();
    CCLZ_TRACE("fused (copy engines): flags released");
  }

  // Every rank answers alike: nothing in it is local. Fixed-size frames only: a copy's size is
  // set when it is queued, before the frame is encoded.
  bool takes(const CollArgs& a, const Plan& plan) const override {
    const int codec = plan.use.config.codec;
    return window_ &&
           (a.op == CollOp::AllGather || a.op == CollOp::ReduceScatter ||
            a.op == CollOp::AllReduce) &&
           (codec == cclzCodecFp8 || codec == cclzCodecQgrad) && a.count > 0;
  }

  void run(const CollArgs& a, const Plan& plan) override {
    auto stream = reinterpret_cast<cudaStream_t>(a.stream);
    const bool capturing = isCapturing(stream);
    const Sizes sizes = sizesOf(a, plan);
    growFor(sizes, capturing);
    if (capturing || !replays(a, plan)) {
      queue(a, plan, sizes, stream, capturing ? Queued::InCallersCapture : Queued::Direct);
      return;
    }
    // A direct call as a graph: the one made for these arguments, else one made now; after
    // this communicator's last direct fused call, whose areas the graph reuses.
    if (hasLast_ && !lastCaptured_) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, last_));
    const bool made = graphs_.launch(graphKey(a, plan), stream, [&](cudaStream_t capture) {
      queue(a, plan, sizes, capture, Queued::InOwnCapture);
    });
    CCLZ_CUDA_CHECK(cudaEventRecord(last_, stream));
    hasLast_ = true, lastCaptured_ = false;
    CCLZ_TRACE("fused (copy engines): %s of %llu values per rank, replayed as a graph%s",
               collOpName(a.op), static_cast<unsigned long long>(a.count),
               made ? " (made now)" : "");
  }

  // A frame the decode rejected, or an encode with feedback that met a NaN or Inf, in work
  // that has finished (the device engine's judgement; the word cleared once read).
  cclzResult_t pollError(std::string* message) override {
    return takeDeviceError(status_, "the fused path's decode", "the fused path's encode", message);
  }

 private:
  // The sizes of a call: its pieces and frames, and what each local area must hold.
  struct Sizes {
    uint64_t pieces = 0;        // of the largest chunk
    uint64_t slot = 0;          // bytes between consecutive pieces' frames
    uint64_t rankBytes = 0;     // bytes of one rank's frames, every piece
    uint64_t stagedStride = 0;  // bytes of a staged piece
    uint64_t need[6] = {};      // scratch_, outgoing_, acc_, residualCopy_, shard_, staging_
  };

  Sizes sizesOf(const CollArgs& a, const Plan& plan) const {
    const Codec& codec = *plan.use.codec;
    const int n = t_.size(), me = t_.rank(), dtype = plan.use.dtype;
    const uint64_t eb = plan.elemBytes, pe = plan.pieceElems;
    uint64_t largest = 0, scratchBytes = 256;
    Sizes z;
    for (const Span& c : plan.chunks) {
      const uint64_t k = pieceCount(c.count, pe);
      z.pieces = std::max(z.pieces, k);
      largest = std::max(largest, c.count);
      if (!c.count) continue;
      for (uint64_t piece : {std::min(pe, c.count), c.count - (k - 1) * pe})
        scratchBytes = std::max(scratchBytes,
                                codec.encodeBlocksScratchBytes(plan.use.config, dtype, piece, n));
    }
    const bool reduces = a.op != CollOp::AllGather;
    z.slot = frameStride(plan);
    z.rankBytes = z.pieces * z.slot;
    const uint64_t pieceMost = std::min(pe, largest);
    z.stagedStride = roundUp(pieceMost * eb, 16);
    // The window: every rank's frames of every piece of a phase (rankBytes a rank). The rest is
    // this rank's alone: the encode's scratch, a reduction's outgoing frames (one per destination
    // and piece), its fp32 accumulator (none where the codec sums in one pass), an aligned copy
    // of the residual, the all-reduce's shard, the staging area for outputs that are not 16-byte
    // aligned (n pieces).
    const uint64_t need[] = {
        roundUp(scratchBytes, 256),
        reduces ? n * z.rankBytes : 0,
        reduces && !codec.sumsInOnePass(plan.use.config, n)
            ? roundUp(pieceMost * sizeof(float), 256)
            : 0,
        a.step ? roundUp(pieceMost * sizeof(float), 256) : 0,
        a.op == CollOp::AllReduce ? roundUp(plan.chunks[me].count * eb, 256) : 0,
        n * z.stagedStride,
    };
    std::copy(std::begin(need), std::end(need), z.need);
    return z;
  }

  // Reserving the window is collective and the same on every rank (the same call); it grows only
  // where the window is too small, after waiting for the device. Growing moves what the graphs
  // made so far point at: they are dropped.
  void growFor(const Sizes& z, bool capturing) {
    const uint64_t windowBytes = t_.size() * z.rankBytes;
    LocalArea* areas[] = {&scratch_, &outgoing_, &acc_, &residualCopy_, &shard_, &staging_};
    bool grow = !window_->covers(windowBytes);
    for (int i = 0; i < 6; ++i) grow = grow || !areas[i]->covers(z.need[i]);
    if (!grow) return;
    CCLZ_REQUIRE(!capturing, cclzInvalidUsage,
                 "the fused path's window or scratch must grow (the window's registration is "
                 "collective, and nothing is allocated while the stream is captured into a "
                 "CUDA graph): make a call of this size before capturing");
    if (hasLast_ && !lastCaptured_) CCLZ_CUDA_CHECK(cudaEventSynchronize(last_));
    graphs_.clear();
    // The same decision on every rank (the same call, the same window so far).
    if (window_->reserve(windowBytes)) window_->markConsumed(1);
    for (int i = 0; i < 6; ++i) areas[i]->grow(z.need[i]);
  }

  // Whether a direct call is replayed as a CUDA graph (CCLZ_FUSED_GRAPHS, on by default): a call
  // queues tens of runtime calls per piece, and back to back the GPU waited for the host
  // (bench/results/fused-nvlink-4xh200: 468 of a 472 us call at 64 MiB). Not where stochastic
  // rounding draws from the feedback's step, which changes at every call and a graph would
  // freeze (rounding to nearest, the default, never reads it), nor with CCLZ_TIMELINE (a graph's
  // spans cannot be timed from the host).
  bool replays(const CollArgs& a, const Plan& plan) const {
    const bool stepUnread = !a.step || plan.use.config.rounding == cclzRoundNearest;
    return replayGraphs_ && stepUnread && !timeline_.enabled();
  }

  // Everything the queued work depends on beyond this object's own memory: the buffers (the
  // residual's too), the counts and the codec's configuration (its bytes: a configuration equal
  // in its fields but not in its padding only makes another graph).
  static std::string graphKey(const CollArgs& a, const Plan& plan) {
    const uint64_t words[] = {static_cast<uint64_t>(a.op),
                              reinterpret_cast<uintptr_t>(a.send),
                              reinterpret_cast<uintptr_t>(a.recv),
                              a.count,
                              static_cast<uint64_t>(a.dtype),
                              static_cast<uint64_t>(a.redOp),
                              plan.pieceElems,
                              a.step ? 1u : 0u,
                              reinterpret_cast<uintptr_t>(a.residual.data),
                              static_cast<uint64_t>(a.residual.dtype)};
    std::string key(reinterpret_cast<const char*>(words), sizeof words);
    key.append(reinterpret_cast<const char*>(&plan.use.config), sizeof plan.use.config);
    return key;
  }

  // How a call is queued: on the caller's stream as it runs, into a graph the caller is
  // capturing, or into a graph of this object's (graphs_; run launches it and records last_).
  enum class Queued { Direct, InCallersCapture, InOwnCapture };

  // Queues the call on `stream` (the caller's, or the capture's).
  void queue(const CollArgs& a, const Plan& plan, const Sizes& z, cudaStream_t stream,
             Queued how) {
    const bool capturing = how != Queued::Direct;
    const int n = t_.size(), me = t_.rank(), dtype = plan.use.dtype;
    const uint64_t eb = plan.elemBytes;
    const bool reduces = a.op != CollOp::AllGather;
    // After the caller's work, and a direct call after this communicator's last direct fused
    // call (whose areas it reuses). A captured call waits for none (the runtime refuses a wait on
    // work outside the capture): there the caller's stream orders the calls, as on the kernel
    // path, and a graph's launch waits for the last call (run).
    if (!capturing && hasLast_ && !lastCaptured_)
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(stream, last_));
    if (!capturing) timeline_.start(stream);
    CCLZ_CUDA_CHECK(cudaEventRecord(start_, stream));
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(encode_, start_));
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(decode_, start_));
    for (int p = 0; p < n; ++p)
      if (p != me) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(push_[p], start_));

    const Call call{plan, z.slot, z.rankBytes, z.pieces, z.stagedStride,
                    DeviceWorkspace{status_, scratch_.get(), z.need[0], 0}};
    const float divisor = a.redOp == cclzAvg && reduces ? static_cast<float>(n) : 1.0f;
    const uint64_t step = a.step ? *a.step : 0;
    const auto* send = static_cast<const uint8_t*>(a.send);
    auto* recv = static_cast<uint8_t*>(a.recv);
    switch (a.op) {
      case CollOp::AllGather:
        gatherPhase(call, send, recv);
        break;
      case CollOp::ReduceScatter:
        reducePhase(call, send, recv, a.residual, step, divisor);
        break;
      default: {  // all-reduce: this rank's shard of the sum, then every rank's shard
        reducePhase(call, send, shard_.get(), a.residual, step, divisor);
        CCLZ_CUDA_CHECK(cudaEventRecord(reduced_, decode_));
        CCLZ_CUDA_CHECK(cudaStreamWaitEvent(encode_, reduced_));  // the shard is encoded next
        gatherPhase(call, shard_.get(), recv);
        const Span own = plan.chunks[me];
        if (a.step && own.count)  // re-encoding the shard lost something too: into its residual
          reduce::foldDevice(a.residual.at(own.offset), shard_.get(), recv + own.offset * eb,
                             own.count, dtype, divisor, decode_);
      }
    }

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
    if (how == Queued::InOwnCapture) return;
    CCLZ_CUDA_CHECK(cudaEventRecord(last_, stream));
    hasLast_ = true, lastCaptured_ = capturing;
    if (!capturing) timeline_.report(stream);
    CCLZ_TRACE("fused (copy engines): %s of %llu values per rank, %llu pieces%s%s",
               collOpName(a.op), static_cast<unsigned long long>(a.count),
               static_cast<unsigned long long>(z.pieces), a.step ? ", error feedback" : "",
               capturing ? ", captured" : "");
  }

  // What every phase of a call shares.
  struct Call {
    const Plan& plan;
    uint64_t slot;          // bytes between consecutive pieces' frames
    uint64_t rankBytes;     // bytes of one rank's frames, every piece
    uint64_t pieces;        // of the largest chunk
    uint64_t stagedStride;  // bytes of a staged piece
    DeviceWorkspace ws;
  };

  // A frame a push copies to a peer: none where the peer's piece is empty.
  struct FrameToCopy {
    const uint8_t* at;
    uint64_t bytes;
  };

  // Where rank r's frame of piece k sits in a window (this rank's, or a peer's as mapped here).
  static uint64_t placeOf(const Call& c, int r, uint64_t k) {
    return r * c.rankBytes + k * c.slot;
  }
  uint8_t* outgoing(const Call& c, int d, uint64_t k) const {
    return outgoing_.get() + placeOf(c, d, k);
  }
  static uint64_t frameBytes(const Call& c, uint64_t count) {
    return c.plan.use.codec->maxEncodedBytes(c.plan.use.config, c.plan.use.dtype, count);
  }
  static Span pieceOfRank(const Call& c, int r, uint64_t k) {
    return pieceOf(c.plan.chunks[r], c.plan.pieceElems, k);
  }

  // The gather phase: `mine` holds this rank's chunk from its element 0; rank r's chunk is
  // decoded to out + chunks[r].offset. One decode kernel for all n frames of a piece where the
  // codec is fp8 and every chunk is as long (the all-gather; the kernel path's decode), else one
  // decode per frame, as the pipeline's.
  void gatherPhase(const Call& c, const uint8_t* mine, uint8_t* out) {
    const Codec& codec = *c.plan.use.codec;
    const int n = t_.size(), me = t_.rank();
    const uint64_t eb = c.plan.elemBytes;
    const std::vector<Span>& chunks = c.plan.chunks;
    const bool even = std::all_of(chunks.begin(), chunks.end(),
                                  [&](const Span& s) { return s.count == chunks[0].count; });
    const bool oneKernel = c.plan.use.config.codec == cclzCodecFp8 && even;
    // The one kernel stores 16 bytes at a time: parts at offsets that are not 16-byte aligned
    // are staged (n of them) and copied out after each piece.
    const bool staged = oneKernel && (!aligned16(out + chunks[0].offset * eb) ||
                                      (chunks[0].count * eb) % 16 != 0 ||
                                      (c.pieces > 1 && (c.plan.pieceElems * eb) % 16 != 0));
    for (uint64_t k = 0; k < c.pieces; ++k) {
      const Span own = pieceOfRank(c, me, k);
      uint8_t* ownFrame = window_->localData() + placeOf(c, me, k);
      timeline_.open(Stage::Encode, static_cast<int>(k), encode_);
      if (own.count)
        codec.encodeDevice(c.plan.use.config, c.plan.use.dtype, mine + own.offset * eb, own.count,
                           ownFrame, nullptr, c.ws, encode_);
      CCLZ_CUDA_CHECK(cudaEventRecord(encoded_, encode_));
      const uint64_t ownBytes = own.count ? frameBytes(c, own.count) : 0;
      push(c, k, [&](int) { return FrameToCopy{ownFrame, ownBytes}; });
      const uint8_t* frames = window_->localData() + k * c.slot;
      uint8_t* at = out + (chunks[0].offset + own.offset) * eb;
      const uint64_t pitch = chunks[0].count * eb;
      // The one kernel's frames: this rank's own while the copy engines move it (they take no
      // SMs), the peers' once they are here.
      auto decodeFrames = [&](FrameRange range) {
        if (range.from < range.to)
          launchFusedDecode(c.plan.use.dtype, fusedDecodeGrid(own.count), decode_, frames,
                            c.rankBytes, frameBytes(c, own.count), own.count, me, n, range,
                            staged ? staging_.get() : at, staged ? c.stagedStride : pitch, status_);
      };
      if (oneKernel && own.count) {
        CCLZ_CUDA_CHECK(cudaStreamWaitEvent(decode_, encoded_));
        timeline_.open("decode own", static_cast<int>(k), decode_);
        decodeFrames(FrameRange{0, 1});
      }
      waitForPiece(k);
      timeline_.open(Stage::Decode, static_cast<int>(k), decode_);
      if (oneKernel) {
        if (!own.count) continue;
        decodeFrames(FrameRange{1, n});
        if (staged)
          fused::copyStagedOut(at, pitch, staging_.get(), c.stagedStride, own.count * eb, n,
                               decode_);
        continue;
      }
      for (int r = 0; r < n; ++r) {  // any order: each frame has its own place
        const Span piece = pieceOfRank(c, r, k);
        if (!piece.count) continue;
        decodeTo(c, frames + r * c.rankBytes, piece.count,
                 out + (chunks[r].offset + piece.offset) * eb);
      }
    }
    endPhase();
  }

  // The reduce phase: `in` holds every destination's block at chunks[d].offset; this rank's
  // block of the sum goes to `mine` from its element 0. With a residual (error feedback), the
  // encodes add it and keep what quantization left out.
  void reducePhase(const Call& c, const uint8_t* in, uint8_t* mine, Residual residual,
                   uint64_t step, float divisor) {
    const Codec& codec = *c.plan.use.codec;
    const int n = t_.size(), me = t_.rank();
    const uint64_t eb = c.plan.elemBytes;
    auto* acc = reinterpret_cast<float*>(acc_.get());
    for (uint64_t k = 0; k < c.pieces; ++k) {
      timeline_.open(Stage::Encode, static_cast<int>(k), encode_);
      std::vector<EncodeBlock> blocks(n);
      for (int d = 0; d < n; ++d) {
        const Span block = pieceOfRank(c, d, k);
        blocks[d] = {in + (c.plan.chunks[d].offset + block.offset) * eb, block.count,
                     outgoing(c, d, k)};
      }
      if (!residual) {  // the destinations' blocks as one batch where the codec has one
        codec.encodeBlocksDevice(c.plan.use.config, c.plan.use.dtype, blocks.data(), n, c.ws,
                                 encode_);
      } else {
        for (int d = 0; d < n; ++d) {
          if (!blocks[d].count) continue;
          const uint64_t first = c.plan.chunks[d].offset + pieceOfRank(c, d, k).offset;
          encodeWithFeedback(c, in + first * eb, blocks[d].count, residual.at(first), step,
                             blocks[d].dst);
        }
      }
      CCLZ_CUDA_CHECK(cudaEventRecord(encoded_, encode_));
      push(c, k, [&](int p) {
        const Span block = pieceOfRank(c, p, k);
        return FrameToCopy{outgoing(c, p, k), block.count ? frameBytes(c, block.count) : 0};
      });
      waitForPiece(k);
      timeline_.open(Stage::Decode, static_cast<int>(k), decode_);
      const Span own = pieceOfRank(c, me, k);
      if (!own.count) continue;
      uint8_t* at = mine + own.offset * eb;
      const bool staged = !aligned16(at);  // the last step stores 16 bytes at a time
      fused::decodeSum(
          codec, c.plan.use.config, c.plan.use.dtype, n,
          [&](int r) -> const uint8_t* {
            return r == me ? outgoing(c, me, k) : window_->localData() + placeOf(c, r, k);
          },
          c.slot, own.count, acc, staged ? staging_.get() : at, divisor, c.ws, decode_);
      if (staged)
        CCLZ_CUDA_CHECK(cudaMemcpyAsync(at, staging_.get(), own.count * eb,
                                        cudaMemcpyDeviceToDevice, decode_));
    }
    endPhase();
  }

  // E of a reduction with error feedback: one frame, through the residual. A residual at an
  // offset not aligned to a group of 8 values goes through an aligned copy (as in the device
  // engine).
  void encodeWithFeedback(const Call& c, const uint8_t* src, uint64_t count, Residual residual,
                          uint64_t step, uint8_t* dst) {
    const Codec& codec = *c.plan.use.codec;
    const uint64_t group = 8 * residual.elemBytes();
    const bool direct = reinterpret_cast<uintptr_t>(residual.data) % group == 0;
    const Residual r = direct ? residual : Residual{residualCopy_.get(), residual.dtype};
    const uint64_t bytes = count * residual.elemBytes();
    if (!direct)
      CCLZ_CUDA_CHECK(
          cudaMemcpyAsync(r.data, residual.data, bytes, cudaMemcpyDeviceToDevice, encode_));
    codec.encodeFeedbackDevice(c.plan.use.config, c.plan.use.dtype, src, count, r, step, dst,
                               nullptr, c.ws, encode_);
    if (!direct)
      CCLZ_CUDA_CHECK(
          cudaMemcpyAsync(residual.data, r.data, bytes, cudaMemcpyDeviceToDevice, encode_));
  }

  // P(k): each peer p's frame (frameOf(p): where, and its bytes; none where p's piece is empty)
  // into this rank's place of p's window, then its flag, which every piece sets. The first
  // piece's copy waits until p has read this rank's frames of the last phase.
  template <typename FrameOf>
  void push(const Call& c, uint64_t k, FrameOf&& frameOf) {
    const int me = t_.rank();
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
      const FrameToCopy frame = frameOf(p);
      if (frame.bytes)
        CCLZ_CUDA_CHECK(cudaMemcpyAsync(window_->peerData(p) + placeOf(c, me, k), frame.at,
                                        frame.bytes, cudaMemcpyDeviceToDevice, push_[p]));
      window_->setArrived(push_[p], p, static_cast<uint32_t>(k + 1));
    }
  }

  // D(k) starts once this rank's own frames of the piece are encoded and every peer's are here.
  void waitForPiece(uint64_t k) {
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(decode_, encoded_));
    for (int r = 0; r < t_.size(); ++r)
      if (r != t_.rank()) window_->waitArrived(decode_, r, static_cast<uint32_t>(k + 1));
  }

  // After a phase's decodes: its flags back to 0, then the peers may write their next phase's
  // (they wait for consumed >= 1 before their first copy).
  void endPhase() {
    timeline_.close();
    const int me = t_.rank();
    for (int r = 0; r < t_.size(); ++r)
      if (r != me) window_->setOwnArrived(decode_, r, 0);
    for (int r = 0; r < t_.size(); ++r)
      if (r != me) window_->setConsumed(decode_, r, 1);
  }

  // One frame decoded to `dst`; through the staging area where dst is not 16-byte aligned (the
  // decoders store 16 bytes at a time), as in the device engine.
  void decodeTo(const Call& c, const uint8_t* frame, uint64_t count, uint8_t* dst) {
    const Codec& codec = *c.plan.use.codec;
    uint8_t* into = aligned16(dst) ? dst : staging_.get();
    codec.decodeDevice(c.plan.use.config, frame, c.slot, c.plan.use.dtype, count, into, c.ws,
                       decode_);
    if (into != dst)
      CCLZ_CUDA_CHECK(cudaMemcpyAsync(dst, into, count * c.plan.elemBytes,
                                      cudaMemcpyDeviceToDevice, decode_));
  }

  NcclTransport& t_;
  std::unique_ptr<PeerWindow> window_;  // null where the ranks are not all in one LSA team
  LocalArea scratch_, outgoing_, acc_, residualCopy_, shard_, staging_;
  DeviceStatus* status_ = nullptr;
  cudaStream_t encode_ = nullptr, decode_ = nullptr;
  std::vector<cudaStream_t> push_;  // one per peer (this rank's own is not used)
  std::vector<cudaEvent_t> pushed_;
  cudaEvent_t start_ = nullptr, encoded_ = nullptr, reduced_ = nullptr, joinEncode_ = nullptr,
              done_ = nullptr;
  cudaEvent_t last_ = nullptr;  // recorded after the last call's work
  bool hasLast_ = false, lastCaptured_ = false;
  bool replayGraphs_ = true;  // CCLZ_FUSED_GRAPHS
  CallGraphs graphs_;  // direct calls made into graphs, by graphKey
  // CCLZ_TIMELINE=1: each piece's encode, move (the first peer's copy) and decode, printed after
  // the call.
  Timeline timeline_;
};

}  // namespace

std::unique_ptr<FusedNvlink> makeFusedCopyEngines(NcclTransport& transport, bool replayGraphs) {
  return std::make_unique<CopyEngineFused>(transport, replayGraphs);
}

}  // namespace cclz

#endif  // CCLZ_HAVE_NCCL_DEVICE_API
