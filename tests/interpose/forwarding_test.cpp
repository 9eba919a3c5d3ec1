// libcclz_nccl.so's routing on a machine without a GPU: the program's NCCL calls reach the
// interposer (LD_PRELOAD, set by ctest), and what it forwards reaches the stub NCCL
// (stub_nccl.h), which records it. Each suite runs in a process of its own with its environment
// (tests/interpose/CMakeLists.txt):
//   Forwarding  defaults, CCLZ_INTERPOSE_DEBUG=1, and a CCLZ_CHECK_CALLS value cclz refuses, so
//               that cclz's communicator can never be made: an eligible call is seen splitting
//               the user's communicator and then going to NCCL unchanged, with no GPU anywhere;
//   Off         CCLZ_INTERPOSE=0;      BadSetting  CCLZ_INTERPOSE=yes;
//   Reduce      CCLZ_INTERPOSE_REDUCE=1 (and the refused CCLZ_CHECK_CALLS).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "stub_nccl.h"

namespace {

void* ptr(uintptr_t v) { return reinterpret_cast<void*>(v); }
cudaStream_t streamAt(uintptr_t v) { return reinterpret_cast<cudaStream_t>(v); }

void* const kSend = ptr(0x100000);
void* const kRecv = ptr(0x900000);
const cudaStream_t kStream = streamAt(0x42);

// The one call the stub got, which must be `function` with the given arguments.
void expectOnly(const char* function, ncclComm_t comm, const void* send, const void* recv,
                size_t count, int dtype) {
  const std::vector<StubCall> calls = stubTakeCalls();
  ASSERT_EQ(calls.size(), 1u) << "first: " << (calls.empty() ? "" : calls[0].function);
  EXPECT_EQ(calls[0].function, function);
  EXPECT_EQ(calls[0].comm, comm);
  EXPECT_EQ(calls[0].send, send);
  EXPECT_EQ(calls[0].recv, recv);
  EXPECT_EQ(calls[0].count, count);
  EXPECT_EQ(calls[0].dtype, dtype);
  EXPECT_EQ(calls[0].stream, kStream);
}

// What an eligible first collective does while cclz cannot be set up: it splits the user's
// communicator (every rank, same ranks in the same order, a blocking communicator), destroys the
// split-off communicator when cclz refuses it, and then goes to NCCL as it is.
void expectSplitThenForwarded(ncclComm_t comm, int rank, const char* function) {
  const std::vector<StubCall> calls = stubTakeCalls();
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0].function, "ncclCommSplit");
  EXPECT_EQ(calls[0].comm, comm);
  EXPECT_EQ(calls[0].color, 0);
  EXPECT_EQ(calls[0].key, rank);
  EXPECT_EQ(calls[0].blocking, 1);
  EXPECT_EQ(calls[1].function, "ncclCommDestroy");
  EXPECT_EQ(calls[1].comm, calls[0].child);
  EXPECT_EQ(calls[2].function, function);
  EXPECT_EQ(calls[2].comm, comm);
}

TEST(Forwarding, ThePreloadedLibraryDefinesTheCalls) {
  for (const char* name : {"ncclAllGather", "ncclSend", "ncclGroupStart", "ncclCommSplit"}) {
    Dl_info info{};
    ASSERT_NE(dladdr(dlsym(RTLD_DEFAULT, name), &info), 0) << name;
    EXPECT_NE(std::strstr(info.dli_fname, "libcclz_nccl"), nullptr)
        << name << ": " << info.dli_fname;
  }
}

TEST(Forwarding, BroadcastGoesToNcclAsItIsAndReturnsWhatNcclReturns) {
  ncclComm_t comm = stubMakeComm(1, 2);
  stubSetResult(ncclRemoteError);
  EXPECT_EQ(ncclBroadcast(kSend, kRecv, 12345, ncclBfloat16, 1, comm, kStream), ncclRemoteError);
  stubSetResult(ncclSuccess);
  std::vector<StubCall> calls = stubTakeCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].function, "ncclBroadcast");
  EXPECT_EQ(calls[0].root, 1);
  EXPECT_EQ(calls[0].recv, kRecv);
  EXPECT_EQ(ncclBcast(kRecv, 77, ncclFloat32, 0, comm, kStream), ncclSuccess);
  calls = stubTakeCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].function, "ncclBcast");
  EXPECT_EQ(calls[0].count, 77u);
}

