// The transport: what the collective algorithms (src/collective) need from a network, and nothing
// more (DESIGN.md: algorithms are written once). Two real backends, mpi/ (host buffers) and nccl/
// (device buffers, stream-ordered), and an in-process loopback (loopback.h) for tests.
//
// Point to point: a group of sends and receives is opened with groupStart, filled with send and
// recv, and closed with groupEnd, like ncclGroupStart/End. Within a group the order of calls does
// not matter (no group deadlocks on itself, a rank may send to itself); between two ranks,
// messages match in the order they were posted. Every rank must post the same sequence of groups
// and collectives against its peers.
//
// Collectives: allGather moves bytes (the compressed all-gather's frames go through the network's
// tuned algorithm, which beats a group of sends on every network measured); reduceScatter and
// allReduce are the network's own reductions of plain data, for the codec none.
#pragma once

#include <cstdint>
#include <string>

#include "cclz/cclz.h"

namespace cclz {

class HostMesh;

// Where the buffers a transport moves live, and so where the codecs run.
enum class MemoryKind { Host, Device };

// Device memory for the frames a transport moves (the engine's SendFrames and RecvFrames areas),
// from the transport instead of cudaMalloc: NCCL registers it as a symmetric window, so that its
// collectives over NVLink may move frames with the copy engines instead of kernels that share the
// multiprocessors with the codecs (CCLZ_NCCL_WINDOWS, docs/collectives.md). Both calls are
// collective: every rank allocates and releases the same sizes in the same order, as the
// engine's reserve() does (its sizes follow from the call, checked equal across ranks).
class FrameMemory {
 public:
  virtual ~FrameMemory() = default;
  virtual void* allocate(uint64_t bytes) = 0;
  virtual void release(void* p) noexcept = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Where the device engine's frame areas come from; NULL: cudaMalloc.
  virtual FrameMemory* frameMemory() { return nullptr; }

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

  // Every rank's `bytes` at send land in recv at rank * bytes, in rank order, its own included
  // (recv holds size() * bytes; send does not overlap it). Every rank calls it with the same
  // bytes, outside a group; queued on stream like a group (device), complete on return (host).
  virtual void allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t stream) = 0;

  // The network's own reductions of count elements of dtype (a cclzDataType_t): sum, or average
  // when `average`. reduceScatter's recv holds count elements, send size() * count. False, doing
  // nothing, where the transport has none for this call: the collective runs its pipeline.
  virtual bool reduceScatter(const void* send, void* recv, uint64_t count, int dtype,
                             bool average, cclzStream_t stream) {
    (void)send, (void)recv, (void)count, (void)dtype, (void)average, (void)stream;
    return false;
  }
  virtual bool allReduce(const void* send, void* recv, uint64_t count, int dtype, bool average,
                         cclzStream_t stream) {
    (void)send, (void)recv, (void)count, (void)dtype, (void)average, (void)stream;
    return false;
  }

  // The largest message one send, receive or allGather part may hold (MPI counts are ints).
  virtual uint64_t maxMessageBytes() const { return UINT64_MAX; }

  // Where a device transport's control exchanges go (the call check, the adaptive calls' trial
  // times; src/collective/plan.cpp, exchangeWithPeers): a TCP mesh of the same ranks that
  // launches no GPU work (host_mesh.h). NULL for host transports: they finish every message
  // before returning, so the check goes through the transport itself.
  virtual HostMesh* controlMesh() { return nullptr; }

  // An error the network met outside a call (NCCL's asynchronous errors); empty when none.
  virtual std::string asyncError() { return {}; }
  // Stops what is in flight and makes the transport unusable (cclzCommAbort).
  virtual void abort() {}
};

}  // namespace cclz
