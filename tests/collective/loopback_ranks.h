// Ranks as threads of one process for the collective tests: each a communicator over the
// loopback transport, made from CommSettings directly (the C API's creators need MPI or NCCL).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "cclz/cclz.h"
#include "coll_cases.h"
#include "collective/communicator.h"
#include "common/error.h"
#include "transport/loopback.h"

namespace cclz::test {

// What the tests run with: small pieces (kTestPieceBytes), every call through its codec.
inline CommSettings testSettings() {
  CommSettings s;
  s.pieceBytes = kTestPieceBytes;
  s.adaptive = false;  // the adaptive tests turn it on
  return s;
}

// Expects CommSettings::fromEnvironment to refuse `name`=`value` with cclzInvalidArgument and a
// message that names the variable; leaves it unset.
inline void expectEnvironmentRefuses(const char* name, const char* value) {
  setenv(name, value, 1);
  try {
    CommSettings::fromEnvironment();
    ADD_FAILURE() << name << "=" << value << " was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), cclzInvalidArgument);
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
  unsetenv(name);
}

using TransportWrap = std::function<std::unique_ptr<Transport>(std::unique_ptr<Transport>)>;

inline cclzComm_t loopbackComm(std::shared_ptr<LoopbackHub> hub, int rank,
                               const TransportWrap& wrap = nullptr,
                               const CommSettings& settings = testSettings()) {
  std::unique_ptr<Transport> t = std::make_unique<LoopbackTransport>(hub, rank);
  if (wrap) t = wrap(std::move(t));
  auto* comm = new cclzComm;
  comm->impl = std::make_unique<Communicator>(std::move(t), settings);
  return comm;
}

// Runs body(comm, rank) on n threads, one communicator each (its transport wrapped by `wrap`).
inline void onRanks(int n, const std::function<void(cclzComm_t, int)>& body,
                    std::chrono::milliseconds timeout = std::chrono::seconds(20),
                    const TransportWrap& wrap = nullptr,
                    const CommSettings& settings = testSettings()) {
  auto hub = std::make_shared<LoopbackHub>(n, timeout);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      cclzComm_t comm = loopbackComm(hub, r, wrap, settings);
      body(comm, r);
      cclzCommDestroy(comm);
    });
  for (auto& t : threads) t.join();
}

}  // namespace cclz::test
