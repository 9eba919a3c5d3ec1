// The control mesh (src/transport/host_mesh.h) with ranks as threads on the loopback interface:
// it connects 1-4 ranks, carries messages whole and in order (also more than a socket buffer
// holds), refuses a stray connection, reports a peer that closed only after its last message
// (and drops what is posted to it), detects a message out of step, gives up connecting after its
// timeout, and takes its interface from CCLZ_SOCKET_IFNAME or NCCL_SOCKET_IFNAME.
#include "transport/host_mesh.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"

namespace cclz {
namespace {

using namespace std::chrono_literals;

// Listeners on 127.0.0.1 for n ranks and their addresses, by rank.
struct Listeners {
  std::vector<MeshListener> listeners;
  std::vector<MeshAddress> addresses;
  explicit Listeners(int n) {
    for (int r = 0; r < n; ++r) {
      listeners.emplace_back("127.0.0.1");
      addresses.push_back(listeners.back().address());
    }
  }
};

// Connects n meshes (one thread per rank: connecting is collective), then runs body(mesh, rank)
// on each rank's thread.
void onMesh(int n, const std::function<void(HostMesh&, int)>& body) {
  Listeners l(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      HostMesh mesh(std::move(l.listeners[r]), l.addresses, r, 10s);
      body(mesh, r);
    });
  for (auto& t : threads) t.join();
}

struct Payload {
  int32_t from, to, index, pad;
};

// Every rank sends `count` messages to each peer, then takes every peer's, checking the order.
void exchangeAll(int n, int count) {
  onMesh(n, [&](HostMesh& mesh, int me) {
    for (int i = 0; i < count; ++i)
      for (int r = 0; r < n; ++r)
        if (r != me) {
          const Payload p{me, r, i, 0};
          mesh.post(r, &p, sizeof p);
        }
    std::vector<int> next(n, 0);
    int left = (n - 1) * count;
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (left > 0 && std::chrono::steady_clock::now() < deadline) {
      mesh.progress(10);
      for (int r = 0; r < n; ++r) {
        Payload p{};
        while (r != me && mesh.take(r, &p, sizeof p)) {
          EXPECT_EQ(p.from, r);
          EXPECT_EQ(p.to, me);
          EXPECT_EQ(p.index, next[r]);
          ++next[r];
          --left;
        }
      }
    }
    EXPECT_EQ(left, 0) << "rank " << me;
  });
}

TEST(HostMesh, MessagesArriveWholeAndInOrder) {
  for (int n = 1; n <= 4; ++n) {
    SCOPED_TRACE(n);
    exchangeAll(n, 300);
  }
}

// 3 MiB each way: more than the sockets hold, so posting queues and progress writes the rest.
TEST(HostMesh, MoreThanTheSocketHoldsStillArrives) { exchangeAll(2, 100000); }

// A connection that sends a wrong hello, and one that sends nothing, before the peers connect.
TEST(HostMesh, AStrayConnectionIsNotTakenForAPeer) {
  Listeners l(2);
  const MeshAddress target = l.addresses[0];
  std::vector<int> strays;
  for (int i = 0; i < 2; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<const sockaddr*>(target.bytes), sizeof(sockaddr_in)), 0);
    if (i == 0) {
      const char junk[16] = "not a peer here";
      ASSERT_EQ(send(fd, junk, sizeof junk, 0), static_cast<ssize_t>(sizeof junk));
    }
    strays.push_back(fd);
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      HostMesh mesh(std::move(l.listeners[r]), l.addresses, r, 10s);
      const int32_t mine = 40 + r;
      mesh.post(1 - r, &mine, sizeof mine);
      int32_t got = 0;
      while (!mesh.take(1 - r, &got, sizeof got)) mesh.progress(10);
      EXPECT_EQ(got, 41 - r);
    });
  for (auto& t : threads) t.join();
  for (int fd : strays) close(fd);
}

TEST(HostMesh, APeerThatClosesIsSeenAfterItsLastMessage) {
  Listeners l(2);
  std::unique_ptr<HostMesh> meshes[2];
  std::thread other([&] {
    meshes[1] = std::make_unique<HostMesh>(std::move(l.listeners[1]), l.addresses, 1, 10s);
  });
  meshes[0] = std::make_unique<HostMesh>(std::move(l.listeners[0]), l.addresses, 0, 10s);
  other.join();
  for (int32_t i = 0; i < 3; ++i) meshes[1]->post(0, &i, sizeof i);
  meshes[1].reset();
  HostMesh& mesh = *meshes[0];
  int32_t got = -1;
  for (int32_t i = 0; i < 3; ++i) {
    while (!mesh.take(1, &got, sizeof got)) {
      EXPECT_FALSE(mesh.closed(1)) << "closed before message " << i;
      mesh.progress(10);
    }
    EXPECT_EQ(got, i);
  }
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!mesh.closed(1) && std::chrono::steady_clock::now() < deadline) mesh.progress(10);
  EXPECT_TRUE(mesh.closed(1));
  EXPECT_EQ(mesh.closedWhy(1), "closed by the peer");
  mesh.post(1, &got, sizeof got);  // dropped: nobody is there to take it
  EXPECT_TRUE(mesh.closed(1));
}