TEST(Forwarding, DtypesTheLosslessCodecDoesNotTakeGoToNccl) {
  ncclComm_t comm = stubMakeComm(0, 2);
  for (ncclDataType_t t : {ncclInt8, ncclUint8, ncclInt32, ncclUint32, ncclInt64, ncclUint64,
                           ncclFloat64, ncclFloat8e4m3, ncclFloat8e5m2}) {
    EXPECT_EQ(ncclAllGather(kSend, kRecv, 1000, t, comm, kStream), ncclSuccess);
    expectOnly("ncclAllGather", comm, kSend, kRecv, 1000, t);
    EXPECT_EQ(ncclAlltoAll(kSend, kRecv, 1000, t, comm, kStream), ncclSuccess);
    expectOnly("ncclAlltoAll", comm, kSend, kRecv, 1000, t);
  }
}

TEST(Forwarding, EmptyCallsGoToNccl) {
  ncclComm_t comm = stubMakeComm(0, 2);
  EXPECT_EQ(ncclAllGather(kSend, kRecv, 0, ncclBfloat16, comm, kStream), ncclSuccess);
  expectOnly("ncclAllGather", comm, kSend, kRecv, 0, ncclBfloat16);
}

TEST(Forwarding, ReductionsGoToNcclUnlessAskedFor) {
  ncclComm_t comm = stubMakeComm(0, 2);
  EXPECT_EQ(ncclAllReduce(kSend, kRecv, 1000, ncclBfloat16, ncclSum, comm, kStream), ncclSuccess);
  expectOnly("ncclAllReduce", comm, kSend, kRecv, 1000, ncclBfloat16);
  EXPECT_EQ(ncclReduceScatter(kSend, kRecv, 1000, ncclFloat32, ncclAvg, comm, kStream),
            ncclSuccess);
  expectOnly("ncclReduceScatter", comm, kSend, kRecv, 1000, ncclFloat32);
}

TEST(Forwarding, CallsInAGroupGoToNccl) {
  ncclComm_t comm = stubMakeComm(0, 2);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ncclAllGather(kSend, kRecv, 1000, ncclBfloat16, comm, kStream);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);  // groups nest
  ncclSend(kSend, 1000, ncclBfloat16, 1, comm, kStream);
  ncclRecv(kRecv, 1000, ncclBfloat16, 1, comm, kStream);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  ncclAlltoAll(kSend, kRecv, 1000, ncclFloat32, comm, kStream);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  const std::vector<StubCall> calls = stubTakeCalls();
  const char* const want[] = {"ncclGroupStart", "ncclAllGather", "ncclGroupStart", "ncclSend",
                              "ncclRecv",       "ncclGroupEnd",  "ncclAlltoAll",   "ncclGroupEnd"};
  ASSERT_EQ(calls.size(), std::size(want));
  for (size_t i = 0; i < calls.size(); ++i) EXPECT_EQ(calls[i].function, want[i]) << i;
  EXPECT_EQ(calls[3].peer, 1);
}

TEST(Forwarding, CapturedCallsGoToNccl) {
  ncclComm_t comm = stubMakeComm(0, 2);
  stubSetCapturing(kStream);
  EXPECT_EQ(ncclAllGather(kSend, kRecv, 1000, ncclBfloat16, comm, kStream), ncclSuccess);
  stubSetCapturing(nullptr);
  expectOnly("ncclAllGather", comm, kSend, kRecv, 1000, ncclBfloat16);
}

TEST(Forwarding, AnAllToAllInPlaceGoesToNccl) {
  ncclComm_t comm = stubMakeComm(0, 2);
  EXPECT_EQ(ncclAlltoAll(kSend, kSend, 1000, ncclBfloat16, comm, kStream), ncclSuccess);
  expectOnly("ncclAlltoAll", comm, kSend, kSend, 1000, ncclBfloat16);
}

TEST(Forwarding, OneRankCommunicatorsGoToNccl) {
  ncclComm_t comm = stubMakeComm(0, 1);
  EXPECT_EQ(ncclAllGather(kSend, kRecv, 1000, ncclBfloat16, comm, kStream), ncclSuccess);
  expectOnly("ncclAllGather", comm, kSend, kRecv, 1000, ncclBfloat16);
}

