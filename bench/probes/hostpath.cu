// Probe (not part of cclz): where a small call's host time goes, one GPU per rank under mpirun
// (one rank or more). A rank alone queues its calls as fast as the host can (the GPU work of
// 64 KiB is a copy), so the time a call takes to queue is its host path. Side by side, back to
// back: NCCL's own all-reduce and all-gather, and cclz's on communicators over the same NCCL
// communicator (codec none, its later calls checked deferred -- on 2 or more ranks -- or only
// its first; fp8 on an adaptive communicator, settled on plain data), and cclz's codec none on a
// communicator with an NCCL communicator of its own. Each round takes every row in turn, every
// rank starting it together and the slowest rank's time counting, and a cclz row is judged by
// its difference from NCCL's row of the same round. Then the steps of cclz's path, each alone
// in a loop, and the whole path with NCCL's collectives skipped. With the argument `loop` it only
// queues cclz's plain all-reduce for ~3 s, for `perf record -g`.
// Build on the device after `device.sh build` (lib: CCLZ_NCCL_LIBRARY in
// build-device/CMakeCache.txt; the -D flags: the build's own, in build-device/build.ninja;
// mpi: mpicxx --showme:link with -pthread dropped and -Wl, as -Xlinker; mpiinc: mpicxx
// --showme:compile without -pthread), run with mpirun -n RANKS /tmp/hostpath:
//   nvcc -O3 -g -std=c++20 -gencode arch=compute_90a,code=sm_90a -DCCLZ_HAVE_CUDA \
//     -DCCLZ_HAVE_NCCL -DCCLZ_HAVE_MPI -I include -I src -I tests/collective $mpiinc \
//     bench/probes/hostpath.cu build-device/src/libcclz_core.a -lcublasLt $mpi \
//     -L$(dirname $lib) -l:libnccl.so.2 -Xlinker -rpath=$(dirname $lib) -o /tmp/hostpath
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <functional>

#include "collective/communicator.h"
#include "collective/plan.h"
#include "forwarding_transport.h"
#include "probe_support.h"
#include "transport/nccl/nccl_transport.h"

namespace {

// NCCL's transport with its collectives skipped: cclz's host path alone, on this host.
class SkipCollectives final : public cclz::test::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  bool reduceScatter(const void*, void*, uint64_t, int, bool, cclzStream_t) override {
    return true;
  }
  bool allReduce(const void*, void*, uint64_t, int, bool, cclzStream_t) override { return true; }
};

using Clock = std::chrono::steady_clock;

double nsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The host's time to queue one call, ns, for `calls` calls queued back to back (then a sync):
// every rank starts together, and the slowest rank's time counts.
double queueNs(cudaStream_t stream, const std::function<void()>& call, int calls) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int i = 0; i < calls; ++i) call();
  double ns = nsSince(t0) / calls;
  cudaStreamSynchronize(stream);
  MPI_Allreduce(MPI_IN_PLACE, &ns, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return ns;
}

// One step alone: ns an iteration, 100000 iterations, median of 5.
double loopNs(const std::function<void()>& step) {
  std::vector<double> rounds;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < 100000; ++i) step();
    rounds.push_back(nsSince(t0) / 100000);
  }
  return median(rounds);
}

// A whole call with NCCL's call skipped: ns a call, the median of 401 rounds of 500 calls (an
// adaptive kind is tried again every 2048 calls, with real GPU work: those rounds fall out).
double pathNs(cudaStream_t stream, const std::function<void()>& call) {
  std::vector<double> rounds;
  for (int r = 0; r < 401; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < 500; ++i) call();
    rounds.push_back(nsSince(t0) / 500);
    cudaStreamSynchronize(stream);
  }
  return median(rounds);
}

