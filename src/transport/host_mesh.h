// The control mesh: one TCP connection between each pair of ranks of a device communicator, for
// the small exchanges cclz makes beside the data (the call check's descriptors, the adaptive
// calls' trial times; docs/collectives.md, "Checking the call"). It launches no GPU work, so the
// only NCCL work a device communicator launches is its data, from one thread, in call order.
// A second NCCL communicator driven by another thread cannot promise that: NCCL wants the work
// of all communicators of a device launched in one order on every rank, because its kernels
// wait for their peers and any CUDA call may wait for the whole device
// (bench/results/nccl-adaptive-feedback-hang-2xh200 is the hang it caused).
//
// Plain C++ on POSIX sockets, so that it is tested without a GPU. One thread at a time uses a
// mesh (the checking thread, or the caller's where there is none).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace cclz {

// Where a rank listens, as fixed-size bytes (a sockaddr_storage) that the ranks all-gather.
// Aligned for the sockaddr_storage it holds (host_mesh.cpp reads it as one).
struct alignas(16) MeshAddress {
  uint8_t bytes[128] = {};
};

// "10.0.0.3:40123" (numeric, IPv6 in brackets).
std::string describeAddress(const MeshAddress& address);
// False for MeshAddress{}: what a rank that could not listen sends its peers.
bool hasAddress(const MeshAddress& address);

// A listening TCP socket on a port the system picks.
class MeshListener {
 public:
  // On the interface CCLZ_SOCKET_IFNAME names, else NCCL_SOCKET_IFNAME (the interface the job
  // already gives NCCL's own sockets): a comma-separated list of name prefixes, `=` first for
  // exact names, `^` first for every interface but those. Unset: the first interface that is up
  // and neither loopback nor docker*, IPv4 before IPv6; loopback where there is none.
  // Throws cclzInvalidArgument when the variable matches no interface that is up.
  MeshListener();
  // On a numeric address ("127.0.0.1", "::1"): the tests' choice.
  explicit MeshListener(const std::string& host);
  ~MeshListener();
  MeshListener(MeshListener&& other) noexcept;
  MeshListener& operator=(MeshListener&&) = delete;
  MeshListener(const MeshListener&) = delete;

  const MeshAddress& address() const { return address_; }
  // The address and the interface it is on, for the trace and for errors.
  const std::string& describe() const { return description_; }

 private:
  friend class HostMesh;
  void listenOn(const void* sockaddr, unsigned length, const std::string& interface);

  int fd_ = -1;
  MeshAddress address_;
  std::string description_;
};

class HostMesh {
 public:
  // Collective: connects this rank with every other. addresses[r] is rank r's listener address,
  // the same vector on every rank. Of each pair the higher rank connects and the lower accepts;
  // a connection opens with a hello that carries a tag of the mesh (a hash of every address) and
  // the connecting rank, so that a stray connection is closed instead of taken for a peer.
  // Throws cclzSystemError, naming the ranks not reached, when `timeout` passes first.
  HostMesh(MeshListener listener, const std::vector<MeshAddress>& addresses, int rank,
           std::chrono::milliseconds timeout);
  // Writes what is still queued (for up to a second) and closes every connection: a peer then
  // sees its connection end (closed()).
  ~HostMesh();
  HostMesh(const HostMesh&) = delete;
  HostMesh& operator=(const HostMesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }

  // Queues a message of `bytes` for peer and writes what its connection takes now; never waits.
  // The messages from one rank to another arrive whole and in the order they were posted. A
  // message for a connection that has ended is dropped: what waits for that peer's answer finds
  // the connection closed(), and the ranks still judge what arrived before (a peer that failed a
  // check and went leaves the others to reach the same verdict).
  void post(int peer, const void* data, uint32_t bytes);
  // post without writing yet: the message goes with the next post or progress, in one write with
  // the others queued for that peer (a burst of checks: one system call, not one each).
  void queue(int peer, const void* data, uint32_t bytes);
  // Whether a connection still has bytes to write (queued, or more than it took).
  bool hasQueued() const;
  // Writes queued bytes and reads what has arrived, first waiting up to waitMs (0: not at all)
  // for a connection to have something. A connection that ends, closed by its peer or broken,
  // is marked (closed()) and not thrown about here.
  void progress(int waitMs);
  // The next message from peer, into out, if a whole one has arrived; its size must be `bytes`.
  // Throws cclzSystemError on a message that is not the next one in order or not of that size.
  bool take(int peer, void* out, uint32_t bytes);
  // Whether peer's connection has ended (the peer closed it or it broke) with nothing more to
  // take from it.
  bool closed(int peer) const;
  // Why peer's connection ended, for the error message.
  const std::string& closedWhy(int peer) const { return peers_[peer].why; }

 private:
  struct Peer {
    int fd = -1;
    std::vector<uint8_t> out;  // queued, not yet written
    std::vector<uint8_t> in;   // read, not yet taken
    size_t inStart = 0;        // bytes of `in` already taken
    uint64_t sent = 0;         // messages posted to this peer
    uint64_t received = 0;     // messages taken from it
    bool ended = false;        // the connection is over: no more bytes come
    bool sendEnded = false;    // writing failed or the connection is over: posts are dropped
    std::string why;
  };
  void connectAll(MeshListener& listener, const std::vector<MeshAddress>& addresses,
                  std::chrono::milliseconds timeout);
  void flush(Peer& p);
  void readFrom(Peer& p);
  void end(Peer& p, const std::string& why);
  void stopSending(Peer& p, const std::string& why);

  int rank_ = 0;
  std::vector<Peer> peers_;  // by rank; this rank's own entry unused
};

}  // namespace cclz