// On more than two ranks a send is no call of every rank: it never splits the communicator.
TEST(Forwarding, PointToPointBeforeAnyCollectiveGoesToNccl) {
  ncclComm_t comm = stubMakeComm(2, 4);
  EXPECT_EQ(ncclSend(kSend, 1000, ncclBfloat16, 3, comm, kStream), ncclSuccess);
  expectOnly("ncclSend", comm, kSend, nullptr, 1000, ncclBfloat16);
  EXPECT_EQ(ncclRecv(kRecv, 1000, ncclFloat16, 1, comm, kStream), ncclSuccess);
  expectOnly("ncclRecv", comm, nullptr, kRecv, 1000, ncclFloat16);
}

// Checked before anything is made: a send to itself, or to no rank, is NCCL's to handle.
TEST(Forwarding, PointToPointWithItselfOrNoRankGoesToNccl) {
  ncclComm_t comm = stubMakeComm(1, 2);
  for (int peer : {1, 2, -1}) {
    EXPECT_EQ(ncclSend(kSend, 4096, ncclBfloat16, peer, comm, kStream), ncclSuccess);
    expectOnly("ncclSend", comm, kSend, nullptr, 4096, ncclBfloat16);
  }
}

TEST(Forwarding, AnEligibleCollectiveSplitsOnceAndGoesToNcclWhenCclzRefuses) {
  ncclComm_t comm = stubMakeComm(1, 2);
  EXPECT_EQ(ncclAllGather(kSend, kRecv, 4096, ncclBfloat16, comm, kStream), ncclSuccess);
  expectSplitThenForwarded(comm, 1, "ncclAllGather");
  // Not made again: the communicator's calls go to NCCL from now on.
  EXPECT_EQ(ncclAllGather(kSend, kRecv, 4096, ncclBfloat16, comm, kStream), ncclSuccess);
  expectOnly("ncclAllGather", comm, kSend, kRecv, 4096, ncclBfloat16);
  EXPECT_EQ(ncclSend(kSend, 4096, ncclFloat32, 0, comm, kStream), ncclSuccess);
  expectOnly("ncclSend", comm, kSend, nullptr, 4096, ncclFloat32);
}

int collectLoaded(struct dl_phdr_info* info, size_t, void* names) {
  if (info->dlpi_name && *info->dlpi_name)
    static_cast<std::vector<std::string>*>(names)->push_back(info->dlpi_name);
  return 0;
}

// libcclz, loaded by the drop-in at the first call that may go through cclz, runs on the NCCL the
// program loaded (here the stub, a libnccl.so.2), not on one of its own.
TEST(Forwarding, CclzIsLoadedOnTheProgramsNccl) {
  ncclComm_t comm = stubMakeComm(0, 2);
  ncclAllGather(kSend, kRecv, 4096, ncclBfloat16, comm, kStream);
  stubTakeCalls();
  std::vector<std::string> loaded;
  dl_iterate_phdr(collectLoaded, &loaded);
  std::vector<std::string> nccl;
  bool cclz = false;
  for (const std::string& name : loaded) {
    if (name.find("libnccl") != std::string::npos) nccl.push_back(name);
    if (name.find("/libcclz.so") != std::string::npos) cclz = true;
  }
  EXPECT_TRUE(cclz);
  std::string all;
  for (const std::string& name : nccl) all += name + " ";
  ASSERT_EQ(nccl.size(), 1u) << all;
  EXPECT_NE(nccl[0].find("tests/interpose"), std::string::npos) << nccl[0];
}

TEST(Forwarding, PointToPointOnTwoRanksMayMakeCclzsCommunicator) {
  ncclComm_t comm = stubMakeComm(0, 2);
  EXPECT_EQ(ncclRecv(kRecv, 4096, ncclBfloat16, 1, comm, kStream), ncclSuccess);
  expectSplitThenForwarded(comm, 0, "ncclRecv");
}

TEST(Forwarding, ACommunicatorTheUserSplitsIsTheUsers) {
  ncclComm_t comm = stubMakeComm(0, 4);
  ncclComm_t child = nullptr;
  ASSERT_EQ(ncclCommSplit(comm, 1, 0, &child, nullptr), ncclSuccess);
  std::vector<StubCall> calls = stubTakeCalls();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].color, 1);
  EXPECT_EQ(calls[0].child, child);
  EXPECT_EQ(ncclAllGather(kSend, kRecv, 4096, ncclFloat16, child, kStream), ncclSuccess);
  expectSplitThenForwarded(child, 0, "ncclAllGather");
}

