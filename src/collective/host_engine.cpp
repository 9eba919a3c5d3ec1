// The host engine: the CPU reference codecs on host memory, one call after the other.
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "collective/engine.h"
#include "collective/reduce.h"
#include "common/dtype.h"
#include "common/error.h"

namespace cclz {
namespace {

// A 64-byte aligned host buffer that only grows.
class HostBuffer {
 public:
  ~HostBuffer() { release(); }
  uint8_t* data() { return data_; }
  uint64_t size() const { return bytes_; }
  void ensure(uint64_t bytes) {
    if (bytes <= bytes_) return;
    release();
    data_ = static_cast<uint8_t*>(::operator new(bytes, std::align_val_t{64}));
    bytes_ = bytes;
  }

 private:
  void release() {
    if (data_) ::operator delete(data_, std::align_val_t{64});
    data_ = nullptr;
    bytes_ = 0;
  }
  uint8_t* data_ = nullptr;
  uint64_t bytes_ = 0;
};

class HostEngine final : public Engine {
 public:
  MemoryKind memory() const override { return MemoryKind::Host; }

  void reserve(const uint64_t* bytes) override {
    for (int a = 0; a < static_cast<int>(Area::Count); ++a) areas_[a].ensure(bytes[a]);
  }
  bool covers(const uint64_t* bytes) const override {
    for (int a = 0; a < static_cast<int>(Area::Count); ++a)
      if (bytes[a] > areas_[a].size()) return false;
    return true;
  }
  uint8_t* area(Area a) override { return areas_[static_cast<int>(a)].data(); }

  void begin(cclzStream_t) override { firstError_.reset(); }
  void end() override {
    if (!firstError_) return;
    const Error error = *firstError_;
    firstError_.reset();
    throw error;
  }
  void abandon() noexcept override { firstError_.reset(); }

  void beginAfter(void*) override {
    CCLZ_FAIL(cclzInternalError, "a host engine runs no async jobs");
  }
  cclzStream_t endJoined() override {
    CCLZ_FAIL(cclzInternalError, "a host engine runs no async jobs");
  }

  void stage(Stage, int) override {}
  void join() override {}
  cclzStream_t moveStream() const override { return nullptr; }

  void encode(const CodecUse& c, const void* src, uint64_t count, uint8_t* dst, uint64_t capacity,
              uint64_t* sizeSlot, Residual residual, uint64_t step) override {
    try {
      *sizeSlot = residual ? c.codec->encodeFeedbackHost(c.config, c.dtype, src, count, residual,
                                                         step, dst, capacity)
                           : c.codec->encodeHost(c.config, c.dtype, src, count, dst, capacity);
    } catch (const NonFiniteInput& e) {
      *sizeSlot = e.frameBytes();  // the frame is complete: send it, report at the end
      keep(e);
    }
  }

  void decode(const CodecUse& c, const uint8_t* src, uint64_t srcBytes, uint64_t count,
              void* dst) override {
    check(c.codec->decodeHost(c.config, src, srcBytes, c.dtype, count, dst), c);
  }

  void decodeAccumulate(const CodecUse& c, const uint8_t* src, uint64_t srcBytes, uint64_t count,
                        float* acc) override {
    check(c.codec->decodeAccumulateHost(c.config, src, srcBytes, c.dtype, count, acc), c);
  }

  void zero(float* acc, uint64_t count) override { std::memset(acc, 0, count * sizeof(float)); }

  void accumulate(const void* src, uint64_t count, int dtype, float* acc) override {
    for (uint64_t i = 0; i < count; ++i) reduce::accumulateElement(acc, i, src, dtype);
  }

  void store(const float* acc, uint64_t count, float divisor, int dtype, void* dst) override {
    for (uint64_t i = 0; i < count; ++i) reduce::storeElement(acc, i, divisor, dtype, dst);
  }

  void addResidual(void* dst, const void* src, Residual residual, uint64_t count,
                   int dtype) override {
    for (uint64_t i = 0; i < count; ++i) reduce::addResidualElement(dst, src, residual, i, dtype);
  }

  void foldError(Residual residual, const void* intended, const void* got, uint64_t count,
                 int dtype, float factor) override {
    for (uint64_t i = 0; i < count; ++i)
      reduce::foldElement(residual, i, intended, got, dtype, factor);
  }

  void fetch(int slot, const void* src, uint64_t) override { fetched_[slot] = src; }
  const void* fetched(int slot) override { return fetched_[slot]; }

 private:
  // A frame the codec rejected: its output is left alone, the call goes on, end() reports it.
  void check(uint32_t err, const CodecUse& c) {
    if (err == kFrameOk) return;
    keep(Error(cclzCorruptFrame, std::string("a received ") + c.codec->name() +
                                     " frame failed validation: " + frameErrorText(err)));
  }
  void keep(const Error& e) {
    if (!firstError_) firstError_ = std::make_unique<Error>(e);
  }

  HostBuffer areas_[static_cast<int>(Area::Count)];
  const void* fetched_[kSlots] = {};
  std::unique_ptr<Error> firstError_;
};

}  // namespace

std::unique_ptr<Engine> makeHostEngine() { return std::make_unique<HostEngine>(); }

}  // namespace cclz
