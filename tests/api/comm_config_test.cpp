// The communicator configuration and cclzCommStreamWait at the C boundary, without a GPU: a
// config not made by CCLZ_COMM_CONFIG_INITIALIZER (size, magic, version) or with a bad asyncCalls
// is refused before any transport is created, a host (MPI) communicator refuses asyncCalls, and
// cclzCommStreamWait rejects a NULL communicator.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cclz/cclz.h"

namespace {

// NCCL's ids are opaque bytes here: every config below is refused before one is read.
cclzResult_t initRank(const cclzCommConfig_t* config, cclzComm_t* comm) {
  cclzUniqueId id{};
  return cclzCommInitRankConfig(comm, 1, id, 0, config);
}

std::string lastError() { return cclzGetLastError(nullptr); }

TEST(CommConfig, InitializerHasTheDefaults) {
  const cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  EXPECT_EQ(config.size, sizeof(cclzCommConfig_t));
  EXPECT_EQ(config.magic, CCLZ_CONFIG_MAGIC);
  EXPECT_EQ(config.version, static_cast<unsigned>(CCLZ_VERSION_CODE));
  EXPECT_EQ(config.asyncCalls, 0);
}

TEST(CommConfig, ConfigNotFromTheInitializerIsRefused) {
  const cclzCommConfig_t good = CCLZ_COMM_CONFIG_INITIALIZER;
  cclzCommConfig_t wrongVersion = good, wrongMagic = good, wrongSize = good, zeroed{};
  wrongVersion.version = CCLZ_VERSION_CODE + 100;  // the next minor version
  wrongMagic.magic = 0;
  wrongSize.size = sizeof(cclzCommConfig_t) - 4;
  for (const cclzCommConfig_t* config : {&wrongVersion, &wrongMagic, &wrongSize, &zeroed}) {
    cclzComm_t comm = reinterpret_cast<cclzComm_t>(0x1);
    EXPECT_EQ(initRank(config, &comm), cclzInvalidArgument);
    EXPECT_EQ(comm, nullptr) << "*comm is cleared on failure";
    EXPECT_NE(lastError().find("CCLZ_COMM_CONFIG_INITIALIZER"), std::string::npos) << lastError();
    int mpiWorld = 0;  // never read: the config is checked first
    EXPECT_EQ(cclzCommInitFromMpiConfig(&comm, &mpiWorld, config), cclzInvalidArgument);
    EXPECT_EQ(cclzCommInitFromNcclConfig(&comm, &mpiWorld, config), cclzInvalidArgument);
  }
}

TEST(CommConfig, AsyncCallsMustBeZeroOrOne) {
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  config.asyncCalls = 2;
  cclzComm_t comm = nullptr;
  EXPECT_EQ(initRank(&config, &comm), cclzInvalidArgument);
  EXPECT_NE(lastError().find("asyncCalls must be 0 or 1"), std::string::npos) << lastError();
}

TEST(CommConfig, HostCommunicatorRefusesAsyncCalls) {
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  config.asyncCalls = 1;
  cclzComm_t comm = nullptr;
  int mpiWorld = 0;  // never read: refused before MPI is used
  EXPECT_EQ(cclzCommInitFromMpiConfig(&comm, &mpiWorld, &config), cclzInvalidUsage);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(lastError().find("device (NCCL) communicators"), std::string::npos) << lastError();
}

TEST(CommStreamWait, NullCommunicator) {
  EXPECT_EQ(cclzCommStreamWait(nullptr, nullptr), cclzInvalidArgument);
  EXPECT_NE(lastError().find("comm is NULL"), std::string::npos) << lastError();
}

}  // namespace