// Writes one byte of each of `lines` cache lines, 4160 bytes apart (not one cache set).
void touchLines(int lines) {
  static std::vector<uint8_t> state(64 * 4160);
  volatile uint8_t* bytes = state.data();
  for (int i = 0; i < lines; ++i) bytes[i * 4160] = bytes[i * 4160] + 1;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, ranks = 1, devices = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const bool loopOnly = argc > 1 && std::strcmp(argv[1], "loop") == 0;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines kept if a later step fails
  if (me != 0 && !std::freopen("/dev/null", "w", stdout)) return 1;  // rank 0 reports
  CK(cudaGetDeviceCount(&devices));
  CK(cudaSetDevice(me % devices));
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const size_t count = 32768;  // 64 KiB of bf16 a rank
  void *send, *recv;
  CK(cudaMalloc(&send, count * 2));
  CK(cudaMalloc(&recv, count * 2 * ranks));
  CK(cudaMemset(send, 0, count * 2));
  ncclUniqueId ncclId;
  if (me == 0 && ncclGetUniqueId(&ncclId) != ncclSuccess) return 1;
  MPI_Bcast(&ncclId, sizeof ncclId, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t nccl;
  if (ncclCommInitRank(&nccl, ranks, ncclId, me) != ncclSuccess) return 1;
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  config.adaptive = 1;
  // over: on that NCCL communicator, its later calls checked by the checking thread (deferred,
  // the default; a rank alone checks none); unchecked: the same with CCLZ_CHECK_CALLS=first (only
  // each op's first call checked); own: with an NCCL communicator of its own.
  cclzComm_t over, unchecked, own;
  CZ(cclzCommInitFromNcclConfig(&over, nccl, &config));
  const char* checks = std::getenv("CCLZ_CHECK_CALLS");
  const std::string savedChecks = checks ? checks : "";
  setenv("CCLZ_CHECK_CALLS", "first", 1);
  CZ(cclzCommInitFromNcclConfig(&unchecked, nccl, &config));
  if (checks)
    setenv("CCLZ_CHECK_CALLS", savedChecks.c_str(), 1);
  else
    unsetenv("CCLZ_CHECK_CALLS");
  cclzUniqueId id;
  if (me == 0) CZ(cclzGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  CZ(cclzCommInitRankConfig(&own, ranks, id, me, &config));
  std::printf("%d rank(s), one GPU each\n", ranks);
  cclzCodecConfig_t fp8 = CCLZ_CODEC_CONFIG_INITIALIZER;
  fp8.codec = cclzCodecFp8;
  auto s = reinterpret_cast<cclzStream_t>(stream);
  auto must = [](cclzResult_t r) {
    if (r != cclzSuccess) {
      std::printf("cclz: %s\n", cclzGetLastError(nullptr));
      std::exit(1);
    }
  };
  auto cclzNone = [&] {
    must(cclzAllReduce(send, recv, count, cclzBfloat16, cclzSum, over, nullptr, s));
  };
  if (loopOnly) {
    const auto t0 = Clock::now();
    while (nsSince(t0) < 3e9) {
      for (int i = 0; i < 200; ++i) cclzNone();
      cudaStreamSynchronize(stream);
    }
    MPI_Finalize();
    return 0;
  }
  for (int i = 0; i < 40; ++i)  // the fp8 kind's trials, until settled
    must(cclzAllReduce(send, recv, count, cclzBfloat16, cclzSum, over, &fp8, s));
  cudaStreamSynchronize(stream);
  cclzPath_t path;
  int decided = 0;
  CZ(cclzCommGetLastPath(over, &path, &decided));
  std::printf("fp8 adaptive kind: %s, %s\n", path & cclzPathPlain ? "plain" : "compressed",
              decided ? "settled" : "in trials");

  struct Row {
    const char* name;
    std::function<void()> call;
    int baseline;  // the row whose NCCL call it is compared with; -1: a baseline
  };
  const Row calls[] = {
      {"nccl all-reduce",
       [&] { ncclAllReduce(send, recv, count, ncclBfloat16, ncclSum, nccl, stream); }, -1},
      {"cclz all-reduce none (over that NCCL comm)", cclzNone, 0},
      {"cclz all-reduce fp8 adaptive, settled",
       [&] { must(cclzAllReduce(send, recv, count, cclzBfloat16, cclzSum, over, &fp8, s)); }, 0},
      {"cclz all-reduce none (its own NCCL comm)",
       [&] { must(cclzAllReduce(send, recv, count, cclzBfloat16, cclzSum, own, nullptr, s)); }, 0},
      {"cclz all-reduce none, only first calls checked",
       [&] {
         must(cclzAllReduce(send, recv, count, cclzBfloat16, cclzSum, unchecked, nullptr, s));
       },
       0},
      {"nccl all-gather", [&] { ncclAllGather(send, recv, count, ncclBfloat16, nccl, stream); },
       -1},
      {"cclz all-gather none (over that NCCL comm)",
       [&] { must(cclzAllGather(send, recv, count, cclzBfloat16, over, nullptr, s)); }, 5},
      // The method's own floor: NCCL's call again, judged as a cclz row is.
      {"nccl all-reduce again (control)",
       [&] { ncclAllReduce(send, recv, count, ncclBfloat16, ncclSum, nccl, stream); }, 0},
      // What data a call touches costs beside NCCL's call: NCCL's call, then a write to each of
      // 16 or 64 cache lines, the same lines at every call (as a call's own state would be).
      {"nccl all-reduce + 16 cache lines written",
       [&] {
         ncclAllReduce(send, recv, count, ncclBfloat16, ncclSum, nccl, stream);
         touchLines(16);
       },
       0},
      {"nccl all-reduce + 64 cache lines written",
       [&] {
         ncclAllReduce(send, recv, count, ncclBfloat16, ncclSum, nccl, stream);
         touchLines(64);
       },
       0},
  };
  // The host's speed drifts by more than a microsecond a call between runs and rounds, far more
  // than cclz adds: each round takes every row in turn (100 calls each), and a cclz row is judged
  // by its difference from its NCCL row of the same round, the median over 200 rounds.
  constexpr int kRows = sizeof calls / sizeof calls[0], kRounds = 200, kCalls = 100;
  for (const Row& row : calls) queueNs(stream, row.call, 50);
  std::vector<double> ns[kRows], added[kRows];
  for (int round = 0; round < kRounds; ++round) {
    double mine[kRows];
    for (int r = 0; r < kRows; ++r) mine[r] = queueNs(stream, calls[r].call, kCalls);
    for (int r = 0; r < kRows; ++r) {
      ns[r].push_back(mine[r]);
      if (calls[r].baseline >= 0) added[r].push_back(mine[r] - mine[calls[r].baseline]);
    }
  }
  for (int r = 0; r < kRows; ++r) {
    std::printf("queue %-45s %7.0f ns a call", calls[r].name, median(ns[r]));
    if (calls[r].baseline >= 0)
      std::printf(", %+5.0f ns over NCCL's (median of the rounds' differences)", median(added[r]));
    std::printf("\n");
  }

  cclz::Communicator& c = *over->impl;
  cclz::CollArgs a;
  a.op = cclz::CollOp::AllReduce, a.send = send, a.recv = recv, a.count = count;
  a.dtype = cclzBfloat16, a.stream = s;
  cclz::CollArgs a8 = a;
  a8.codec = &fp8;
  int n = 0;
  cudaStreamCaptureStatus capture;
  cudaPointerAttributes attributes;
  volatile size_t sink = 0;
  const Row steps[] = {
      {"makePlan, none", [&] { sink = sink + cclz::makePlan(c, a).chunks.size(); }, -1},
      {"makePlan, fp8", [&] { sink = sink + cclz::makePlan(c, a8).chunks.size(); }, -1},
      {"peersOf", [&] { sink = sink + cclz::peersOf(a, ranks, me).size(); }, -1},
      {"frameStride, none",
       [&] {
         static const cclz::Plan p = cclz::makePlan(c, a);
         sink = sink + cclz::frameStride(p);
       },
       -1},
      {"cclzCommCount (the C boundary)", [&] { must(cclzCommCount(over, &n)); }, -1},
      {"cudaStreamIsCapturing", [&] { cudaStreamIsCapturing(stream, &capture); }, -1},
      {"cudaPointerGetAttributes", [&] { cudaPointerGetAttributes(&attributes, send); }, -1},
      {"ncclGroupStart + ncclGroupEnd",
       [&] {
         ncclGroupStart();
         ncclGroupEnd();
       },
       -1},
  };
  for (const Row& row : steps) std::printf("step  %-45s %7.1f ns\n", row.name, loopNs(row.call));

  // The whole path with NCCL's call skipped: what cclz's own instructions cost a call here.
  cclz::CommSettings settings = cclz::CommSettings::fromEnvironment();
  settings.adaptive = true;
  cclzComm_t bare = new cclzComm;
  try {
    bare->impl = std::make_unique<cclz::Communicator>(
        std::make_unique<SkipCollectives>(std::make_unique<cclz::NcclTransport>(nccl, false)),
        settings);
  } catch (const std::exception& e) {
    std::printf("the communicator without NCCL's calls: %s\n", e.what());
    return 1;
  }
  for (int i = 0; i < 40; ++i)  // the fp8 kind's trials: plain data costs nothing here
    must(cclzAllReduce(send, recv, count, cclzBfloat16, cclzSum, bare, &fp8, s));
  CK(cudaStreamSynchronize(stream));
  const Row skipped[] = {
      {"cclz all-reduce none, NCCL's call skipped",
       [&] { must(cclzAllReduce(send, recv, count, cclzBfloat16, cclzSum, bare, nullptr, s)); },
       -1},
      {"cclz all-reduce fp8 settled, NCCL's call skipped",
       [&] { must(cclzAllReduce(send, recv, count, cclzBfloat16, cclzSum, bare, &fp8, s)); }, -1},
  };
  for (const Row& row : skipped)
    std::printf("path  %-45s %7.1f ns\n", row.name, pathNs(stream, row.call));
  CZ(cclzCommDestroy(bare));
  CK(cudaStreamSynchronize(stream));
  CZ(cclzCommDestroy(own));
  CZ(cclzCommDestroy(unchecked));
  CZ(cclzCommDestroy(over));
  ncclCommDestroy(nccl);
  MPI_Finalize();
  return 0;
}
