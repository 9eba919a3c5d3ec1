// The fused NVLink paths of the fp8 codec (fused_nvlink.h; docs/collectives.md, "Fused NVLink
// paths"). Per piece, on the caller's stream:
//   1. the codec's own encode (Codec::encodeDevice: its sampling kernels and its encode kernel):
//      an all-gather's one frame into this rank's own slot of its symmetric window; a
//      reduce-scatter's frame per destination into a local area. The host path's bytes;
//   2. pushFrameKernel stores peer d's frame into slot `me` of peer d's window over NVLink, then
//      meets the peers at an LSA barrier per CTA: after it, every peer's frame is in this rank's
//      window;
//   3. the frames decoded from local memory: decodeFramesKernel for the all-gather (own first);
//      the codec's decode-and-reduce steps in rank order for the reduce-scatter;
//   4. closeKernel, one CTA's LSA barrier: after it no peer still reads its window, so the next
//      piece may be pushed into the slots.
// The encode stays its own launches because its choices (row length, smoothing) are made from
// the whole frame's data before any value is written: a grid-wide step that a kernel cannot
// take without a grid sync. The pieces are the host path's (plan.pieceElems), so the frames and
// the outputs are the same bytes as the pipeline's.
#include "collective/fused_nvlink.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "collective/plan.h"
#include "common/error.h"
#include "common/trace.h"
#include "transport/nccl/nccl_symmetric.h"
#include "transport/nccl/nccl_transport.h"

#ifdef CCLZ_HAVE_NCCL_DEVICE_API
#include "codec/device.h"
#include "codec/frame.h"
#include "collective/fused_nvlink_kernel.h"
#endif

namespace cclz {

#ifdef CCLZ_HAVE_NCCL_DEVICE_API
namespace {

uint64_t roundUp(uint64_t v, uint64_t unit) { return (v + unit - 1) / unit * unit; }

bool isCapturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CCLZ_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

// Device memory of this rank alone (cudaMalloc). The caller grows it outside captures only, once
// no queued work uses it.
class LocalArea {
 public:
  ~LocalArea() { cudaFree(p_); }
  uint8_t* get() const { return p_; }
  bool covers(uint64_t bytes) const { return bytes <= bytes_; }
  void grow(uint64_t bytes) {
    if (covers(bytes)) return;
    cudaFree(p_);
    p_ = nullptr, bytes_ = 0;
    CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), bytes));
    bytes_ = bytes;
  }

 private:
  uint8_t* p_ = nullptr;
  uint64_t bytes_ = 0;
};

