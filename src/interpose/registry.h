// Which NCCL communicators are cclz's own, and the companion of each user communicator.
//
// cclz calls NCCL too, through the same exported symbols this library replaces, from the
// caller's thread and from its own threads (the deferred checks, an asyncCalls proxy). So a call
// is told apart by its communicator, not by its thread: every communicator cclz uses is
// registered here as internal (the one split off a user's communicator for cclz, and whatever
// cclz splits off that one), and every call on it goes to NCCL as it is.
#pragma once

#include <nccl.h>

#include <memory>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

namespace cclz::interpose {

class Companion;

class Registry {
 public:
  // Never destroyed: cclz's threads may still call NCCL while the process exits.
  static Registry& get();

  bool isInternal(ncclComm_t comm) const;
  void addInternal(ncclComm_t comm);
  void removeInternal(ncclComm_t comm);

  // The companion of a user communicator, made (not yet set up) on first request.
  std::shared_ptr<Companion> companion(ncclComm_t user);
  // Removes and returns it (NULL if it had none): the user destroys or aborts its communicator.
  std::shared_ptr<Companion> take(ncclComm_t user);

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_set<ncclComm_t> internal_;
  std::unordered_map<ncclComm_t, std::shared_ptr<Companion>> companions_;
};

}  // namespace cclz::interpose
