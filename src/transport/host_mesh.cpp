#include "transport/host_mesh.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "common/trace.h"

namespace cclz {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kHelloMagic = 0x4d435a43;    // "CZCM": a connection of the control mesh
constexpr uint32_t kMessageMagic = 0x58435a43;  // "CZCX": one message on it
constexpr size_t kHelloBytes = 16;              // magic, rank, mesh tag
constexpr size_t kHeaderBytes = 16;             // magic, payload bytes, sequence number

// Little-endian on the wire, whatever the host.
void put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

std::string errnoText(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

socklen_t lengthOf(const sockaddr_storage& a) {
  return a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
}

const sockaddr_storage& storageOf(const MeshAddress& a) {
  static_assert(sizeof(MeshAddress::bytes) >= sizeof(sockaddr_storage), "room for any address");
  return *reinterpret_cast<const sockaddr_storage*>(a.bytes);
}

void setNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  CCLZ_REQUIRE(flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, cclzSystemError,
               errnoText("fcntl(O_NONBLOCK)"));
}

// One small message per check: sent at once, not held back to be merged with the next.
void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// NCCL_SOCKET_IFNAME's syntax: "^" first excludes, "=" first (after any "^") names exactly,
// else every entry is a prefix.
bool nameMatches(const std::string& name, std::string list) {
  bool exclude = false, exact = false;
  if (!list.empty() && list[0] == '^') exclude = true, list.erase(0, 1);
  if (!list.empty() && list[0] == '=') exact = true, list.erase(0, 1);
  bool any = false;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    const std::string entry = list.substr(start, comma - start);
    if (!entry.empty() && (exact ? name == entry : name.compare(0, entry.size(), entry) == 0))
      any = true;
    start = comma + 1;
  }
  return exclude ? !any : any;
}

struct Interface {
  std::string name;
  sockaddr_storage address{};
};

Interface pickInterface() {
  const char* variable = "CCLZ_SOCKET_IFNAME";
  const char* spec = std::getenv(variable);
  if (!spec || !*spec) {
    variable = "NCCL_SOCKET_IFNAME";
    spec = std::getenv(variable);
    if (spec && !*spec) spec = nullptr;
  }
  ifaddrs* list = nullptr;
  CCLZ_REQUIRE(getifaddrs(&list) == 0, cclzSystemError, errnoText("getifaddrs"));
  Interface found;
  bool ok = false;
  for (int family : {AF_INET, AF_INET6}) {
    for (ifaddrs* i = list; i && !ok; i = i->ifa_next) {
      if (!i->ifa_addr || i->ifa_addr->sa_family != family || !(i->ifa_flags & IFF_UP)) continue;
      if (family == AF_INET6 &&
          IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(i->ifa_addr)->sin6_addr))
        continue;  // would need a scope id on every peer
      const std::string name = i->ifa_name ? i->ifa_name : "";
      if (spec ? !nameMatches(name, spec)
               : (i->ifa_flags & IFF_LOOPBACK) || name.compare(0, 6, "docker") == 0)
        continue;
      found.name = name;
      std::memcpy(&found.address, i->ifa_addr,
                  family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
      ok = true;
    }
    if (ok) break;
  }
  freeifaddrs(list);
  if (ok) return found;
  CCLZ_REQUIRE(!spec, cclzInvalidArgument,
               std::string(variable) + "=" + spec + ": no interface that is up matches");
  auto* v4 = reinterpret_cast<sockaddr_in*>(&found.address);
  v4->sin_family = AF_INET;
  v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  found.name = "loopback";
  return found;
}

// FNV-1a over every address: the same on every rank of one mesh.
uint64_t meshTag(const std::vector<MeshAddress>& addresses) {
  uint64_t h = 1469598103934665603ull;
  for (const MeshAddress& a : addresses)
    for (uint8_t b : a.bytes) h = (h ^ b) * 1099511628211ull;
  return h;
}

}  // namespace

bool hasAddress(const MeshAddress& address) { return storageOf(address).ss_family != AF_UNSPEC; }

std::string describeAddress(const MeshAddress& address) {
  const sockaddr_storage& a = storageOf(address);
  char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
  getnameinfo(reinterpret_cast<const sockaddr*>(&a), lengthOf(a), host, sizeof host, port,
              sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
  std::string text;
  if (a.ss_family == AF_INET6) text += '[';
  text += host;
  if (a.ss_family == AF_INET6) text += ']';
  text += ':';
  text += port;
  return text;
}

MeshListener::MeshListener() {
  const Interface i = pickInterface();
  listenOn(&i.address, lengthOf(i.address), i.name);
}

MeshListener::MeshListener(const std::string& host) {
  sockaddr_storage a{};
  auto* v4 = reinterpret_cast<sockaddr_in*>(&a);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&a);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1)
    v4->sin_family = AF_INET;
  else if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1)
    v6->sin6_family = AF_INET6;
  else
    CCLZ_FAIL(cclzInvalidArgument, "not a numeric address: " + host);
  listenOn(&a, lengthOf(a), host);
}

