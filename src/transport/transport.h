// The transport: what the collective algorithms (src/collective) need from a network, and nothing
// more (DESIGN.md: algorithms are written once). Two real backends, mpi/ (host buffers) and nccl/
// (device buffers, stream-ordered), and an in-process loopback (loopback.h) for tests.
//
// Point-to-point only: a group of sends and receives is opened with groupStart, filled with send
// and recv, and closed with groupEnd, like ncclGroupStart/End. Within a group the order of calls
// does not matter (no group deadlocks on itself); between two ranks, messages match in the order
// they were posted. Every rank must post the same sequence of groups against its peers.
#pragma once

#include <cstdint>
#include <string>

#include "cclz/cclz.h"

namespace cclz {

// Where the buffers a transport moves live, and so where the codecs run.
enum class MemoryKind { Host, Device };

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual MemoryKind memory() const = 0;
  virtual const char* name() const = 0;

  // True when a receive posted with a capacity learns the size that arrived (MPI_Get_count):
  // variable-size frames then need no size exchange. False when sender and receiver must post
  // the same byte count (NCCL).
  virtual bool learnsReceivedSize() const = 0;

  // Opens a group. stream: where a device transport queues the group's work (a cudaStream_t);
  // host transports ignore it.
  virtual void groupStart(cclzStream_t stream) = 0;
  // bytes from buf (in memory()) to peer. buf must stay valid and unchanged until the group is
  // complete (host: groupEnd returned; device: the stream has passed the group).
  virtual void send(const void* buf, uint64_t bytes, int peer) = 0;
  // Up to capacity bytes from peer into buf. Where learnsReceivedSize(), *receivedBytes (host
  // memory, may be NULL) holds the size that arrived once groupEnd returns; otherwise the peer
  // must send exactly `capacity` bytes.
  virtual void recv(void* buf, uint64_t capacity, int peer, uint64_t* receivedBytes) = 0;
  // Host transports: returns when every send and receive of the group is complete. Device
  // transports: returns once the group is queued on the stream.
  virtual void groupEnd() = 0;

  // An error the network met outside a call (NCCL's asynchronous errors); empty when none.
  virtual std::string asyncError() { return {}; }
  // Stops what is in flight and makes the transport unusable (cclzCommAbort).
  virtual void abort() {}
};

}  // namespace cclz
