// The done events of a communicator's queued calls (cclzCommConfig_t.asyncCalls): what
// cclzCommStreamWait waits for. The caller's thread numbers each call as it queues it (issue);
// the proxy thread, once it has queued the call's last work, publishes the call's done event, or
// nothing where the call queued no work it could join (it failed, or was cancelled by an abort).
// waitFor(ticket) blocks the host until call `ticket` is published (queued on the GPU, not run)
// and returns the latest event published so far. That one event covers every earlier call too:
// the proxy runs calls in order on the same engine streams and joins them into one stream before
// it records a call's event. So a stream never waits for an event before it has been recorded,
// which is the point (docs/collectives.md, "Calls that return at once").
// Plain C++: an event is an opaque shared_ptr (a cudaEvent_t with cudaEventDestroy as deleter),
// so that this builds and is tested without CUDA.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace cclz {

class DoneEvents {
 public:
  using Event = std::shared_ptr<void>;

  // The next call's ticket (1, 2, ...), on the thread that queues calls.
  uint64_t issue();
  // The last ticket issued (0: none).
  uint64_t lastIssued();
  // Call `ticket` has queued its work; `event` (may be null) is recorded after it. The proxy
  // publishes in ticket order; an abort may publish cancelled tickets before the running one,
  // which only matters to a wait that nothing may start once the communicator is aborted.
  void publish(uint64_t ticket, Event event);
  // Blocks until ticket `ticket` (and so every earlier one) is published; returns the latest
  // event published, null when no call has published one.
  Event waitFor(uint64_t ticket);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  uint64_t issued_ = 0;
  uint64_t published_ = 0;
  uint64_t latestTicket_ = 0;  // the ticket of latest_
  Event latest_;
};

}  // namespace cclz