void MeshListener::listenOn(const void* address, unsigned length, const std::string& interface) {
  sockaddr_storage a{};
  std::memcpy(&a, address, length);
  if (a.ss_family == AF_INET6)
    reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = 0;
  else
    reinterpret_cast<sockaddr_in*>(&a)->sin_port = 0;
  fd_ = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  CCLZ_REQUIRE(fd_ >= 0, cclzSystemError, errnoText("socket"));
  socklen_t bound = sizeof a;
  if (bind(fd_, reinterpret_cast<const sockaddr*>(&a), length) != 0 ||
      listen(fd_, SOMAXCONN) != 0 ||
      getsockname(fd_, reinterpret_cast<sockaddr*>(address_.bytes), &bound) != 0) {
    const std::string why = errnoText("bind/listen");
    close(fd_);
    fd_ = -1;
    CCLZ_FAIL(cclzSystemError, "the control mesh cannot listen on " + interface + ": " + why);
  }
  setNonBlocking(fd_);
  description_ = describeAddress(address_) + " (" + interface + ")";
}

MeshListener::~MeshListener() {
  if (fd_ >= 0) close(fd_);
}

MeshListener::MeshListener(MeshListener&& other) noexcept
    : fd_(other.fd_), address_(other.address_), description_(std::move(other.description_)) {
  other.fd_ = -1;
}

HostMesh::HostMesh(MeshListener listener, const std::vector<MeshAddress>& addresses, int rank,
                   std::chrono::milliseconds timeout)
    : rank_(rank), peers_(addresses.size()) {
  CCLZ_REQUIRE(rank >= 0 && rank < size(), cclzInternalError, "mesh rank out of range");
  try {
    connectAll(listener, addresses, timeout);
  } catch (...) {
    for (Peer& p : peers_)
      if (p.fd >= 0) close(p.fd);
    throw;
  }
  CCLZ_TRACE("control mesh: rank %d of %d on %s, connected", rank_, size(),
             listener.describe().c_str());
}