TEST(HostMesh, AMessageOutOfStepIsAnError) {
  onMesh(2, [](HostMesh& mesh, int me) {
    const uint64_t eight = 8;
    mesh.post(1 - me, &eight, me == 0 ? 8 : 4);  // rank 1 sends 4 bytes where 8 are expected
    uint64_t got = 0;
    if (me == 1) {
      while (!mesh.take(0, &got, 8)) mesh.progress(10);
      EXPECT_EQ(got, 8u);
      return;
    }
    try {
      while (!mesh.take(1, &got, 8)) mesh.progress(10);
      ADD_FAILURE() << "took a message of the wrong size";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("of 4 bytes from rank 1"), std::string::npos)
          << e.what();
    }
  });
}

// Rank 1's address has no listener: rank 0 waits for it to dial, rank 1 dials in vain (in the
// other direction, rank 0's address is dead for rank 1). Both give up after the timeout.
TEST(HostMesh, ConnectingGivesUpAfterTheTimeout) {
  for (int me = 0; me < 2; ++me) {
    Listeners l(2);
    { MeshListener gone(std::move(l.listeners[1 - me])); }  // closed: nobody answers there
    const auto begin = std::chrono::steady_clock::now();
    try {
      HostMesh mesh(std::move(l.listeners[me]), l.addresses, me, 300ms);
      ADD_FAILURE() << "connected to nobody";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclzSystemError);
      EXPECT_NE(std::string(e.what()).find("with rank " + std::to_string(1 - me)),
                std::string::npos)
          << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - begin, 5s);
  }
}

// Restores an environment variable when it goes.
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~EnvVar() {
    if (had_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(MeshListener, InterfaceFromTheEnvironment) {
  {
    EnvVar cclz("CCLZ_SOCKET_IFNAME", "=lo");
    EnvVar nccl("NCCL_SOCKET_IFNAME", "nosuchinterface");
    MeshListener l;
    EXPECT_NE(l.describe().find("127.0.0.1:"), std::string::npos) << l.describe();
    EXPECT_NE(l.describe().find("(lo)"), std::string::npos) << l.describe();
  }
  {
    EnvVar cclz("CCLZ_SOCKET_IFNAME", nullptr);
    EnvVar nccl("NCCL_SOCKET_IFNAME", "lo");
    EXPECT_NE(MeshListener().describe().find("(lo)"), std::string::npos);
  }
  {
    EnvVar cclz("CCLZ_SOCKET_IFNAME", "nosuchinterface");
    try {
      MeshListener l;
      ADD_FAILURE() << "listened on " << l.describe();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), cclzInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("CCLZ_SOCKET_IFNAME=nosuchinterface"), std::string::npos)
          << e.what();
    }
  }
  {
    EnvVar cclz("CCLZ_SOCKET_IFNAME", nullptr);
    EnvVar nccl("NCCL_SOCKET_IFNAME", nullptr);
    MeshListener l;  // whatever this machine has, loopback at least
    EXPECT_FALSE(l.describe().empty());
  }
}

// Two meshes connect on a listener the default rule chose (the interface of this machine that
// peers on other hosts would dial).
TEST(MeshListener, TheDefaultInterfaceConnects) {
  EnvVar cclz("CCLZ_SOCKET_IFNAME", nullptr);
  EnvVar nccl("NCCL_SOCKET_IFNAME", nullptr);
  std::vector<MeshListener> listeners;
  std::vector<MeshAddress> addresses;
  for (int r = 0; r < 2; ++r) {
    listeners.emplace_back();
    addresses.push_back(listeners.back().address());
    EXPECT_TRUE(hasAddress(addresses.back()));
  }
  EXPECT_FALSE(hasAddress(MeshAddress{}));  // what a rank that could not listen sends
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      HostMesh mesh(std::move(listeners[r]), addresses, r, 10s);
      const int32_t mine = r;
      mesh.post(1 - r, &mine, sizeof mine);
      int32_t got = -1;
      while (!mesh.take(1 - r, &got, sizeof got)) mesh.progress(10);
      EXPECT_EQ(got, 1 - r);
    });
  for (auto& t : threads) t.join();
}

}  // namespace
}  // namespace cclz
