// The engine: where a collective's codec calls run and its scratch lives, so that the algorithms
// (collectives.cpp) are written once for host and device memory. The host engine calls the CPU
// reference and finishes each call before it returns; the device engine queues kernels on three
// streams (encode, move, decode) ordered by events, so that encoding piece i+1, moving piece i and
// decoding piece i-1 overlap, and never synchronizes the host except where a call waits for
// frame sizes (fetched).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "cclz/cclz.h"
#include "codec/residual.h"
#include "codec/codec.h"
#include "transport/transport.h"

namespace cclz {

// One codec as a collective uses it: implementation, configuration, element type.
struct CodecUse {
  const Codec* codec;
  cclzCodecConfig_t config;
  int dtype;
};

// The stages of one pipeline piece. Piece i uses slot i % kSlots, and stage(Encode, s) waits
// until the previous piece in slot s has been moved and decoded. Three slots: where frame sizes
// go ahead of the frames (pipeline.h, runPieces), piece i's encode and size exchange then wait
// for piece i - 3, which finished long ago, rather than for the transfer of piece i - 2.
enum class Stage { Encode, Move, Decode };
constexpr int kSlots = 3;
constexpr int kNoSlot = -1;  // a stage with no slot buffers (a plain call's single step)

// Scratch areas, one per purpose, kept between calls. Decoded (device): one piece in its dtype,
// for codecs without a fused decode-and-accumulate and for outputs that are not 16-byte aligned
// (the device decoders store 16 bytes at a time). Residual (device): one piece of residual, where
// the caller's is not aligned to a group of 8 values (qgrad's encode loads 8 at a time: 32 bytes
// of fp32, 16 of bf16).
// CodecScratch: what a device encode asks for (Codec::encodeScratchBytes).
enum class Area {
  SendFrames,
  RecvFrames,
  Accumulator,
  Sizes,
  Shard,
  Decoded,
  Residual,
  CodecScratch,
  Folded,  // a plain reduce-scatter with error feedback: its data plus the residual
  Partial,  // the two-level reduce-scatter: a node's sum of one piece, in its dtype, to encode
  Align,    // an adaptive trial's meeting of the ranks (adaptive_path.cpp): bytes never read
  Count
};

class Engine {
 public:
  virtual ~Engine() = default;
  virtual MemoryKind memory() const = 0;

  // Sizes every area (bytes[Area::Count]), and the host copies of fetch() after the Sizes area
  // (one slot's share each), before a call queues any work. Growing on the device waits for the
  // engine's streams, and its cudaFree and cudaMallocHost wait for the whole device. covers()
  // says whether reserve(bytes) would grow nothing. area() returns an area's base.
  virtual void reserve(const uint64_t* bytes) = 0;
  virtual bool covers(const uint64_t* bytes) const = 0;
  virtual uint8_t* area(Area a) = 0;

  // A collective starts after the work queued on `stream` and, at end(), `stream` waits for it.
  // end() throws the first error a host codec call met (see fail()); abandon() is end() on an
  // error path and never throws.
  virtual void begin(cclzStream_t stream) = 0;
  virtual void end() = 0;
  virtual void abandon() noexcept = 0;

  // An async job of the proxy (proxy.h), device engine only: the call's work waits for
  // `startEvent` (a cudaEvent_t the caller recorded on its stream when it made the call) instead
  // of a stream, and endJoined() gathers the work of every stage into one stream and returns it:
  // what is queued there after the return runs after the whole call (its done event).
  virtual void beginAfter(void* startEvent) = 0;
  virtual cclzStream_t endJoined() = 0;

  virtual void stage(Stage s, int slot) = 0;
  // Every stream waits for all work queued so far (between the phases of an all-reduce).
  virtual void join() = 0;
  // The stream of the Move stage, for the transport.
  virtual cclzStream_t moveStream() const = 0;

  // Codec calls, on the current stage's stream. encode writes the frame's size to *sizeSlot
  // (engine memory); with a residual it is the error-feedback encode (step numbers its draws).
  // Host engine: a NaN/Inf (qgrad) or a corrupt frame does not stop the call, so that every rank
  // still sends and receives what its peers expect; end() reports it.
  virtual void encode(const CodecUse& c, const void* src, uint64_t count, uint8_t* dst,
                      uint64_t capacity, uint64_t* sizeSlot, Residual residual,
                      uint64_t step) = 0;
  // The encode of one piece's blocks, one per destination (a reduction's without error feedback,
  // an all-to-all's), each frame of `capacity`: this default encodes them one by one; the device
  // engine encodes blocks of one count as one batch where the codec can
  // (Codec::encodeBatchDevice), with the same bytes.
  // (EncodeBlock, codec/codec.h: sizeOut is the frame's size slot in engine memory.)
  virtual void encodeBlocks(const CodecUse& c, std::span<const EncodeBlock> blocks,
                            uint64_t capacity) {
    for (const EncodeBlock& b : blocks)
      encode(c, b.src, b.count, b.dst, capacity, b.sizeOut, Residual{}, 0);
  }
  virtual void decode(const CodecUse& c, const uint8_t* src, uint64_t srcBytes, uint64_t count,
                      void* dst) = 0;
  virtual void decodeAccumulate(const CodecUse& c, const uint8_t* src, uint64_t srcBytes,
                                uint64_t count, float* acc) = 0;