class NcclFusedNvlink final : public FusedNvlink {
 public:
  explicit NcclFusedNvlink(NcclTransport& t) : t_(t), symmetric_(t.commHandle(), kFusedMaxCtas) {
    if (!symmetric_.wholeTeam())
      CCLZ_TRACE("fused: off, the LSA team holds %d of %d ranks (not all on NVLink)",
                 symmetric_.lsaSize(), t.size());
    CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&status_), sizeof(DeviceStatus)));
    CCLZ_CUDA_CHECK(cudaMemset(status_, 0, sizeof(DeviceStatus)));
    CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(&last_, cudaEventDisableTiming));
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
    cudaFree(status_);
    cudaFreeHost(const_cast<uint32_t*>(abortFlag_));
  }

  void abort() noexcept override {
    if (abortFlag_) *abortFlag_ = 1;
    CCLZ_TRACE("fused: abort flag set");
  }

  bool takes(const CollArgs& a, const Plan& plan) const override {
    return symmetric_.wholeTeam() &&
           (a.op == CollOp::AllGather || a.op == CollOp::ReduceScatter) &&
           plan.use.config.codec == cclzCodecFp8 && a.count > 0 && a.step == nullptr;
  }

  void run(const CollArgs& a, const Plan& plan) override {
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

    // The window: one frame slot per rank, slot r at r * slot on every rank (the same call), which
    // rank r's push fills. Growing it is collective, and the old one may still be written by
    // the peers' last pushes until this rank's own last call has finished (its closing
    // barrier): the host waits for that first. The rest is this rank's alone: the encode's
    // scratch, a reduce-scatter's outgoing frames (one per destination) and fp32 accumulator,
    // the staging area.
    const uint64_t slot = frameStride(plan);
    const uint64_t scratchBytes = roundUp(std::max(codec.encodeScratchBytes(config, dtype, first),
                                                   codec.encodeScratchBytes(config, dtype, last)),
                                          256);
    const uint64_t outgoingBytes = gather ? 0 : n * slot;
    const uint64_t accBytes = gather ? 0 : roundUp(first * sizeof(float), 256);
    const uint64_t stagingBytes = staged ? (gather ? n : 1) * stagedStride : 0;
    if (n * slot > symmetric_.windowBytes() || !scratch_.covers(scratchBytes) ||
        !outgoing_.covers(outgoingBytes) || !acc_.covers(accBytes) ||
        !staging_.covers(stagingBytes)) {
      CCLZ_REQUIRE(!capturing, cclzInvalidUsage,
                   "the fused path's window or scratch must grow (the window's registration is "
                   "collective, and nothing is allocated while the stream is captured into a "
                   "CUDA graph): make a call of this size before capturing");
      if (hasLast_ && !lastCaptured_) CCLZ_CUDA_CHECK(cudaEventSynchronize(last_));
      symmetric_.growWindow(n * slot);
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

    const Step step{a, plan, stream, slot, staged, stagedStride,
                    DeviceWorkspace{status_, scratch_.get(), scratchBytes, 0}};
    for (uint64_t k = 0; k < pieces; ++k) {
      const Span piece = pieceOf(Span{0, count}, pieceElems, k);
      if (gather)
        gatherPiece(step, piece);
      else
        reduceScatterPiece(step, k, piece);
    }
    CCLZ_CUDA_CHECK(cudaEventRecord(last_, stream));
    hasLast_ = true, lastCaptured_ = capturing;
    CCLZ_TRACE("fused: %s of %llu values per rank, %llu pieces, %s", collOpName(a.op),
               static_cast<unsigned long long>(count), static_cast<unsigned long long>(pieces),
               staged ? "staged output" : "decoded in place");
  }

 private:
  // What every piece of a call shares.
  struct Step {
    const CollArgs& a;
    const Plan& plan;
    cudaStream_t stream;
    uint64_t slot;  // bytes between the window's slots (and the outgoing frames)
    bool staged;
    uint64_t stagedStride;
    DeviceWorkspace ws;
  };

  // All-gather: this rank's frame into its own slot, pushed to every peer; the n frames decoded
  // from the window into each rank's part of the output.
  void gatherPiece(const Step& s, const Span& piece) {
    const Codec& codec = *s.plan.use.codec;
    const int n = t_.size(), me = t_.rank(), dtype = s.plan.use.dtype;
    const uint64_t eb = s.plan.elemBytes;
    auto* window = static_cast<uint8_t*>(symmetric_.windowBase());
    codec.encodeDevice(s.plan.use.config, dtype,
                       static_cast<const uint8_t*>(s.a.send) + piece.offset * eb, piece.count,
                       window + me * s.slot, nullptr, s.ws, s.stream);
    const uint64_t frameBytes = codec.maxEncodedBytes(s.plan.use.config, dtype, piece.count);
    uint8_t* out = static_cast<uint8_t*>(s.a.recv) + piece.offset * eb;
    launchFusedPush(fusedPushGrid(), s.stream, symmetric_.devComm(), symmetric_.window(),
                    window + me * s.slot, 0, me * s.slot, roundUp(frameBytes, 16),
                    abortFlagDevice_);
    launchFusedDecode(dtype, fusedDecodeGrid(piece.count), s.stream, window, s.slot, frameBytes,
                      piece.count, me, n, s.staged ? staging_.get() : out,
                      s.staged ? s.stagedStride : s.a.count * eb, status_);
    launchFusedClose(s.stream, symmetric_.devComm(), abortFlagDevice_);
    if (s.staged) copyOut(out, s.a.count * eb, s.stagedStride, piece.count * eb, n, s.stream);
  }

  // Reduce-scatter, as the pipeline's reducePieces: piece k of every destination's chunk encoded
  // once, into the outgoing frames; frame d pushed into rank d's slot `me`; the owner sums the n
  // frames of its piece in rank order in fp32 (its own from the outgoing frames) and stores
  // sum / divisor in the dtype: the pipeline's bytes.
  void reduceScatterPiece(const Step& s, uint64_t k, const Span& piece) {
    const Codec& codec = *s.plan.use.codec;
    const cclzCodecConfig_t& config = s.plan.use.config;
    const int n = t_.size(), me = t_.rank(), dtype = s.plan.use.dtype;
    const uint64_t eb = s.plan.elemBytes;
    for (int d = 0; d < n; ++d) {
      const Span block = pieceOf(s.plan.chunks[d], s.plan.pieceElems, k);
      codec.encodeDevice(config, dtype,
                         static_cast<const uint8_t*>(s.a.send) +
                             (s.plan.chunks[d].offset + block.offset) * eb,
                         block.count, outgoing_.get() + d * s.slot, nullptr, s.ws, s.stream);
    }
    const uint64_t frameBytes = codec.maxEncodedBytes(config, dtype, piece.count);
    launchFusedPush(fusedPushGrid(), s.stream, symmetric_.devComm(), symmetric_.window(),
                    outgoing_.get(), s.slot, me * s.slot, roundUp(frameBytes, 16),
                    abortFlagDevice_);
    uint8_t* out = static_cast<uint8_t*>(s.a.recv) + piece.offset * eb;
    const float divisor = s.a.redOp == cclzAvg ? static_cast<float>(n) : 1.0f;
    auto* window = static_cast<const uint8_t*>(symmetric_.windowBase());
    auto* acc = reinterpret_cast<float*>(acc_.get());
    for (int r = 0; r < n; ++r) {  // ranks in order, so that every rank and path sums alike
      const uint8_t* frame = r == me ? outgoing_.get() + me * s.slot : window + r * s.slot;
      const ReduceStep step{acc, r == 0, r == n - 1 ? (s.staged ? staging_.get() : out) : nullptr,
                            divisor};
      codec.decodeReduceDevice(config, frame, s.slot, dtype, piece.count, step, s.ws, s.stream);
    }
    launchFusedClose(s.stream, symmetric_.devComm(), abortFlagDevice_);
    if (s.staged)
      CCLZ_CUDA_CHECK(cudaMemcpyAsync(out, staging_.get(), piece.count * eb,
                                      cudaMemcpyDeviceToDevice, s.stream));
  }

 public:
  // The staged parts to their places: one 2D copy, or one copy per rank where the output's
  // pitch is above what a 2D copy takes (2^31 - 1 bytes per rank: cudaDevAttrMaxPitch).
  void copyOut(uint8_t* out, uint64_t pitch, uint64_t stagedPitch, uint64_t bytes, int n,
               cudaStream_t stream) {
    if (pitch <= 0x7FFFFFFFull) {
      CCLZ_CUDA_CHECK(cudaMemcpy2DAsync(out, pitch, staging_.get(), stagedPitch, bytes, n,
                                        cudaMemcpyDeviceToDevice, stream));
      return;
    }
    for (int r = 0; r < n; ++r)
      CCLZ_CUDA_CHECK(cudaMemcpyAsync(out + r * pitch, staging_.get() + r * stagedPitch, bytes,
                                      cudaMemcpyDeviceToDevice, stream));
  }

  cclzResult_t pollError(std::string* message) override {
    DeviceStatus status{};
    CCLZ_CUDA_CHECK(cudaMemcpy(&status, status_, sizeof status, cudaMemcpyDeviceToHost));
    if (status.decodeError == kFrameOk) return cclzSuccess;
    CCLZ_CUDA_CHECK(cudaMemset(&status_->decodeError, 0, sizeof(uint32_t)));
    *message = std::string("the fused all-gather's decode rejected a frame: ") +
               frameErrorText(status.decodeError);
    return cclzCorruptFrame;
  }

 private:
  NcclTransport& t_;
  NcclSymmetric symmetric_;
  LocalArea scratch_, outgoing_, acc_, staging_;
  DeviceStatus* status_ = nullptr;
  cudaEvent_t last_ = nullptr;  // recorded after the last call's work
  bool hasLast_ = false, lastCaptured_ = false;
  volatile uint32_t* abortFlag_ = nullptr;              // pinned, mapped: abort() sets it
  const volatile uint32_t* abortFlagDevice_ = nullptr;  // the same word, for the kernel
};

}  // namespace

std::unique_ptr<FusedNvlink> makeFusedNvlink(Transport& transport) {
  auto* nccl = dynamic_cast<NcclTransport*>(&transport);
  CCLZ_REQUIRE(nccl, cclzNotSupported, "CCLZ_FUSED=1 is for device (NCCL) communicators");
  return std::make_unique<NcclFusedNvlink>(*nccl);
}

#else  // no NCCL device API

std::unique_ptr<FusedNvlink> makeFusedNvlink(Transport&) {
  CCLZ_FAIL(cclzNotSupported,
            "CCLZ_FUSED=1 needs NCCL's device API (NCCL 2.28 or later at build time)");
}

#endif

}  // namespace cclz
