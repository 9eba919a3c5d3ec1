// An output buffer with guard bytes on both sides: a decoder may write [data(), data()+size())
// and nothing else. The guards catch stray writes in builds without AddressSanitizer too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cclz::test {

class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 256;  // a multiple of 16: data() stays 16-byte aligned
  static constexpr uint8_t kPattern = 0xA5;

  explicit GuardedBuffer(size_t bytes)
      : bytes_(bytes), storage_(bytes + 2 * kGuardBytes, kPattern) {}

  uint8_t* data() { return storage_.data() + kGuardBytes; }
  const uint8_t* data() const { return storage_.data() + kGuardBytes; }
  size_t size() const { return bytes_; }

  // Refills the inside with a byte (the guards keep their pattern).
  void fill(uint8_t value) {
    for (size_t i = 0; i < bytes_; ++i) data()[i] = value;
  }

  bool guardsIntact() const {
    for (size_t i = 0; i < kGuardBytes; ++i)
      if (storage_[i] != kPattern || storage_[kGuardBytes + bytes_ + i] != kPattern) return false;
    return true;
  }

 private:
  size_t bytes_;
  std::vector<uint8_t> storage_;
};

}  // namespace cclz::test