// Every rank dials the lower ranks and accepts the higher ones, all at once, without blocking:
// nothing waits for one peer while another could be served.
void HostMesh::connectAll(MeshListener& listener, const std::vector<MeshAddress>& addresses,
                          std::chrono::milliseconds timeout) {
  const int n = size();
  const uint64_t tag = meshTag(addresses);
  struct Dial {
    int peer = -1;
    int fd = -1;
    bool connected = false;
    size_t written = 0;  // of the hello
    Clock::time_point retryAt{};
  };
  struct Incoming {
    int fd = -1;
    uint8_t hello[kHelloBytes] = {};
    size_t got = 0;
  };
  uint8_t hello[kHelloBytes];
  put32(hello, kHelloMagic);
  put32(hello + 4, static_cast<uint32_t>(rank_));
  put64(hello + 8, tag);

  std::vector<Dial> dials;
  for (int r = 0; r < rank_; ++r) dials.push_back(Dial{r});
  std::vector<Incoming> incoming;
  int dialsLeft = rank_, acceptsLeft = n - 1 - rank_;
  const Clock::time_point deadline = Clock::now() + timeout;
  auto cleanup = [&] {  // what did not become a peer's connection
    for (Dial& d : dials)
      if (d.fd >= 0) close(d.fd);
    for (Incoming& i : incoming)
      if (i.fd >= 0) close(i.fd);
  };

  try {
    while (dialsLeft > 0 || acceptsLeft > 0) {
      const Clock::time_point now = Clock::now();
      if (now > deadline) {
        std::string missing;
        for (int r = 0; r < n; ++r)
          if (r != rank_ && peers_[r].fd < 0)
            missing += (missing.empty() ? "" : ", ") + std::to_string(r) + " (" +
                       describeAddress(addresses[r]) + ")";
        CCLZ_FAIL(cclzSystemError,
                  "the control mesh did not connect rank " + std::to_string(rank_) + " (" +
                      listener.describe() + ") with rank " + missing + " within " +
                      std::to_string(timeout.count() / 1000) +
                      " s; CCLZ_SOCKET_IFNAME names the interface the ranks reach each other on");
      }
      for (Dial& d : dials) {
        if (d.peer < 0 || d.fd >= 0 || now < d.retryAt) continue;
        const sockaddr_storage& a = storageOf(addresses[d.peer]);
        d.fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        CCLZ_REQUIRE(d.fd >= 0, cclzSystemError, errnoText("socket"));
        if (connect(d.fd, reinterpret_cast<const sockaddr*>(&a), lengthOf(a)) == 0) {
          d.connected = true;
        } else if (errno != EINPROGRESS) {
          close(d.fd);
          d.fd = -1;
          d.retryAt = now + std::chrono::milliseconds(20);
        }
      }

      std::vector<pollfd> fds;
      if (acceptsLeft > 0) fds.push_back({listener.fd_, POLLIN, 0});
      for (const Dial& d : dials)
        if (d.peer >= 0 && d.fd >= 0) fds.push_back({d.fd, POLLOUT, 0});
      for (const Incoming& i : incoming)
        if (i.fd >= 0) fds.push_back({i.fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 20) < 0 && errno != EINTR)
        CCLZ_FAIL(cclzSystemError, errnoText("poll"));

      for (;;) {  // every connection waiting on the listener
        if (acceptsLeft == 0) break;
        const int fd = accept4(listener.fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        incoming.push_back(Incoming{fd});
      }
      for (Dial& d : dials) {
        if (d.peer < 0 || d.fd < 0) continue;
        if (!d.connected) {
          int err = 0;
          socklen_t len = sizeof err;
          if (getsockopt(d.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
          if (err == EINPROGRESS || err == EALREADY) continue;
          if (err != 0) {  // refused or unreachable for now: try again shortly
            close(d.fd);
            d.fd = -1;
            d.retryAt = Clock::now() + std::chrono::milliseconds(20);
            continue;
          }
          d.connected = true;
        }
        const ssize_t w = send(d.fd, hello + d.written, kHelloBytes - d.written, MSG_NOSIGNAL);
        if (w > 0) d.written += static_cast<size_t>(w);
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
          close(d.fd);
          d.fd = -1;
          d.connected = false;
          d.written = 0;
          d.retryAt = Clock::now() + std::chrono::milliseconds(20);
          continue;
        }
        if (d.written == kHelloBytes) {
          setNoDelay(d.fd);
          peers_[d.peer].fd = d.fd;
          d.fd = -1;
          d.peer = -1;
          --dialsLeft;
        }
      }
      for (Incoming& i : incoming) {
        if (i.fd < 0) continue;
        const ssize_t got = recv(i.fd, i.hello + i.got, kHelloBytes - i.got, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          close(i.fd);  // a connection that ended before its hello: not a peer
          i.fd = -1;
          continue;
        }
        if (got > 0) i.got += static_cast<size_t>(got);
        if (i.got < kHelloBytes) continue;
        const uint32_t from = get32(i.hello + 4);
        if (get32(i.hello) != kHelloMagic || get64(i.hello + 8) != tag ||
            from <= static_cast<uint32_t>(rank_) || from >= static_cast<uint32_t>(n) ||
            peers_[from].fd >= 0) {
          CCLZ_TRACE("control mesh: closed a connection that is not a peer's");
          close(i.fd);
          i.fd = -1;
          continue;
        }
        setNoDelay(i.fd);
        peers_[from].fd = i.fd;
        i.fd = -1;
        --acceptsLeft;
      }
    }
  } catch (...) {
    cleanup();
    throw;
  }
  cleanup();
}

HostMesh::~HostMesh() {
  const Clock::time_point deadline = Clock::now() + std::chrono::seconds(1);
  for (;;) {
    bool queued = false;
    for (Peer& p : peers_) {
      if (p.fd < 0 || p.sendEnded) continue;
      flush(p);
      queued = queued || !p.out.empty();
    }
    if (!queued || Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // A socket closed with unread bytes resets its connection, and a reset throws away what this
  // rank sent that the peer has not acknowledged yet (small messages may still be held back to be
  // merged). So the connection is shut for writing first (its end follows every byte sent), the
  // bytes sent are waited for until the peer has them (up to a second), and only then is what
  // the peer sent and nobody took read away and the socket closed.
  for (Peer& p : peers_)
    if (p.fd >= 0) shutdown(p.fd, SHUT_WR);
  for (;;) {
    bool unacknowledged = false;
    for (Peer& p : peers_) {
      int queued = 0;
      if (p.fd >= 0 && !p.ended && ioctl(p.fd, SIOCOUTQ, &queued) == 0 && queued > 0)
        unacknowledged = true;
    }
    if (!unacknowledged || Clock::now() > deadline + std::chrono::seconds(1)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (Peer& p : peers_) {
    if (p.fd < 0) continue;
    uint8_t sink[4096];
    while (recv(p.fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
    close(p.fd);
  }
}

void HostMesh::end(Peer& p, const std::string& why) {
  if (p.ended) return;
  p.ended = true;
  p.why = why;
  stopSending(p, why);
  CCLZ_TRACE("control mesh: a connection ended (%s)", why.c_str());
}

// What this rank still sends there is dropped; what the peer sent before is still read.
void HostMesh::stopSending(Peer& p, const std::string& why) {
  if (p.sendEnded) return;
  p.sendEnded = true;
  p.out.clear();
  CCLZ_TRACE("control mesh: no more sending on a connection (%s)", why.c_str());
}

void HostMesh::flush(Peer& p) {
  size_t done = 0;
  while (done < p.out.size()) {
    const ssize_t w =
        send(p.fd, p.out.data() + done, p.out.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      done += static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    stopSending(p, errnoText("send"));
    return;
  }
  p.out.erase(p.out.begin(), p.out.begin() + static_cast<std::ptrdiff_t>(done));
}

void HostMesh::readFrom(Peer& p) {
  if (p.inStart > 0 && p.inStart * 2 >= p.in.size()) {  // taken bytes go, now and then
    p.in.erase(p.in.begin(), p.in.begin() + static_cast<std::ptrdiff_t>(p.inStart));
    p.inStart = 0;
  }
  uint8_t buffer[4096];
  for (;;) {
    const ssize_t got = recv(p.fd, buffer, sizeof buffer, MSG_DONTWAIT);
    if (got > 0) {
      p.in.insert(p.in.end(), buffer, buffer + got);
      continue;
    }
    if (got == 0) return end(p, "closed by the peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return;
    return end(p, errnoText("recv"));
  }
}

void HostMesh::queue(int peer, const void* data, uint32_t bytes) {
  CCLZ_REQUIRE(peer >= 0 && peer < size() && peer != rank_, cclzInternalError,
               "control message to rank " + std::to_string(peer));
  Peer& p = peers_[peer];
  ++p.sent;
  if (p.sendEnded) return;
  const size_t at = p.out.size();
  p.out.resize(at + kHeaderBytes + bytes);
  put32(p.out.data() + at, kMessageMagic);
  put32(p.out.data() + at + 4, bytes);
  put64(p.out.data() + at + 8, p.sent);
  std::memcpy(p.out.data() + at + kHeaderBytes, data, bytes);
}

bool HostMesh::hasQueued() const {
  for (const Peer& p : peers_)
    if (!p.out.empty() && !p.sendEnded) return true;
  return false;
}

void HostMesh::post(int peer, const void* data, uint32_t bytes) {
  queue(peer, data, bytes);
  Peer& p = peers_[peer];
  if (!p.sendEnded) flush(p);
}

void HostMesh::progress(int waitMs) {
  std::vector<pollfd> fds;
  std::vector<int> ranks;
  for (int r = 0; r < size(); ++r) {
    Peer& p = peers_[r];
    if (r == rank_ || p.fd < 0 || p.ended) continue;
    if (!p.out.empty() && !p.sendEnded) flush(p);
    fds.push_back({p.fd, static_cast<short>(POLLIN | (p.out.empty() ? 0 : POLLOUT)), 0});
    ranks.push_back(r);
  }
  if (fds.empty()) return;
  if (poll(fds.data(), fds.size(), waitMs) < 0) {
    if (errno == EINTR) return;
    CCLZ_FAIL(cclzSystemError, errnoText("poll"));
  }
  for (size_t i = 0; i < fds.size(); ++i) {
    Peer& p = peers_[ranks[i]];
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) readFrom(p);
    if (!p.sendEnded && (fds[i].revents & POLLOUT)) flush(p);
  }
}

bool HostMesh::take(int peer, void* out, uint32_t bytes) {
  Peer& p = peers_[peer];
  const size_t avail = p.in.size() - p.inStart;
  if (avail < kHeaderBytes) return false;
  const uint8_t* h = p.in.data() + p.inStart;
  CCLZ_REQUIRE(get32(h) == kMessageMagic, cclzSystemError,
               "the control connection with rank " + std::to_string(peer) +
                   " carries something that is not a control message");
  CCLZ_REQUIRE(get32(h + 4) == bytes && get64(h + 8) == p.received + 1, cclzSystemError,
               "control message " + std::to_string(get64(h + 8)) + " of " +
                   std::to_string(get32(h + 4)) + " bytes from rank " + std::to_string(peer) +
                   " where message " + std::to_string(p.received + 1) + " of " +
                   std::to_string(bytes) + " bytes was next");
  if (avail < kHeaderBytes + bytes) return false;
  std::memcpy(out, h + kHeaderBytes, bytes);
  p.inStart += kHeaderBytes + bytes;
  ++p.received;
  return true;
}

bool HostMesh::closed(int peer) const {
  const Peer& p = peers_[peer];
  if (!p.ended) return false;
  const size_t avail = p.in.size() - p.inStart;
  return avail < kHeaderBytes || avail < kHeaderBytes + get32(p.in.data() + p.inStart + 4);
}

}  // namespace cclz
