#include "collective/communicator.h"

#include <cstdlib>
#include <string>

#include "common/error.h"

namespace cclz {

CommSettings CommSettings::fromEnvironment() {
  CommSettings s;
  if (const char* piece = std::getenv("CCLZ_PIECE_BYTES"); piece && *piece) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(piece, &end, 10);
    uint64_t scale = 1;
    if (end && (*end == 'K' || *end == 'k')) scale = 1ull << 10, ++end;
    if (end && (*end == 'M' || *end == 'm')) scale = 1ull << 20, ++end;
    CCLZ_REQUIRE(end && *end == '\0' && v > 0 && v <= (1ull << 30) / scale, cclzInvalidArgument,
                 std::string("CCLZ_PIECE_BYTES=") + piece +
                     ": expected a size from 1 to 1G (K and M suffixes allowed)");
    s.pieceBytes = v * scale;
  }
  if (const char* check = std::getenv("CCLZ_CHECK_CALLS"); check && *check) {
    const std::string v = check;
    CCLZ_REQUIRE(v == "1" || v == "first", cclzInvalidArgument,
                 "CCLZ_CHECK_CALLS=" + v + ": expected 1 (every call) or first");
    s.checkEveryCall = v == "1";
  }
  return s;
}

Communicator::Communicator(std::unique_ptr<Transport> transport, CommSettings settings)
    : transport_(std::move(transport)), settings_(settings) {
#ifdef CCLZ_HAVE_CUDA
  engine_ = transport_->memory() == MemoryKind::Device ? makeDeviceEngine() : makeHostEngine();
#else
  CCLZ_REQUIRE(transport_->memory() == MemoryKind::Host, cclzInvalidUsage,
               "a device transport needs a build with CUDA");
  engine_ = makeHostEngine();
#endif
}

Communicator::~Communicator() = default;

bool Communicator::shouldCheck(CollOp op) {
  const uint32_t bit = 1u << static_cast<int>(op);
  const bool first = (checkedOps_ & bit) == 0;
  checkedOps_ |= bit;
  return settings_.checkEveryCall || first;
}

cclzResult_t Communicator::asyncError(std::string* message) {
  *message = transport_->asyncError();
  if (!message->empty()) return cclzSystemError;
  return engine_->pollError(message);
}

void Communicator::abort() { transport_->abort(); }

void Communicator::setLastError(const std::string& message) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  lastError_ = message;
}

const char* Communicator::lastError() {
  std::lock_guard<std::mutex> lock(errorMutex_);
  lastErrorCopy_ = lastError_;
  return lastErrorCopy_.c_str();
}

}  // namespace cclz
