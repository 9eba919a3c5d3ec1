#include "registry.h"

#include <mutex>

#include "companion.h"

namespace cclz::interpose {

Registry& Registry::get() {
  static Registry* registry = new Registry;
  return *registry;
}

bool Registry::isInternal(ncclComm_t comm) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return internal_.count(comm) != 0;
}

void Registry::addInternal(ncclComm_t comm) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  internal_.insert(comm);
}

void Registry::removeInternal(ncclComm_t comm) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  internal_.erase(comm);
}

std::shared_ptr<Companion> Registry::companion(ncclComm_t user) {
  {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    auto it = companions_.find(user);
    if (it != companions_.end()) return it->second;
  }
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto& slot = companions_[user];
  if (!slot) slot = std::make_shared<Companion>(user);
  return slot;
}

std::shared_ptr<Companion> Registry::take(ncclComm_t user) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto it = companions_.find(user);
  if (it == companions_.end()) return nullptr;
  std::shared_ptr<Companion> companion = std::move(it->second);
  companions_.erase(it);
  return companion;
}

}  // namespace cclz::interpose