TEST(Forwarding, DestroyAndAbortGoToNccl) {
  ncclComm_t a = stubMakeComm(0, 2), b = stubMakeComm(0, 2);
  ncclAllGather(kSend, kRecv, 4096, ncclBfloat16, a, kStream);  // a has a (refused) companion
  stubTakeCalls();
  EXPECT_EQ(ncclCommDestroy(a), ncclSuccess);
  EXPECT_EQ(ncclCommAbort(b), ncclSuccess);
  const std::vector<StubCall> calls = stubTakeCalls();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].function, "ncclCommDestroy");
  EXPECT_EQ(calls[0].comm, a);
  EXPECT_EQ(calls[1].function, "ncclCommAbort");
  EXPECT_EQ(calls[1].comm, b);
}

// CCLZ_INTERPOSE_DEBUG=1: one line per op at exit, in a process of its own (threadsafe death
// tests start the program again), so that it holds this test's calls alone.
TEST(Forwarding, DebugCountsArePrintedAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ncclComm_t comm = stubMakeComm(0, 2);
        ncclBroadcast(kSend, kRecv, 10, ncclBfloat16, 0, comm, kStream);
        ncclAllGather(kSend, kRecv, 10, ncclInt32, comm, kStream);
        ncclGroupStart();
        ncclAllGather(kSend, kRecv, 10, ncclBfloat16, comm, kStream);
        ncclGroupEnd();
        ncclAllGather(kSend, kRecv, 10, ncclBfloat16, comm, kStream);
        std::exit(0);
      },
      testing::ExitedWithCode(0),
      "op=all-gather compressed=0 plain=0 failed=0 forwarded=3 dtype=1 group=1 unavailable=1\n"
      ".*op=broadcast compressed=0 plain=0 failed=0 forwarded=1 no-cclz-op=1\n");
}

TEST(Off, EveryCallGoesToNccl) {
  ncclComm_t comm = stubMakeComm(0, 2);
  EXPECT_EQ(ncclAllGather(kSend, kRecv, 4096, ncclBfloat16, comm, kStream), ncclSuccess);
  expectOnly("ncclAllGather", comm, kSend, kRecv, 4096, ncclBfloat16);
  EXPECT_EQ(ncclAlltoAll(kSend, kRecv, 4096, ncclFloat32, comm, kStream), ncclSuccess);
  expectOnly("ncclAlltoAll", comm, kSend, kRecv, 4096, ncclFloat32);
  EXPECT_EQ(ncclSend(kSend, 4096, ncclFloat16, 1, comm, kStream), ncclSuccess);
  expectOnly("ncclSend", comm, kSend, nullptr, 4096, ncclFloat16);
}

TEST(BadSetting, EveryCallGoesToNcclAndTheVariableIsNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ncclComm_t comm = stubMakeComm(0, 2);
        ncclAllGather(kSend, kRecv, 4096, ncclBfloat16, comm, kStream);
        const std::vector<StubCall> calls = stubTakeCalls();
        std::exit(calls.size() == 1 && calls[0].function == "ncclAllGather" ? 0 : 1);
      },
      testing::ExitedWithCode(0), "CCLZ WARN libcclz_nccl: CCLZ_INTERPOSE=yes is neither 0 nor 1");
}

TEST(Reduce, SumAndAverageOfFloatsGoToCclz) {
  ncclComm_t comm = stubMakeComm(1, 2);
  EXPECT_EQ(ncclAllReduce(kSend, kRecv, 4096, ncclBfloat16, ncclSum, comm, kStream), ncclSuccess);
  expectSplitThenForwarded(comm, 1, "ncclAllReduce");
  ncclComm_t other = stubMakeComm(0, 2);
  EXPECT_EQ(ncclReduceScatter(kSend, kRecv, 4096, ncclFloat32, ncclAvg, other, kStream),
            ncclSuccess);
  expectSplitThenForwarded(other, 0, "ncclReduceScatter");
}

TEST(Reduce, OtherReductionsAndDtypesGoToNccl) {
  ncclComm_t comm = stubMakeComm(0, 2);
  for (ncclRedOp_t op : {ncclProd, ncclMax, ncclMin}) {
    EXPECT_EQ(ncclAllReduce(kSend, kRecv, 4096, ncclFloat32, op, comm, kStream), ncclSuccess);
    expectOnly("ncclAllReduce", comm, kSend, kRecv, 4096, ncclFloat32);
  }
  EXPECT_EQ(ncclAllReduce(kSend, kRecv, 4096, ncclInt32, ncclSum, comm, kStream), ncclSuccess);
  expectOnly("ncclAllReduce", comm, kSend, kRecv, 4096, ncclInt32);
}

}  // namespace
