// A communicator: a transport, the engine that runs codecs on the transport's memory, and the
// settings every call uses. The C handle (struct cclzComm) wraps one.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "collective/descriptor.h"
#include "collective/engine.h"
#include "transport/transport.h"

namespace cclz {

struct CommSettings {
  uint64_t pieceBytes = uint64_t{4} << 20;  // input bytes per frame (CCLZ_PIECE_BYTES)
  // Check every call's arguments across ranks (CCLZ_CHECK_CALLS=1, the default), or only the first
  // call of each kind (=first): the check costs one small exchange, and on a device communicator
  // a host synchronization (docs/collectives.md, "Checking the call").
  bool checkEveryCall = true;

  // From the environment (CCLZ_PIECE_BYTES, CCLZ_CHECK_CALLS); every rank must see the same.
  static CommSettings fromEnvironment();
};

class Communicator {
 public:
  Communicator(std::unique_ptr<Transport> transport, CommSettings settings);
  ~Communicator();

  Transport& transport() { return *transport_; }
  Engine& engine() { return *engine_; }
  const CommSettings& settings() const { return settings_; }

  // Whether a call of this kind checks its descriptors now. Every rank makes the same calls in
  // the same order, so every rank answers alike.
  bool shouldCheck(CollOp op);

  // cclzCommGetAsyncError: the transport's asynchronous error (cclzSystemError), else the device
  // engine's error word of finished work, read without waiting; cclzSuccess when none.
  cclzResult_t asyncError(std::string* message);
  void abort();

  // The message of the last failed call on this communicator (cclzGetLastError(comm)).
  void setLastError(const std::string& message);
  const char* lastError();

 private:
  std::unique_ptr<Transport> transport_;
  std::unique_ptr<Engine> engine_;
  CommSettings settings_;
  uint32_t checkedOps_ = 0;  // bit per CollOp already checked
  std::mutex errorMutex_;
  std::string lastError_;
  std::string lastErrorCopy_;  // what lastError() handed out
};

}  // namespace cclz

// The handle of the C API.
struct cclzComm {
  std::unique_ptr<cclz::Communicator> impl;
};
