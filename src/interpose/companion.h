// cclz's communicator beside a user's NCCL communicator. It is made at the first collective that
// goes through cclz: an NCCL communicator split off the user's (ncclCommSplit, same ranks in the
// same order), wrapped by cclzCommInitFromNcclConfig. The split is collective over the user's
// communicator, and every rank reaches it at the same call, because NCCL requires every rank to
// make the same collective calls in the same order and the route depends only on what those calls
// have in common (route.h). A send or receive makes it only on a communicator of two ranks: on a
// larger one, the other ranks take no part in that call. cclz's communicator is adaptive
// (cclzCommConfig_t.adaptive, the default of CCLZ_ADAPTIVE; CCLZ_INTERPOSE_FORCE=1 turns it off):
// each kind of call runs compressed only where that measured faster.
#pragma once

#include <nccl.h>

#include <mutex>

#include "cclz/cclz.h"
#include "route.h"

namespace cclz::interpose {

class Companion {
 public:
  explicit Companion(ncclComm_t user) : user_(user) {}
  Companion(const Companion&) = delete;
  Companion& operator=(const Companion&) = delete;

  struct Use {
    Reason reason;  // None: comm is ready; else NoCompanion or Unavailable
    cclzComm_t comm = nullptr;
    int device = 0, rank = 0, ranks = 0;
  };
  // The communicator to run a call with, made now if this is the first call that may make it:
  // a collective, or a send or receive on a communicator of two ranks.
  Use use(bool collective);

  // Frees cclz's communicator and its NCCL communicator, before the user's ncclCommDestroy.
  void destroy();
  // Aborts them (cclzCommAbort aborts both NCCL communicators cclz uses), with the user's
  // ncclCommAbort.
  void abort();

 private:
  enum class State { Unmade, Ready, Unavailable };
  void make();  // mutex_ held

  std::mutex mutex_;
  State state_ = State::Unmade;
  ncclComm_t user_;
  ncclComm_t internal_ = nullptr;
  cclzComm_t comm_ = nullptr;
  int device_ = 0, rank_ = 0, ranks_ = 0;
};

}  // namespace cclz::interpose
