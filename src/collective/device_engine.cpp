// The device engine: codec kernels on three streams of the communicator's device, ordered by
// events so that piece i+1's encode, piece i's transfer and piece i-1's decode overlap:
//   encode stream: encodes of slot s wait until slot s was last moved and decoded;
//   move stream:   the transport's work for slot s waits for its encodes (and for its receive
//                  slots to be decoded);
//   decode stream: decodes of slot s wait for its transfer.
// The caller's stream is joined at begin() and waits for all three at end(). Nothing here waits
// on the host except fetched (the sizes of variable-size frames, one piece ahead of their
// transfer). The call check makes no GPU work (collective/deferred_checks.h).
#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "codec/device.h"
#include "collective/device_kernels.h"
#include "collective/engine.h"
#include "collective/timeline.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/trace.h"

namespace cclz {
namespace {

class DeviceEngine final : public Engine {
 public:
  DeviceEngine(bool highPriorityMove, FrameMemory* frames) : frames_(frames) {
    CCLZ_CUDA_CHECK(cudaGetDevice(&device_));
    // Lower numbers are greater priorities; 0 is the default and the least.
    int least = 0, greatest = 0;
    CCLZ_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    const int movePriority = highPriorityMove ? greatest : 0;
    const int codecPriority = highPriorityMove ? least : 0;
    CCLZ_CUDA_CHECK(cudaStreamCreateWithPriority(&encode_, cudaStreamNonBlocking, codecPriority));
    CCLZ_CUDA_CHECK(cudaStreamCreateWithPriority(&move_, cudaStreamNonBlocking, movePriority));
    CCLZ_CUDA_CHECK(cudaStreamCreateWithPriority(&decode_, cudaStreamNonBlocking, codecPriority));
    for (cudaEvent_t* e : allEvents()) CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(e, kEventFlags));
    CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&status_), sizeof(DeviceStatus)));
    CCLZ_CUDA_CHECK(cudaMemset(status_, 0, sizeof(DeviceStatus)));
    CCLZ_CUDA_CHECK(cudaDeviceSynchronize());
  }

  ~DeviceEngine() override {
    for (cudaStream_t s : {encode_, move_, decode_}) cudaStreamSynchronize(s);
    for (int a = 0; a < static_cast<int>(Area::Count); ++a) freeArea(a);
    cudaFree(status_);
    cudaFreeHost(fetchHost_);
    for (cudaEvent_t* e : allEvents()) cudaEventDestroy(*e);
    for (cudaStream_t s : {encode_, move_, decode_}) cudaStreamDestroy(s);
  }

  MemoryKind memory() const override { return MemoryKind::Device; }

  // Growing waits for this engine's streams (the old areas may still be in use): it happens on
  // the first calls of a size, not in the steady state.
  void reserve(const uint64_t* bytes) override {
    for (int a = 0; a < static_cast<int>(Area::Count); ++a) {
      if (bytes[a] <= capacity_[a]) continue;
      CCLZ_TRACE("engine: area %d grows to %llu bytes", a,
                 static_cast<unsigned long long>(bytes[a]));
      waitIdle();
      freeArea(a);
      areas_[a] = nullptr;
      capacity_[a] = 0;
      if (fromTransport(a))
        areas_[a] = static_cast<uint8_t*>(frames_->allocate(bytes[a]));
      else
        CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&areas_[a]), bytes[a]));
      capacity_[a] = bytes[a];
    }
    const uint64_t fetchBytes = fetchSlotBytes(bytes);
    if (fetchBytes > fetchBytes_) {
      waitIdle();
      CCLZ_CUDA_CHECK(cudaFreeHost(fetchHost_));
      fetchHost_ = nullptr;
      fetchBytes_ = 0;
      CCLZ_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&fetchHost_), kSlots * fetchBytes));
      fetchBytes_ = fetchBytes;
    }
  }
  bool covers(const uint64_t* bytes) const override {
    for (int a = 0; a < static_cast<int>(Area::Count); ++a)
      if (bytes[a] > capacity_[a]) return false;
    return fetchSlotBytes(bytes) <= fetchBytes_;
  }
  uint8_t* area(Area a) override { return areas_[static_cast<int>(a)]; }

  void begin(cclzStream_t stream) override {
    user_ = reinterpret_cast<cudaStream_t>(stream);
    job_ = false;
    ++call_;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    CCLZ_CUDA_CHECK(cudaStreamIsCapturing(user_, &status));
    capturing_ = status != cudaStreamCaptureStatusNone;
    // The timeline's origin goes before start_, which the other streams wait for: recorded after
    // it, a busy GPU could run the first encode before the origin and print a negative time.
    timeline_.start(user_);
    CCLZ_CUDA_CHECK(cudaEventRecord(start_, user_));
    for (cudaStream_t s : {encode_, move_, decode_}) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(s, start_));
    current_ = encode_;
    decodedSlot_ = kNoSlot;
  }

  void beginAfter(void* startEvent) override {
    user_ = nullptr;
    job_ = true;
    ++call_;
    capturing_ = false;  // asyncCalls refuse capture (plan.cpp, refuseCapture)
    const auto start = static_cast<cudaEvent_t>(startEvent);
    for (cudaStream_t s : {encode_, move_, decode_}) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(s, start));
    current_ = encode_;
    decodedSlot_ = kNoSlot;
    timeline_.start(encode_);
  }

  // The move stream waits for the other two; finished_ (pollError) is recorded there.
  cclzStream_t endJoined() override {
    closeDecode();
    timeline_.close();  // before the join, so that the call's end follows the last span's
    CCLZ_CUDA_CHECK(cudaEventRecord(joined_[0], encode_));
    CCLZ_CUDA_CHECK(cudaEventRecord(joined_[2], decode_));
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(move_, joined_[0]));
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(move_, joined_[2]));
    CCLZ_CUDA_CHECK(cudaEventRecord(finished_, move_));
    ran_ = true;
    timeline_.report(move_);
    return reinterpret_cast<cclzStream_t>(move_);
  }

  void end() override {
    finish();
    // A decode's rejected frame or an encode's NaN is reported by cclzCommGetAsyncError once
    // this call's work has finished: judging it here would mean waiting for it.
  }

  void abandon() noexcept override {
    if (job_) return;  // an async job: the proxy joins it with endJoined()
    try {
      finish();
    } catch (...) {
    }
  }

  void stage(Stage s, int slot) override {
    closeDecode();
    switch (s) {
      case Stage::Encode:
        current_ = encode_;
        if (slot != kNoSlot) {
          waitSlot(encode_, moved_, movedIn_, slot);
          waitSlot(encode_, decoded_, decodedIn_, slot);
        }
        break;
      case Stage::Move:
        current_ = move_;
        if (slot != kNoSlot) {
          recordSlot(encoded_, encodedIn_, slot, encode_);
          waitSlot(move_, encoded_, encodedIn_, slot);
          waitSlot(move_, decoded_, decodedIn_, slot);
        }
        break;
      case Stage::Decode:
        current_ = decode_;
        if (slot != kNoSlot) {
          recordSlot(moved_, movedIn_, slot, move_);
          waitSlot(decode_, moved_, movedIn_, slot);
          decodedSlot_ = slot;  // recorded when the next stage begins
        }
        break;
    }
    timeline_.open(s, slot, current_);
  }

  void join() override {
    closeDecode();
    cudaStream_t streams[3] = {encode_, move_, decode_};
    timeline_.close();
    for (int i = 0; i < 3; ++i) CCLZ_CUDA_CHECK(cudaEventRecord(joined_[i], streams[i]));
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j)
        if (i != j) CCLZ_CUDA_CHECK(cudaStreamWaitEvent(streams[i], joined_[j]));
  }

  cclzStream_t moveStream() const override { return reinterpret_cast<cclzStream_t>(move_); }

  void encode(const CodecUse& c, const void* src, uint64_t count, uint8_t* dst, uint64_t,
              uint64_t* sizeSlot, Residual residual, uint64_t step) override {
    const DeviceWorkspace ws = workspace();
    if (!residual) {
      c.codec->encodeDevice(c.config, c.dtype, src, count, dst, sizeSlot, ws, current_);
      return;
    }
    // A residual at an offset that is not aligned to a group of 8 values (32 bytes of fp32, 16
    // of bf16) goes through an aligned copy (the area holds a piece of fp32, so either fits).
    const uint64_t group = 8 * residual.elemBytes();
    const bool aligned = reinterpret_cast<uintptr_t>(residual.data) % group == 0;
    const Residual r = aligned ? residual : Residual{area(Area::Residual), residual.dtype};
    const uint64_t bytes = count * residual.elemBytes();
    if (!aligned)
      CCLZ_CUDA_CHECK(
          cudaMemcpyAsync(r.data, residual.data, bytes, cudaMemcpyDeviceToDevice, current_));
    c.codec->encodeFeedbackDevice(c.config, c.dtype, src, count, r, step, dst, sizeSlot, ws,
                                  current_);
    if (!aligned)
      CCLZ_CUDA_CHECK(
          cudaMemcpyAsync(residual.data, r.data, bytes, cudaMemcpyDeviceToDevice, current_));
  }

  // The blocks as one batch where the codec can (Codec::encodeBlocksDevice); the area's scratch
  // holds the batch's (dataBytes, plan.cpp).
  void encodeBlocks(const CodecUse& c, std::span<const EncodeBlock> blocks, uint64_t) override {
    c.codec->encodeBlocksDevice(c.config, c.dtype, blocks.data(), blocks.size(), workspace(),
                                current_);
  }

  // An output that is not 16-byte aligned (a rank's part of the receive buffer at an odd offset)
  // is decoded into an aligned piece and copied.
  void decode(const CodecUse& c, const uint8_t* src, uint64_t srcBytes, uint64_t count,
              void* dst) override {
    if (reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
      c.codec->decodeDevice(c.config, src, srcBytes, c.dtype, count, dst, workspace(), current_);
      return;
    }
    uint8_t* decoded = area(Area::Decoded);
    c.codec->decodeDevice(c.config, src, srcBytes, c.dtype, count, decoded, workspace(), current_);
    CCLZ_CUDA_CHECK(cudaMemcpyAsync(dst, decoded, count * elementBytes(c.dtype),
                                    cudaMemcpyDeviceToDevice, current_));
  }

  // Codecs without a fused device decode-and-accumulate (lossless, none) decode into a
  // temporary piece and add it; every decode runs on the decode stream, so one temporary serves.
  void decodeAccumulate(const CodecUse& c, const uint8_t* src, uint64_t srcBytes, uint64_t count,
                        float* acc) override {
    if (!unfused_.count(c.codec)) {
      try {
        c.codec->decodeAccumulateDevice(c.config, src, srcBytes, c.dtype, count, acc, workspace(),
                                        current_);
        return;
      } catch (const Error& e) {
        if (e.code() != cclzNotSupported) throw;
        unfused_.insert(c.codec);
      }
    }
    uint8_t* decoded = area(Area::Decoded);
    c.codec->decodeDevice(c.config, src, srcBytes, c.dtype, count, decoded, workspace(), current_);
    reduce::accumulateDevice(acc, decoded, count, c.dtype, current_);
  }

  // Fused where the codec has the step and the output is 16-byte aligned (the decoders store 16
  // bytes at a time); the accumulator always is (Pipeline::accumulator).
  void decodeReduce(const CodecUse& c, const uint8_t* src, uint64_t srcBytes, uint64_t count,
                    float* acc, bool first, bool last, float divisor, void* dst) override {
    const bool fusable = (first || last) && !unfusedReduce_.count(c.codec) &&
                         (!last || reinterpret_cast<uintptr_t>(dst) % 16 == 0);
    if (fusable) {
      try {
        const ReduceStep step{acc, first, last ? dst : nullptr, divisor};
        c.codec->decodeReduceDevice(c.config, src, srcBytes, c.dtype, count, step, workspace(),
                                    current_);
        return;
      } catch (const Error& e) {
        if (e.code() != cclzNotSupported) throw;
        unfusedReduce_.insert(c.codec);
      }
    }
    Engine::decodeReduce(c, src, srcBytes, count, acc, first, last, divisor, dst);
  }

  // In one pass where the codec has one and dst is 16-byte aligned (the pass stores 16 bytes at
  // a time).
  void decodeSum(const CodecUse& c, std::span<const uint8_t* const> frames, uint64_t srcBytes,
                 uint64_t count, float* acc, float divisor, void* dst) override {
    const int n = static_cast<int>(frames.size());
    if (!c.codec->sumsInOnePass(c.config, n) || reinterpret_cast<uintptr_t>(dst) % 16 != 0) {
      Engine::decodeSum(c, frames, srcBytes, count, acc, divisor, dst);
      return;
    }
    FrameSum sum;
    std::copy(frames.begin(), frames.end(), sum.frames);
    sum.n = n, sum.frameBytes = srcBytes, sum.store = dst, sum.divisor = divisor;
    c.codec->decodeSumDevice(c.config, sum, c.dtype, count, workspace(), current_);
  }

  void zero(float* acc, uint64_t count) override {
    CCLZ_CUDA_CHECK(cudaMemsetAsync(acc, 0, count * sizeof(float), current_));
  }

  void accumulate(const void* src, uint64_t count, int dtype, float* acc) override {
    reduce::accumulateDevice(acc, src, count, dtype, current_);
  }

  void store(const float* acc, uint64_t count, float divisor, int dtype, void* dst) override {
    reduce::storeDevice(acc, count, divisor, dtype, dst, current_);
  }

  void addResidual(void* dst, const void* src, Residual residual, uint64_t count,
                   int dtype) override {
    reduce::addResidualDevice(dst, src, residual, count, dtype, current_);
  }

  void foldError(Residual residual, const void* intended, const void* got, uint64_t count,
                 int dtype, float factor) override {
    reduce::foldDevice(residual, intended, got, count, dtype, factor, current_);
  }

  void fetch(int slot, const void* src, uint64_t bytes) override {
    // Sized by reserve(), before the call queues work: growing here would drain the streams
    // between two pieces of the call.
    CCLZ_REQUIRE(bytes <= fetchBytes_, cclzInternalError,
                 "frame sizes fetched beyond the reserved Sizes area");
    CCLZ_CUDA_CHECK(cudaMemcpyAsync(fetchHost_ + slot * fetchBytes_, src, bytes,
                                    cudaMemcpyDeviceToHost, current_));
    CCLZ_CUDA_CHECK(cudaEventRecord(fetchedEvent_[slot], current_));
  }

  const void* fetched(int slot) override {
    CCLZ_REQUIRE(!capturing_, cclzInvalidUsage,
                 "this call's frames vary in size (lossless over NCCL), and their sizes go "
                 "through the host, which a CUDA graph cannot wait for: capture calls with the "
                 "fp8, qgrad or none codecs, and make lossless calls outside the graph");
    CCLZ_TRACE("engine: waiting for the frame sizes of slot %d", slot);
    waitFor(fetchedEvent_[slot]);
    CCLZ_TRACE("engine: frame sizes of slot %d here", slot);
    return fetchHost_ + slot * fetchBytes_;
  }

  cclzResult_t pollError(std::string* message) override {
    if (!ran_) return cclzSuccess;
    const cudaError_t state = cudaEventQuery(finished_);
    if (state == cudaErrorNotReady) return cclzSuccess;  // not finished: not judged yet
    CCLZ_CUDA_CHECK(state);
    return takeDeviceError(status_, "a device decode", "a device encode", message);
  }

 private:
  static constexpr unsigned kEventFlags = cudaEventDisableTiming;

  static uint64_t elementBytes(int dtype) {
    return dtypeSize(static_cast<cclzDataType_t>(dtype));
  }

  std::vector<cudaEvent_t*> allEvents() {
    std::vector<cudaEvent_t*> all = {&start_, &finished_, &idle_};
    for (int s = 0; s < kSlots; ++s) {
      all.push_back(&encoded_[s]);
      all.push_back(&moved_[s]);
      all.push_back(&decoded_[s]);
      all.push_back(&fetchedEvent_[s]);
    }
    for (cudaEvent_t& e : joined_) all.push_back(&e);
    return all;
  }

  DeviceWorkspace workspace() {
    return DeviceWorkspace{status_, area(Area::CodecScratch),
                           capacity_[static_cast<int>(Area::CodecScratch)]};
  }

  // The decode stage of a slot ends where the next stage begins.
  void closeDecode() {
    if (decodedSlot_ == kNoSlot) return;
    recordSlot(decoded_, decodedIn_, decodedSlot_, decode_);
    decodedSlot_ = kNoSlot;
  }

  // Records a slot's event; the call that did (a captured call's count is kept negative).
  void recordSlot(cudaEvent_t* events, int64_t* recordedIn, int slot, cudaStream_t s) {
    CCLZ_CUDA_CHECK(cudaEventRecord(events[slot], s));
    recordedIn[slot] = capturing_ ? -call_ : call_;
  }

  // A slot's last use may belong to an earlier call: waiting for it keeps calls on different
  // streams from sharing a slot at once. Across the edge of a CUDA graph's capture no wait is
  // possible (the runtime refuses a captured call's dependency on uncaptured work, and any use
  // of an event last recorded in a capture outside it), so a captured call waits only for its
  // own events, and a direct call for none recorded in a capture. The order then comes from the
  // caller's stream: every call joins it at its end, and a graph runs after what its launching
  // stream queued before it (docs/collectives.md, "CUDA graphs").
  void waitSlot(cudaStream_t s, const cudaEvent_t* events, const int64_t* recordedIn, int slot) {
    if (capturing_ ? recordedIn[slot] != -call_ : recordedIn[slot] < 0) return;
    CCLZ_CUDA_CHECK(cudaStreamWaitEvent(s, events[slot]));
  }

  void finish() {
    closeDecode();
    timeline_.close();  // before the join, so that the call's end follows the last span's
    cudaStream_t streams[3] = {encode_, move_, decode_};
    for (int i = 0; i < 3; ++i) {
      CCLZ_CUDA_CHECK(cudaEventRecord(joined_[i], streams[i]));
      CCLZ_CUDA_CHECK(cudaStreamWaitEvent(user_, joined_[i]));
    }
    CCLZ_CUDA_CHECK(cudaEventRecord(finished_, user_));
    ran_ = !capturing_;  // a graph's replays are not judged by pollError: it cannot query them
    timeline_.report(user_);
  }

  // The frame areas come from the transport where it provides them (CommSettings::transportFrames).
  bool fromTransport(int a) const {
    return frames_ && (a == static_cast<int>(Area::SendFrames) ||
                       a == static_cast<int>(Area::RecvFrames));
  }
  void freeArea(int a) noexcept {
    if (!areas_[a]) return;
    if (fromTransport(a))
      frames_->release(areas_[a]);
    else
      cudaFree(areas_[a]);
  }

  void cancelWaitsWhen(const std::atomic<bool>* flag) override { cancel_ = flag; }

  void waitIdle() {
    for (cudaStream_t s : {encode_, move_, decode_}) {
      CCLZ_CUDA_CHECK(cudaEventRecord(idle_, s));
      waitFor(idle_);
    }
  }

  // cudaEventSynchronize, unless cancelWaitsWhen's flag may end the wait: then the event is
  // polled with a yield between polls (as the runtime's default spin-wait does) and the flag
  // read each time.
  void waitFor(cudaEvent_t event) {
    if (!cancel_) {
      CCLZ_CUDA_CHECK(cudaEventSynchronize(event));
      return;
    }
    for (;;) {
      const cudaError_t state = cudaEventQuery(event);
      if (state != cudaErrorNotReady) {
        CCLZ_CUDA_CHECK(state);
        return;
      }
      CCLZ_REQUIRE(!cancel_->load(), cclzInvalidUsage,
                   "an earlier call's deferred check found that the ranks disagree: the work "
                   "this call waits for may never finish, so the communicator was aborted");
      std::this_thread::yield();
    }
  }

  int device_ = 0;
  cudaStream_t encode_ = nullptr, move_ = nullptr, decode_ = nullptr;
  cudaStream_t user_ = nullptr, current_ = nullptr;
  cudaEvent_t start_ = nullptr, finished_ = nullptr;
  cudaEvent_t idle_ = nullptr;                    // waitIdle's, recorded on each stream in turn
  const std::atomic<bool>* cancel_ = nullptr;     // cancelWaitsWhen
  cudaEvent_t encoded_[kSlots] = {}, moved_[kSlots] = {}, decoded_[kSlots] = {};
  cudaEvent_t fetchedEvent_[kSlots] = {};
  // The host copies of fetch(): one per slot, each as large as one slot's share of the Sizes area.
  static uint64_t fetchSlotBytes(const uint64_t* bytes) {
    return bytes[static_cast<int>(Area::Sizes)] / kSlots;
  }
  uint8_t* fetchHost_ = nullptr;  // kSlots pinned host copies of fetchBytes_ each (fetch)
  uint64_t fetchBytes_ = 0;
  cudaEvent_t joined_[3] = {};
  // The call (begin's count) that last recorded each slot's events, for waitSlot.
  int64_t encodedIn_[kSlots] = {}, movedIn_[kSlots] = {}, decodedIn_[kSlots] = {};
  int64_t call_ = 0;
  bool capturing_ = false;  // this call is being captured into a CUDA graph
  int decodedSlot_ = kNoSlot;
  bool ran_ = false;
  bool job_ = false;  // the current call is an async job (beginAfter)
  DeviceStatus* status_ = nullptr;
  uint8_t* areas_[static_cast<int>(Area::Count)] = {};
  uint64_t capacity_[static_cast<int>(Area::Count)] = {};
  std::set<const Codec*> unfused_;
  std::set<const Codec*> unfusedReduce_;  // codecs without the fused first and last steps
  Timeline timeline_;  // CCLZ_TIMELINE=1 only
  FrameMemory* frames_ = nullptr;  // the frame areas' source; NULL: cudaMalloc
};

}  // namespace

std::unique_ptr<Engine> makeDeviceEngine(bool highPriorityMove, FrameMemory* frames) {
  return std::make_unique<DeviceEngine>(highPriorityMove, frames);
}

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
