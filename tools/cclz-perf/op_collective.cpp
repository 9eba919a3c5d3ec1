// The collective ops of cclz-perf (op_collective.h). Per size of the sweep: the compressed
// collective and the plain one (NCCL or MPI) on the same buffers, timed the same way (each
// iteration between barriers; the time of an iteration is the slowest rank's; the median is
// reported), with -c checking every iteration of both against the reference.
#include "op_collective.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <tuple>
#include <utility>
#include <nlohmann/json.hpp>

#include "cclz/cclz.h"
#include "data.h"
#include "error.h"
#include "timing.h"

#ifdef CCLZ_HAVE_MPI
#include "coll_common.h"
#endif
#ifdef CCLZ_HAVE_CUDA
#include "gpu.h"
#endif

namespace perf {

namespace {
const char* const kNames[] = {"allgather", "reducescatter", "allreduce", "alltoall", "sendrecv",
                              nullptr};
}  // namespace

bool isCollectiveOp(const std::string& op) {
  for (const char* const* n = kNames; *n; ++n)
    if (op == *n) return true;
  return false;
}

const char* const* collectiveOpNames() { return kNames; }

#ifndef CCLZ_HAVE_MPI

int runCollectives(Options& opt, const std::string&, int*, char***) {
  fail("--op {}: this build of cclz-perf has no MPI (install libopenmpi-dev and rebuild)", opt.op);
}

#else

namespace coll {

Kind kindOf(const std::string& op) {
  if (op == "allgather") return Kind::AllGather;
  if (op == "reducescatter") return Kind::ReduceScatter;
  if (op == "allreduce") return Kind::AllReduce;
  if (op == "alltoall") return Kind::AllToAll;
  return Kind::SendRecv;
}

Shape shapeFor(Kind kind, uint64_t sizeBytes, cclzDataType_t dtype, int ranks, int rank) {
  Shape s;
  s.kind = kind, s.ranks = ranks, s.rank = rank, s.elemBytes = dtypeSize(dtype);
  const uint64_t elems = sizeBytes / s.elemBytes, n = static_cast<uint64_t>(ranks);
  const double spread = ranks > 1 ? double(ranks - 1) / ranks : 1.0;
  switch (kind) {
    case Kind::AllGather:
      s.count = elems / n, s.sendElems = s.count, s.recvElems = s.count * n;
      s.bytes = s.recvElems * s.elemBytes, s.busFactor = spread;
      break;
    case Kind::ReduceScatter:
      s.count = elems / n, s.sendElems = s.count * n, s.recvElems = s.count;
      s.bytes = s.sendElems * s.elemBytes, s.busFactor = spread;
      break;
    case Kind::AllReduce:
      s.count = elems, s.sendElems = s.recvElems = elems;
      s.bytes = elems * s.elemBytes, s.busFactor = 2 * spread;
      break;
    case Kind::AllToAll:
      s.count = elems / n, s.sendElems = s.recvElems = s.count * n;
      s.bytes = s.sendElems * s.elemBytes, s.busFactor = spread;
      break;
    case Kind::SendRecv:
      s.count = elems, s.sendElems = s.recvElems = elems;
      s.bytes = elems * s.elemBytes, s.busFactor = 1;
      s.peer = (rank ^ 1) < ranks ? (rank ^ 1) : -1;
      break;
  }
  return s;
}

// Seeded N(0,1) rounded to the dtype, different on every rank. NOTE: splitmix64 and Box-Muller
// with bit-level bf16 rounding: a 256 MiB input per rank must not cost the device lease minutes.
std::vector<uint8_t> gaussian(uint64_t elems, cclzDataType_t dtype, uint64_t seed) {
  std::vector<uint8_t> out(elems * dtypeSize(dtype));
  uint64_t state = seed;
  auto next = [&] {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  auto store = [&](uint64_t i, float v) {
    if (dtype == cclzFloat32) {
      std::memcpy(&out[4 * i], &v, 4);
      return;
    }
    uint16_t h;
    if (dtype == cclzBfloat16) {
      uint32_t u;
      std::memcpy(&u, &v, 4);
      h = static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);  // finite: RNE
    } else {
      h = static_cast<uint16_t>(roundToFormat(v, 5, 10));
    }
    std::memcpy(&out[2 * i], &h, 2);
  };
  for (uint64_t i = 0; i < elems; i += 2) {
    const uint64_t bits = next();
    const float u1 = (static_cast<float>(bits >> 40) + 1.0f) * 0x1p-24f;  // (0, 1]
    const float u2 = static_cast<float>((bits >> 16) & 0xFFFFFF) * 0x1p-24f;
    const float r = std::sqrt(-2.0f * std::log(u1)), a = 6.2831853f * u2;
    store(i, r * std::cos(a));
    if (i + 1 < elems) store(i + 1, r * std::sin(a));
  }
  return out;
}

RankDevice rankDevice(const std::string& deviceFlag, int rank) {
  cclzBuildInfo_t info{};
  info.size = sizeof info;
  PERF_CCLZ_CHECK(cclzGetBuildInfo(&info));
  RankDevice dev;
  dev.gpu = deviceFlag == "gpu";
  dev.text = "cpu (host buffers, MPI)";
#ifdef CCLZ_HAVE_CUDA
  if (deviceFlag.empty()) dev.gpu = info.hasNccl && gpu::deviceCount() > 0;
  if (dev.gpu) {
#ifndef CCLZ_HAVE_NCCL
    fail("--device gpu: this build of cclz has no NCCL transport");
#endif
    const int devices = gpu::deviceCount();
    if (devices == 0) fail("--device gpu: no CUDA device is visible");
    PERF_CUDA_CHECK(cudaSetDevice(rank % devices));
    auto stream = std::make_shared<gpu::Stream>();
    dev.stream = stream->get();
    dev.owned = stream;
    dev.text = fmt::format("gpu ({}, one per rank, device buffers, NCCL)",
                           gpu::deviceName(rank % devices));
  }
#else
  if (dev.gpu) fail("--device gpu: this build of cclz has no CUDA");
#endif
  return dev;
}

}  // namespace coll

namespace {

using coll::Kind;
using coll::Shape;

#define PERF_CCLZ_CHECK_COMM(call, comm)                                                    \
  do {                                                                                      \
    const cclzResult_t r_ = (call);                                                         \
    if (r_ != cclzSuccess)                                                                  \
      fail("{} failed: {}: {}", #call, cclzGetErrorString(r_), cclzGetLastError(comm));    \
  } while (0)

int worldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int worldSize() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// The elements this rank encodes as one block for one destination (then cut into pieces).
uint64_t blockElemsOf(const Shape& s) {
  if (s.kind == Kind::ReduceScatter || s.kind == Kind::AllToAll) return s.count;
  if (s.kind == Kind::AllReduce) return (s.count + s.ranks - 1) / s.ranks;
  return s.sendElems;
}

// Uncompressed bytes / frame bytes of this rank's contributions, summed over ranks: the host
// codec on the same pieces the collective encodes (its destination blocks in pieces of
// pieceBytes).
double wireRatio(const Shape& s, cclzDataType_t dtype, const cclzCodecConfig_t& config,
                 const std::vector<uint8_t>& input, uint64_t pieceBytes) {
  cclzCodec_t codec = nullptr;
  PERF_CCLZ_CHECK(cclzCodecCreate(&codec, &config));
  const uint64_t piece = std::max<uint64_t>(1, pieceBytes / s.elemBytes);
  const uint64_t blockElems = blockElemsOf(s);
  double frames = 0;
  std::vector<uint8_t> frame;
  for (uint64_t b = 0; b < s.sendElems; b += blockElems)
    for (uint64_t p = b; p < std::min(s.sendElems, b + blockElems); p += piece) {
      const uint64_t n = std::min({piece, s.sendElems - p, b + blockElems - p});
      size_t capacity = 0, bytes = 0;
      PERF_CCLZ_CHECK(cclzCodecMaxEncodedSize(codec, n, dtype, &capacity));
      frame.resize(capacity);
      PERF_CCLZ_CHECK(cclzEncodeHost(codec, &input[p * s.elemBytes], n, dtype, frame.data(),
                                     capacity, &bytes));
      frames += static_cast<double>(bytes);
    }
  cclzCodecDestroy(codec);
  double totals[2] = {static_cast<double>(s.sendElems * s.elemBytes), frames}, sums[2] = {};
  MPI_Allreduce(totals, sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sums[1] > 0 ? sums[0] / sums[1] : 0;
}

// Where a rank's buffers live and how to wait for its work.
struct Buffers {
  std::vector<uint8_t> hostSend, hostRecv;
  void* send = nullptr;
  void* recv = nullptr;
  bool gpu = false;
  void* stream = nullptr;
#ifdef CCLZ_HAVE_CUDA
  std::unique_ptr<gpu::Buffer> dSend, dRecv;
#endif

  void sync() const {
#ifdef CCLZ_HAVE_CUDA
    if (gpu) PERF_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)));
#endif
  }
  std::vector<uint8_t> output() {
#ifdef CCLZ_HAVE_CUDA
    if (gpu) {
      std::vector<uint8_t> out(hostRecv.size());
      PERF_CUDA_CHECK(cudaMemcpy(out.data(), recv, out.size(), cudaMemcpyDeviceToHost));
      return out;
    }
#endif
    return hostRecv;
  }
  // On the caller's stream, so that it is ordered before the next call (a plain cudaMemset
  // goes to the legacy stream, which a non-blocking stream does not wait for).
  void clearOutput() {
#ifdef CCLZ_HAVE_CUDA
    if (gpu) {
      PERF_CUDA_CHECK(cudaMemsetAsync(recv, 0xA5, hostRecv.size(),
                                      static_cast<cudaStream_t>(stream)));
      sync();
      return;
    }
#endif
    std::memset(hostRecv.data(), 0xA5, hostRecv.size());
  }
};

Buffers makeBuffers(const Shape& s, std::vector<uint8_t> input, bool gpu, void* stream) {
  Buffers b;
  b.gpu = gpu, b.stream = stream;
  b.hostSend = std::move(input);
  b.hostRecv.assign(s.recvElems * s.elemBytes, 0xA5);
  b.send = b.hostSend.data(), b.recv = b.hostRecv.data();
#ifdef CCLZ_HAVE_CUDA
  if (gpu) {
    b.dSend = std::make_unique<gpu::Buffer>(b.hostSend.size());
    b.dRecv = std::make_unique<gpu::Buffer>(b.hostRecv.size());
    PERF_CUDA_CHECK(cudaMemcpy(b.dSend->data(), b.hostSend.data(), b.hostSend.size(),
                               cudaMemcpyHostToDevice));
    b.send = b.dSend->data(), b.recv = b.dRecv->data();
  }
#endif
  return b;
}

// One timed contender: the call, and what runs untimed after each of its iterations.
struct Contender {
  std::function<void()> call;
  std::function<void()> after;
};

// The slowest rank's time of one call (us). warm: an untimed call first, its output cleared.
// NOTE: with -c 1 on a GPU, each timed call follows tens of milliseconds of host-side checking
// with the GPU idle, and every GPU operation of the call runs slower, plain NCCL's included
// (16 MiB all-reduce on 2 H200s: 148-270 us against 95 us with this warm call; README.md here,
// "How it times a collective"). The untimed call wakes the GPU first.
double timeOnce(Buffers& b, const Contender& c, bool warm) {
  if (warm) {
    c.call();
    b.clearOutput();  // the timed call's output is what gets checked
  }
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  c.call();
  b.sync();
  const double local =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  double slowest = 0;
  MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  c.after();
  return slowest;
}

// Medians over iterations of cclz's and the baseline's times, their iterations alternating, so that
// a network whose speed drifts during the run (NCCL's socket transport drifts by 20%) weighs on
// both alike rather than on whichever ran second.
std::pair<double, double> timeAlternating(const Options& opt, Buffers& b,
                                          const Contender& cclz, const Contender& baseline) {
  std::vector<double> cclzUs, baseUs;
  const bool warm = opt.check && b.gpu;
  for (int i = 0; i < opt.warmup + opt.iters; ++i) {
    const double a = timeOnce(b, cclz, warm), z = timeOnce(b, baseline, warm);
    if (i < opt.warmup) continue;
    cclzUs.push_back(a);
    baseUs.push_back(z);
  }
  return {median(cclzUs), median(baseUs)};
}

// One batch's times per call (us), each the slowest rank's: the whole batch (queued and
// finished), and the host's queueing alone (the calls returned, before the sync). Where the
// queueing takes as long as the whole, the calls are bound by the host, not the GPU.
struct BatchTimes {
  double perCall = 0, queueing = 0;
};

// --batch: `iters` calls queued back to back, one sync at the end; `after` runs once, on the
// last call's output.
BatchTimes timeBatch(Buffers& b, const Contender& c, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) c.call();
  const auto queued = std::chrono::steady_clock::now();
  b.sync();
  using Us = std::chrono::duration<double, std::micro>;
  const double local[2] = {Us(std::chrono::steady_clock::now() - t0).count() / iters,
                           Us(queued - t0).count() / iters};
  double slowest[2] = {0, 0};
  MPI_Allreduce(local, slowest, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  c.after();
  return {slowest[0], slowest[1]};
}

// --batch: medians over kBatchRounds rounds of cclz's and the baseline's batches, alternating,
// after -w untimed calls of each: per call, and the host's queueing per call (*queueing: cclz's,
// the baseline's).
std::pair<double, double> timeBatches(const Options& opt, Buffers& b, const Contender& cclz,
                                      const Contender& baseline,
                                      std::pair<double, double>* queueing) {
  for (int i = 0; i < opt.warmup; ++i) {
    cclz.call();
    baseline.call();
  }
  b.clearOutput();  // what gets checked is a timed call's output
  std::vector<double> cclzUs, baseUs, cclzQueue, baseQueue;
  for (int r = 0; r < kBatchRounds; ++r) {
    const BatchTimes mine = timeBatch(b, cclz, opt.iters);
    const BatchTimes theirs = timeBatch(b, baseline, opt.iters);
    cclzUs.push_back(mine.perCall), cclzQueue.push_back(mine.queueing);
    baseUs.push_back(theirs.perCall), baseQueue.push_back(theirs.queueing);
  }
  *queueing = {median(cclzQueue), median(baseQueue)};
  return {median(cclzUs), median(baseUs)};
}

// The error-feedback state of a row's calls (qgrad with --feedback 1), or none.
struct RowFeedback {
  cclzFeedback_t state = nullptr;
  RowFeedback(bool wanted, uint64_t count, bool gpu) {
    if (wanted)
      PERF_CCLZ_CHECK(
          cclzFeedbackCreate(&state, count, gpu ? cclzMemoryDevice : cclzMemoryHost));
  }
  ~RowFeedback() { cclzFeedbackDestroy(state); }
  RowFeedback(const RowFeedback&) = delete;
  RowFeedback& operator=(const RowFeedback&) = delete;
};

cclzResult_t callCclz(const Shape& s, cclzDataType_t dtype, cclzRedOp_t op, cclzComm_t comm,
                      const cclzCodecConfig_t* config, const Buffers& b,
                      cclzFeedback_t feedback) {
  auto stream = static_cast<cclzStream_t>(b.stream);
  switch (s.kind) {
    case Kind::AllGather:
      return cclzAllGather(b.send, b.recv, s.count, dtype, comm, config, stream);
    case Kind::ReduceScatter:
      if (feedback)
        return cclzReduceScatterFeedback(b.send, b.recv, s.count, dtype, op, comm, config,
                                         feedback, stream);
      return cclzReduceScatter(b.send, b.recv, s.count, dtype, op, comm, config, stream);
    case Kind::AllReduce:
      if (feedback)
        return cclzAllReduceFeedback(b.send, b.recv, s.count, dtype, op, comm, config, feedback,
                                     stream);
      return cclzAllReduce(b.send, b.recv, s.count, dtype, op, comm, config, stream);
    case Kind::AllToAll:
      return cclzAllToAll(b.send, b.recv, s.count, dtype, comm, config, stream);
    case Kind::SendRecv: {
      if (s.peer < 0) return cclzSuccess;
      cclzResult_t r;
      if (s.rank % 2 == 0) {
        r = cclzSend(b.send, s.count, dtype, s.peer, comm, config, stream);
        if (r == cclzSuccess) r = cclzRecv(b.recv, s.count, dtype, s.peer, comm, config, stream);
      } else {
        r = cclzRecv(b.recv, s.count, dtype, s.peer, comm, config, stream);
        if (r == cclzSuccess) r = cclzSend(b.send, s.count, dtype, s.peer, comm, config, stream);
      }
      return r;
    }
  }
  return cclzInternalError;
}

// The NMSE above which a lossy row counts as wrong: far above what the codec gives on Gaussian
// data (qgrad int4 ~1e-2..5e-2 per real tensor; README.md, "What cclz is"), far below what
// garbage gives.
double nmseLimit(const Options& opt) {
  if (opt.codec == "fp8") return 0.02;  // E4M3 ~4e-4, INT8 less, E5M2 ~1.5e-3 on Gaussian data
  if (opt.codec != "qgrad") return 0;
  const int bits = opt.bits ? opt.bits : 4;
  return bits == 8 ? 1e-3 : bits == 4 ? 0.1 : 1.0;
}

// Untimed calls that settle an adaptive kind before the timing (its trials take 7); one when
// the communicator is not adaptive.
constexpr int kMaxSettleCalls = 16;

// Whether the last call on every rank was of a settled kind (always, when not adaptive).
bool settledEverywhere(cclzComm_t comm) {
  int decided = 0, all = 0;
  PERF_CCLZ_CHECK(cclzCommGetLastPath(comm, nullptr, &decided));
  MPI_Allreduce(&decided, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return all == 1;
}

// Whether this rank's last call sent plain data where it had a codec (an adaptive call's choice).
bool lastCallPlain(cclzComm_t comm) {
  cclzPath_t path = cclzPathCompressed;
  PERF_CCLZ_CHECK(cclzCommGetLastPath(comm, &path, nullptr));
  return path == cclzPathPlain;
}

std::string lastPathName(cclzComm_t comm) { return lastCallPlain(comm) ? "plain" : "compressed"; }

struct CollRow {
  Shape shape;
  double ratio = 0, timeUs = 0, baseUs = 0, nmse = 0, maxRel = 0;
  // --batch: the host's time to queue a call (us), cclz's and the baseline's; -1 otherwise.
  double queueUs = -1, baseQueueUs = -1;
  uint64_t wrong = 0, baseWrong = 0;
  uint64_t pieceBytes = 0;  // the pipeline piece the library used (cclzCommGetPieceBytes)
  // GPU: the device memory cclz's calls have taken so far in the run (its scratch, frames and
  // windows grow at the first call of a larger size and are kept), -1 on the CPU.
  int64_t cclzDeviceBytes = -1;
  bool checked = false;
  std::string path;  // cclzCommGetLastPath after the timed calls: compressed or plain
  double algbw(double us) const { return us > 0 ? double(shape.bytes) / us * 1e-3 : 0; }
};

}  // namespace

int runCollectives(Options& opt, const std::string& deviceFlag, int* argc, char*** argv) {
  MPI_Init(argc, argv);
  int exitCode = 0;
  try {
    const int rank = worldRank(), ranks = worldSize();
    const coll::RankDevice dev = coll::rankDevice(deviceFlag, rank);
    const bool gpu = dev.gpu;
    void* const stream = dev.stream;
    const std::string& deviceText = dev.text;
    // Without --piece-bytes (or CCLZ_PIECE_BYTES), the library picks the piece per call.
    if (opt.pieceBytes) setenv("CCLZ_PIECE_BYTES", std::to_string(opt.pieceBytes).c_str(), 1);
    if (!opt.fused.empty()) setenv("CCLZ_FUSED", opt.fused.c_str(), 1);

    cclzCommConfig_t commConfig = CCLZ_COMM_CONFIG_INITIALIZER;
    commConfig.adaptive = opt.adaptive;
    cclzComm_t comm = nullptr;
    std::unique_ptr<coll::Plain> plain;
    if (gpu) {
#ifdef CCLZ_HAVE_NCCL
      cclzUniqueId id{};
      if (rank == 0) PERF_CCLZ_CHECK(cclzGetUniqueId(&id));
      MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
      PERF_CCLZ_CHECK(cclzCommInitRankConfig(&comm, ranks, id, rank, &commConfig));
      plain = coll::makePlainNccl(stream);
#endif
    } else {
      MPI_Comm world = MPI_COMM_WORLD;
      PERF_CCLZ_CHECK(cclzCommInitFromMpiConfig(&comm, &world, &commConfig));
      plain = coll::makePlainMpi();
    }

    const Kind kind = coll::kindOf(opt.op);
    const cclzRedOp_t redOp = opt.redOp == "avg" ? cclzAvg : cclzSum;
    const bool reduces = kind == Kind::ReduceScatter || kind == Kind::AllReduce;
    const cclzCodecConfig_t config = codecConfig(opt);
    const bool lossy = opt.lossy();
    const bool withFeedback = opt.codec == "qgrad" && opt.feedback && reduces;
    // Plain data is reduced by the network itself (NCCL or MPI), which rounds in the dtype at
    // every step in its own order: the baseline always, cclz's calls where they sent plain data
    // (the codec none; an adaptive call that ran plain). Those are checked within that rounding.
    const double baseTolerance = coll::callTolerance(reduces, true, opt.dtype, ranks);
    if (rank == 0) {
      fmt::print("# cclz-perf: op {}, {} ranks, device {}, dtype {}, codec {}{}, piece {}\n",
                 opt.op, ranks, deviceText, dtypeName(opt.dtype), opt.codec,
                 opt.codec == "qgrad" ? fmt::format(" (int{}{})", opt.bits ? opt.bits : 4,
                                                    withFeedback ? ", error feedback" : "")
                                      : "",
                 opt.pieceBytes ? fmt::format("{} B", opt.pieceBytes)
                                : std::string("per call (cclzCommGetPieceBytes)"));
      const std::string timing =
          opt.batch ? fmt::format("time: per call of {} calls back to back (one sync), median of "
                                  "{} rounds of the slowest rank (JSON queue_us: the host's "
                                  "queueing alone)",
                                  opt.iters, kBatchRounds)
                    : std::string("time: median over iterations of the slowest rank");
      fmt::print("#   iters {}, warmup {}, check {}{}; {}, cclz's and the baseline's {} "
                 "alternating;\n#   algbw = size / time, busbw = algbw x nccl-tests' factor "
                 "(uncompressed)\n",
                 opt.iters, opt.warmup, opt.check ? 1 : 0,
                 opt.check && gpu && !opt.batch ? " (an untimed call before each timed one)" : "",
                 timing, opt.batch ? "rounds" : "iterations");
      fmt::print("#   baseline: plain {} on the same buffers; speedup = baseline time / cclz time\n",
                 plain->name());
      fmt::print("#   adaptive {}: path = how cclz's timed calls ran (compressed, or plain where "
                 "its trials found plain data faster)\n",
                 opt.adaptive == 1 ? "on" : opt.adaptive == 0 ? "off" : "default");
      if (!opt.fused.empty())
        fmt::print(
            "#   fused: CCLZ_FUSED={}, compressed calls take the fused NVLink path ({}) "
            "where it applies and every rank shares NVLink\n",
            opt.fused,
            opt.fused == "ce"       ? "frames copied by the copy engines"
            : opt.fused == "direct" ? "frames stored by their encodes"
                                    : "frames stored by a kernel");
      if (gpu)
        fmt::print("#   mem(MiB): the device memory cclz's calls have taken so far in the run "
                   "(scratch, frames, windows: grown by the first calls of a larger size, kept)\n");
      fmt::print("#\n# {:>12} {:>11} {:>5} {:>5} {:>9} {:>7} {:>10} {:>8} {:>8} {:>7} {:>9} {:>10} "
                 "{:>8} {:>7} {:>10} {:>9}\n",
                 "size(B)", "count", "type", "redop", "codec", "ratio", "time(us)", "algbw",
                 "busbw", "#wrong", "nmse", "base(us)", "base_bw", "speedup", "path", "mem(MiB)");
      std::fflush(stdout);
    }

    std::vector<CollRow> rows;
#ifdef CCLZ_HAVE_CUDA
    int64_t cclzDeviceBytes = 0;  // GPU: what cclz's first calls of each size added, so far
#endif
    for (uint64_t size = opt.minBytes; size <= opt.maxBytes; size *= opt.stepFactor) {
      CollRow row;
      row.shape = coll::shapeFor(kind, size, opt.dtype, ranks, rank);
      const Shape& s = row.shape;
      if (s.count == 0) continue;
      std::vector<uint8_t> input = coll::gaussian(
          s.sendElems, opt.dtype, opt.seed * 1000003 + static_cast<uint64_t>(rank) + 1);
      size_t pieceBytes = 0;
      PERF_CCLZ_CHECK(cclzCommGetPieceBytes(comm, blockElemsOf(s) * s.elemBytes, &pieceBytes));
      row.pieceBytes = pieceBytes;
      row.ratio = wireRatio(s, opt.dtype, config, input, pieceBytes);
      coll::Reference ref;
      if (opt.check) ref = coll::makeReference(s, opt.dtype, redOp, input);
      Buffers b = makeBuffers(s, std::move(input), gpu, stream);
      const RowFeedback feedback(withFeedback, s.sendElems, gpu);
      const bool checkHere = opt.check && (s.kind != Kind::SendRecv || s.peer >= 0);
      row.checked = opt.check;

      const Contender cclz{
          [&] {
            PERF_CCLZ_CHECK_COMM(
                callCclz(s, opt.dtype, redOp, comm, &config, b, feedback.state), comm);
          },
          [&] {
            if (!checkHere) return;
            const bool plainData = config.codec == cclzCodecNone || lastCallPlain(comm);
            const coll::Check c =
                coll::check(ref, opt.dtype, lossy, b.output(),
                            coll::callTolerance(reduces, plainData, opt.dtype, ranks));
            row.wrong += c.wrong + (lossy && c.nmse > nmseLimit(opt) ? 1 : 0);
            row.nmse = std::max(row.nmse, c.nmse), row.maxRel = std::max(row.maxRel, c.maxRelErr);
            b.clearOutput();
          }};
      // The plain collective: same data, same timing; its moves checked exactly, its reductions
      // (which round in the dtype at every step) within that rounding. It always sums.
      const Contender baseline{
          [&] { plain->run(s, opt.dtype, b.send, b.recv); },
          [&] {
            if (!checkHere) return;
            if (!reduces || redOp == cclzSum)
              row.baseWrong += coll::check(ref, opt.dtype, false, b.output(), baseTolerance).wrong;
            b.clearOutput();  // cclz's next output is checked on a cleared buffer
          }};
      // Adaptive: the kind's trials run before the timing (untimed), until every rank says it
      // is settled, so that the timed calls are the steady state a training loop sees. The
      // device memory cclz takes for the size is what these first calls add.
      b.sync();
#ifdef CCLZ_HAVE_CUDA
      const uint64_t inUseBefore = gpu ? perf::gpu::deviceBytesInUse() : 0;
#endif
      for (int i = 0; i < kMaxSettleCalls; ++i) {
        cclz.call();
        if (settledEverywhere(comm)) break;
      }
      b.sync();
#ifdef CCLZ_HAVE_CUDA
      if (gpu) {
        const uint64_t inUseAfter = perf::gpu::deviceBytesInUse();
        cclzDeviceBytes += inUseAfter > inUseBefore ? inUseAfter - inUseBefore : 0;
        row.cclzDeviceBytes = cclzDeviceBytes;
      }
#endif
      b.clearOutput();
      if (opt.batch) {
        std::pair<double, double> queueing;
        std::tie(row.timeUs, row.baseUs) = timeBatches(opt, b, cclz, baseline, &queueing);
        std::tie(row.queueUs, row.baseQueueUs) = queueing;
      } else {
        std::tie(row.timeUs, row.baseUs) = timeAlternating(opt, b, cclz, baseline);
      }
      row.path = lastPathName(comm);
      if (gpu) {
        cclzResult_t async = cclzSuccess;
        PERF_CCLZ_CHECK(cclzCommGetAsyncError(comm, &async));
        if (async != cclzSuccess) fail("asynchronous error: {}", cclzGetLastError(comm));
      }

      uint64_t wrong[2] = {row.wrong, row.baseWrong}, wrongAll[2] = {};
      MPI_Allreduce(wrong, wrongAll, 2, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
      row.wrong = wrongAll[0], row.baseWrong = wrongAll[1];
      double errs[2] = {row.nmse, row.maxRel}, errsAll[2] = {};
      MPI_Allreduce(errs, errsAll, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      row.nmse = errsAll[0], row.maxRel = errsAll[1];
      if (rank == 0) {
        fmt::print("  {:>12} {:>11} {:>5} {:>5} {:>9} {:>7.3f} {:>10.1f} {:>8.2f} {:>8.2f} {:>7} "
                   "{:>9} {:>10.1f} {:>8.2f} {:>7.3f} {:>10} {:>9}\n",
                   s.bytes, s.count, dtypeName(opt.dtype), reduces ? opt.redOp : "-", opt.codec,
                   row.ratio, row.timeUs, row.algbw(row.timeUs),
                   row.algbw(row.timeUs) * s.busFactor,
                   row.checked ? std::to_string(row.wrong + row.baseWrong) : "-",
                   lossy && row.checked ? fmt::format("{:.3e}", row.nmse) : "-", row.baseUs,
                   row.algbw(row.baseUs), row.timeUs > 0 ? row.baseUs / row.timeUs : 0,
                   row.path,
                   row.cclzDeviceBytes >= 0
                       ? fmt::format("{:.1f}", row.cclzDeviceBytes / 1048576.0)
                       : std::string("-"));
        std::fflush(stdout);
      }
      if (row.wrong || row.baseWrong) exitCode = 1;
      rows.push_back(row);
      if (size > opt.maxBytes / opt.stepFactor) break;  // no overflow past the last size
    }

    if (rank == 0 && !opt.json.empty()) {
      nlohmann::json all = nlohmann::json::array();
      for (const CollRow& r : rows)
        all.push_back({{"op", opt.op},
                       {"codec", opt.codec},
                       {"bits", opt.codec == "qgrad" ? (opt.bits ? opt.bits : 4) : 0},
                       {"dtype", dtypeName(opt.dtype)},
                       {"redop", reduces ? opt.redOp : "-"},
                       {"device", gpu ? "gpu" : "cpu"},
                       {"ranks", ranks},
                       {"bytes", r.shape.bytes},
                       {"count", r.shape.count},
                       {"piece_bytes", r.pieceBytes},
                       {"ratio", r.ratio},
                       {"time_us", r.timeUs},
                       {"algbw_GBps", r.algbw(r.timeUs)},
                       {"busbw_GBps", r.algbw(r.timeUs) * r.shape.busFactor},
                       {"baseline", plain->name()},
                       {"baseline_time_us", r.baseUs},
                       {"queue_us", r.queueUs >= 0 ? nlohmann::json(r.queueUs) : nlohmann::json()},
                       {"baseline_queue_us",
                        r.baseQueueUs >= 0 ? nlohmann::json(r.baseQueueUs) : nlohmann::json()},
                       {"baseline_algbw_GBps", r.algbw(r.baseUs)},
                       {"speedup", r.timeUs > 0 ? r.baseUs / r.timeUs : 0},
                       {"nmse", lossy && r.checked ? nlohmann::json(r.nmse) : nlohmann::json()},
                       {"wrong", r.checked ? nlohmann::json(r.wrong + r.baseWrong)
                                           : nlohmann::json()},
                       {"check", r.checked},
                       {"path", r.path},
                       {"cclz_device_bytes", r.cclzDeviceBytes >= 0
                                                 ? nlohmann::json(r.cclzDeviceBytes)
                                                 : nlohmann::json()},
                       {"feedback", withFeedback},
                       {"adaptive", opt.adaptive == 1   ? "on"
                                    : opt.adaptive == 0 ? "off"
                                                        : "default"},
                       {"timing", opt.batch ? "batch" : "each"},
                       {"fused", opt.fused.empty() ? "0" : opt.fused}});
      std::ofstream(opt.json) << all.dump(1) << "\n";
    }
    if (rank == 0 && exitCode) fmt::print("# FAILED: some iterations were wrong\n");
    plain.reset();
    cclzCommDestroy(comm);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "cclz-perf (rank {}): error: {}\n", worldRank(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return exitCode;
}

#endif  // CCLZ_HAVE_MPI

}  // namespace perf