  // One frame's step of a sum over frames (a reduce-scatter's decode stage): acc += the decoded
  // frame, where `first` starts acc from zero and `last` stores round(sum / divisor) into dst
  // (the codec's dtype) instead. This default zeroes, adds and stores one call at a time (the
  // host engine's: the bits every engine gives); the device engine fuses the first and last
  // steps into the decode where the codec can (Codec::decodeReduceDevice).
  virtual void decodeReduce(const CodecUse& c, const uint8_t* src, uint64_t srcBytes,
                            uint64_t count, float* acc, bool first, bool last, float divisor,
                            void* dst) {
    if (first) zero(acc, count);
    decodeAccumulate(c, src, srcBytes, count, acc);
    if (last) store(acc, count, divisor, c.dtype, dst);
  }

  // The whole sum of a piece's frames, frames[r] in rank order (srcBytes each), with no step in
  // between: dst = round(sum / divisor). This default takes decodeReduce's steps through acc; the
  // device engine takes the codec's one pass where it has one (Codec::decodeSumDevice).
  virtual void decodeSum(const CodecUse& c, std::span<const uint8_t* const> frames,
                         uint64_t srcBytes, uint64_t count, float* acc, float divisor, void* dst) {
    const size_t n = frames.size();
    for (size_t r = 0; r < n; ++r)
      decodeReduce(c, frames[r], srcBytes, count, acc, r == 0, r + 1 == n, divisor, dst);
  }

  virtual void zero(float* acc, uint64_t count) = 0;
  // acc[i] += src[i] (count elements of dtype, as they are: no frame), in fp32 as decodeReduce
  // adds: the two-level reduce-scatter's sum of its node's raw pieces.
  virtual void accumulate(const void* src, uint64_t count, int dtype, float* acc) = 0;
  // dst[i] = acc[i] / divisor, rounded to dtype (divisor 1 for a sum, the rank count for avg).
  virtual void store(const float* acc, uint64_t count, float divisor, int dtype, void* dst) = 0;
  // dst[i] = src[i] + residual[i], rounded to dtype, and residual[i] = 0: the error feedback
  // folded into a call that sends plain data (adaptive calls). In place too.
  virtual void addResidual(void* dst, const void* src, Residual residual, uint64_t count,
                           int dtype) = 0;
  // residual[i] += factor * (intended[i] - got[i]) (rounded to the residual's dtype), intended
  // and got of dtype: the all-reduce's second quantization folded into the error feedback of
  // the shard this rank owns.
  virtual void foldError(Residual residual, const void* intended, const void* got, uint64_t count,
                         int dtype, float factor) = 0;

  // Frame sizes on their way to the host without draining a stream: fetch queues a copy of
  // `bytes` at src to the host copy of `slot` on the current stream and returns; fetched waits
  // for that copy alone and returns the host copy. The host engine's memory is the host's:
  // fetched returns src itself.
  virtual void fetch(int slot, const void* src, uint64_t bytes) = 0;
  virtual const void* fetched(int slot) = 0;

  // The host waits of a call (fetched, and reserve's wait for the streams) give up, throwing
  // cclzInvalidUsage, once *flag is set: a failed deferred check sets it, because the work they
  // wait for may never finish (Communicator::failCheck). The host engine never waits.
  virtual void cancelWaitsWhen(const std::atomic<bool>* flag) { (void)flag; }

  // A device decode that rejected its frame, or a device encode that met NaN/Inf, in a collective
  // that has finished; read without waiting and then cleared (never on the host,
  // whose errors come back from end()). Returns cclzCorruptFrame or cclzInvalidArgument (NaN/Inf)
  // with *message set, else cclzSuccess.
  virtual cclzResult_t pollError(std::string* message) {
    (void)message;
    return cclzSuccess;
  }
};

std::unique_ptr<Engine> makeHostEngine();
#ifdef CCLZ_HAVE_CUDA
// highPriorityMove: CommSettings::highPriorityMove. frames: where the SendFrames and RecvFrames
// areas come from (NULL: cudaMalloc); it must outlive the engine.
std::unique_ptr<Engine> makeDeviceEngine(bool highPriorityMove, FrameMemory* frames);
#endif

}  // namespace cclz
