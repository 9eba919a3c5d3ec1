// The device side of deferred call checks (deferred_checks.h): each slot is a 64-byte block
// copied from pinned host memory to the device, exchanged over the control transport on the
// control stream, copied back into pinned host memory and followed by an event, which the
// checking thread polls. All of it on the checking thread. The control stream waits for nothing
// the data path queued, so a check arrives as soon as its peers' threads have queued the same
// exchange, whatever transfers are still moving.
#ifdef CCLZ_HAVE_CUDA

#include <cuda_runtime_api.h>

#include <cstring>
#include <vector>

#include "codec/device.h"
#include "collective/deferred_checks.h"
#include "common/error.h"
#include "transport/transport.h"

namespace cclz {
namespace {

class DeviceCheckExchange final : public CheckExchange {
 public:
  DeviceCheckExchange(Transport& control, cclzStream_t stream)
      : control_(control), stream_(reinterpret_cast<cudaStream_t>(stream)),
        ranks_(control.size()) {
    CCLZ_CUDA_CHECK(cudaGetDevice(&device_));
    const size_t bytes = static_cast<size_t>(kSlots) * slotBytes();
    CCLZ_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&deviceSlots_), bytes));
    CCLZ_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&hostSlots_), bytes));
    events_.resize(kSlots, nullptr);
    for (cudaEvent_t& e : events_)
      CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  }

  // The slots' copies may still be queued: the stream finishes them before their memory goes.
  ~DeviceCheckExchange() override {
    cudaStreamSynchronize(stream_);
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
    cudaFreeHost(hostSlots_);
    cudaFree(deviceSlots_);
  }

  int slots() const override { return kSlots; }

  // A slot: [ranks_ descriptors received, by rank][this rank's], alike on the host and device.
  void start(int slot, const uint8_t* mine, const std::vector<int>& peers) override {
    const uint64_t d = kBlockBytes;
    uint8_t* host = hostSlots_ + slot * slotBytes();
    uint8_t* dev = deviceSlots_ + slot * slotBytes();
    std::memcpy(host + ranks_ * d, mine, d);
    CCLZ_CUDA_CHECK(cudaMemcpyAsync(dev + ranks_ * d, host + ranks_ * d, d,
                                    cudaMemcpyHostToDevice, stream_));
    const auto stream = reinterpret_cast<cclzStream_t>(stream_);
    if (static_cast<int>(peers.size()) == ranks_ - 1) {
      control_.allGather(dev + ranks_ * d, dev, d, stream);
    } else {
      control_.groupStart(stream);
      for (int r : peers) {
        control_.send(dev + ranks_ * d, d, r);
        control_.recv(dev + r * d, d, r, nullptr);
      }
      control_.groupEnd();
    }
    CCLZ_CUDA_CHECK(cudaMemcpyAsync(host, dev, ranks_ * d, cudaMemcpyDeviceToHost, stream_));
    CCLZ_CUDA_CHECK(cudaEventRecord(events_[slot], stream_));
  }

  bool arrived(int slot) override {
    const cudaError_t state = cudaEventQuery(events_[slot]);
    if (state == cudaErrorNotReady) return false;
    CCLZ_CUDA_CHECK(state);
    return true;
  }

  const uint8_t* received(int slot) override { return hostSlots_ + slot * slotBytes(); }

  // Relaxed capture mode: the thread's event queries must not invalidate a CUDA graph that the
  // caller's thread is capturing in the global mode meanwhile.
  void onCheckingThread() override {
    CCLZ_CUDA_CHECK(cudaSetDevice(device_));
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    CCLZ_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  }

 private:
  static constexpr int kSlots = 64;
  size_t slotBytes() const { return (static_cast<size_t>(ranks_) + 1) * kBlockBytes; }

  Transport& control_;
  cudaStream_t stream_;
  const int ranks_;
  int device_ = 0;
  uint8_t* deviceSlots_ = nullptr;
  uint8_t* hostSlots_ = nullptr;
  std::vector<cudaEvent_t> events_;
};

}  // namespace

std::unique_ptr<CheckExchange> makeDeviceCheckExchange(Transport& control, cclzStream_t stream) {
  return std::make_unique<DeviceCheckExchange>(control, stream);
}

}  // namespace cclz

#endif  // CCLZ_HAVE_CUDA
