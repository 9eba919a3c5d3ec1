// cclz-perf --op ag_gemm|gemm_rs (op_overlap.h): the overlapped tensor-parallel GEMMs beside
// their parts, in one run per size:
//   gemm     the GEMM alone: the all-gather + GEMM call on a communicator of this rank alone
//            (one chunk, no transfer; it also copies the input once into its gathered matrix);
//   comm     the plain collective alone, through cclz with the codec none (NCCL's or MPI's own);
//   serial   the two one after the other, as a TP layer without overlap runs them;
//   overlap  the overlapped call without a codec, and with --codec fp8 through the fp8 codec;
// and the overlap efficiency 1 - (overlapped - max(gemm, comm)) / min(gemm, comm) (1: the
// communication hidden entirely; 0: serial). Calls back to back, one sync per round, the median
// of kBatchRounds rounds of the slowest rank, the contenders alternating round by round.
// -c 1: each overlapped output against the serial one (NMSE: the GEMMs may sum in another order,
// and fp8 adds its quantization).
#include "op_overlap.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

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

bool isOverlapOp(const std::string& op) { return op == "ag_gemm" || op == "gemm_rs"; }

#ifndef CCLZ_HAVE_MPI

int runOverlap(Options& opt, const std::string&, int*, char***) {
  fail("--op {}: this build of cclz-perf has no MPI (install libopenmpi-dev and rebuild)", opt.op);
}

#else

namespace {

// The NMSE above which an overlapped output is reported wrong against the serial one: plain, the
// rounding of two GEMM algorithms (bf16 output: ~1e-6); fp8, its quantization of the inputs.
constexpr double kPlainNmse = 1e-4, kFp8Nmse = 3e-2;

// One matrix, on the device or the host.
class Matrix {
 public:
  Matrix(uint64_t bytes, bool gpu) : host_(bytes) {
#ifdef CCLZ_HAVE_CUDA
    if (gpu) device_ = std::make_unique<gpu::Buffer>(bytes);
#else
    (void)gpu;
#endif
  }
  void* data() {
#ifdef CCLZ_HAVE_CUDA
    if (device_) return device_->data();
#endif
    return host_.data();
  }
  void upload(const std::vector<uint8_t>& bytes) {
    host_ = bytes;
#ifdef CCLZ_HAVE_CUDA
    if (device_)
      PERF_CUDA_CHECK(cudaMemcpy(device_->data(), bytes.data(), bytes.size(),
                                 cudaMemcpyHostToDevice));
#endif
  }
  std::vector<uint8_t> download() {
#ifdef CCLZ_HAVE_CUDA
    if (device_)
      PERF_CUDA_CHECK(cudaMemcpy(host_.data(), device_->data(), host_.size(),
                                 cudaMemcpyDeviceToHost));
#endif
    return host_;
  }

 private:
  std::vector<uint8_t> host_;
#ifdef CCLZ_HAVE_CUDA
  std::unique_ptr<gpu::Buffer> device_;
#endif
};

struct OverlapRow {
  uint64_t bytes = 0, rows = 0;  // the size column; rows per rank (m)
  double gemmUs = 0, commUs = 0, serialUs = 0, overlapUs = 0, fp8Us = 0;
  double overlapNmse = 0, fp8Nmse = 0;
  bool wrong = false;
};

double efficiency(const OverlapRow& r, double overlappedUs) {
  const double lo = std::min(r.gemmUs, r.commUs), hi = std::max(r.gemmUs, r.commUs);
  return lo > 0 ? 1.0 - (overlappedUs - hi) / lo : 0.0;
}

int rankOf(MPI_Comm c) {
  int r = 0;
  MPI_Comm_rank(c, &r);
  return r;
}

}  // namespace

int runOverlap(Options& opt, const std::string& deviceFlag, int* argc, char*** argv) {
  MPI_Init(argc, argv);
  int exitCode = 0;
  try {
    const int rank = rankOf(MPI_COMM_WORLD);
    int ranks = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    coll::RankDevice dev = coll::rankDevice(deviceFlag, rank);
    const bool gather = opt.op == "ag_gemm";
    // Llama-3-70B's MLP at TP4 unless given: ag_gemm k = hidden 8192, n = ffn / 4 = 7168;
    // gemm_rs k = 7168, n = 8192.
    const uint64_t k = opt.gemmK ? opt.gemmK : gather ? 8192 : 7168;
    const uint64_t n = opt.gemmN ? opt.gemmN : gather ? 7168 : 8192;
    const size_t es = dtypeSize(opt.dtype);
    if (opt.codec != "none" && opt.codec != "fp8")
      fail("--op {}: --codec none or fp8 (the overlapped GEMMs' codecs), not {}", opt.op,
           opt.codec);
    const bool fp8 = opt.codec == "fp8";
    const cclzCodecConfig_t fp8Config = codecConfig(opt);

    cclzCommConfig_t commConfig = CCLZ_COMM_CONFIG_INITIALIZER;
    commConfig.adaptive = 0;  // the plain collective straight to the network
    cclzComm_t comm = nullptr, self = nullptr;
    if (dev.gpu) {
      cclzUniqueId id{}, own{};
      if (rank == 0) PERF_CCLZ_CHECK(cclzGetUniqueId(&id));
      MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
      PERF_CCLZ_CHECK(cclzCommInitRankConfig(&comm, ranks, id, rank, &commConfig));
      PERF_CCLZ_CHECK(cclzGetUniqueId(&own));
      PERF_CCLZ_CHECK(cclzCommInitRankConfig(&self, 1, own, 0, &commConfig));
    } else {
      MPI_Comm world = MPI_COMM_WORLD, alone = MPI_COMM_SELF;
      PERF_CCLZ_CHECK(cclzCommInitFromMpiConfig(&comm, &world, &commConfig));
      PERF_CCLZ_CHECK(cclzCommInitFromMpiConfig(&self, &alone, &commConfig));
    }
    auto check = [](cclzResult_t r, const char* what, cclzComm_t c) {
      if (r != cclzSuccess)
        fail("{} failed: {}: {}", what, cclzGetErrorString(r), cclzGetLastError(c));
    };
    auto sync = [&] {
#ifdef CCLZ_HAVE_CUDA
      if (dev.gpu) PERF_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(dev.stream)));
#endif
    };
    const auto stream = static_cast<cclzStream_t>(dev.stream);

    if (rank == 0) {
      fmt::print("# cclz-perf: op {}, {} ranks, device {}, dtype {}, per rank n {} k {}{}\n",
                 opt.op, ranks, dev.text, dtypeName(opt.dtype), n, k,
                 fp8 ? ", and the fp8 codec" : "");
      fmt::print("#   size: the bytes of the {} (ranks x m rows of k); time per call (us) of {} "
                 "calls back to back, median of {} rounds of the slowest rank\n",
                 gather ? "gathered input" : "partial products' input", opt.iters, kBatchRounds);
      fmt::print("#   gemm: the call on this rank alone; comm: the plain {} through cclz; "
                 "eff = 1 - (overlapped - max(gemm, comm)) / min(gemm, comm)\n#\n",
                 gather ? "all-gather" : "reduce-scatter");
      fmt::print("# {:>12} {:>7} {:>9} {:>9} {:>9} {:>9} {:>6} {:>9} {:>6} {:>9}\n", "size(B)",
                 "m", "gemm", "comm", "serial", "overlap", "eff", "fp8", "eff", "nmse");
      std::fflush(stdout);
    }

    std::vector<OverlapRow> rows;
    for (uint64_t size = opt.minBytes; size <= opt.maxBytes; size *= opt.stepFactor) {
      OverlapRow row;
      row.rows = size / (ranks * k * es);
      if (row.rows == 0) continue;
      const uint64_t m = row.rows, all = ranks * m;
      row.bytes = all * k * es;
      // ag_gemm: a = this rank's m rows, gathered = all rows, c = all x n.
      // gemm_rs: a = all rows (k = this rank's share of the inner size), partial = all x n,
      // c = m x n.
      Matrix a((gather ? m : all) * k * es, dev.gpu), b(n * k * es, dev.gpu);
      const uint64_t outBytes = (gather ? all : m) * n * es;
      Matrix gathered(gather ? all * k * es : 0, dev.gpu);
      Matrix partial(gather ? 0 : all * n * es, dev.gpu);
      Matrix c(outBytes, dev.gpu), serialOut(outBytes, dev.gpu);
      a.upload(coll::gaussian((gather ? m : all) * k, opt.dtype, opt.seed + 1 + rank));
      std::vector<uint8_t> weights = coll::gaussian(n * k, opt.dtype, opt.seed + 1000 + rank);
      b.upload(weights);

      // The contenders. The GEMM alone: all rows times B, through the all-gather + GEMM call on
      // this rank alone (no reduction pass), from the gathered matrix (ag) into out, or from a
      // into the partials (rs).
      auto gemmAlone = [&](void* out) {
        check(cclzAllGatherMatmul(gather ? gathered.data() : a.data(), b.data(), nullptr,
                                  gather ? out : partial.data(), nullptr, all, n, k, 1, opt.dtype,
                                  self, nullptr, stream),
              "cclzAllGatherMatmul (this rank alone)", self);
      };
      auto commAlone = [&](void* out) {
        if (gather)
          check(cclzAllGather(a.data(), gathered.data(), m * k, opt.dtype, comm, nullptr, stream),
                "cclzAllGather", comm);
        else
          check(cclzReduceScatter(partial.data(), out, m * n, opt.dtype, cclzSum, comm, nullptr,
                                  stream),
                "cclzReduceScatter", comm);
      };
      auto serial = [&] {
        if (gather) {
          commAlone(nullptr);
          gemmAlone(serialOut.data());
        } else {
          gemmAlone(nullptr);
          commAlone(serialOut.data());
        }
      };
      auto overlapped = [&](const cclzCodecConfig_t* codec) {
        if (gather)
          check(cclzAllGatherMatmul(a.data(), b.data(), nullptr, c.data(), gathered.data(), m, n, k,
                                    1, opt.dtype, comm, codec, stream),
                "cclzAllGatherMatmul", comm);
        else
          check(cclzMatmulReduceScatter(a.data(), b.data(), c.data(), m, n, k, 1, opt.dtype,
                                        cclzSum, comm, codec, stream),
                "cclzMatmulReduceScatter", comm);
      };

      struct Contender {
        std::function<void()> call;
        double* us;
        std::vector<double> rounds;
      };
      std::vector<Contender> contenders = {
          {[&] { gemmAlone(serialOut.data()); }, &row.gemmUs, {}},
          {[&] { commAlone(serialOut.data()); }, &row.commUs, {}},
          {serial, &row.serialUs, {}},
          {[&] { overlapped(nullptr); }, &row.overlapUs, {}}};
      if (fp8) contenders.push_back({[&] { overlapped(&fp8Config); }, &row.fp8Us, {}});
      for (int w = 0; w < opt.warmup; ++w)
        for (auto& cnt : contenders) cnt.call();
      sync();
      for (int round = 0; round < kBatchRounds; ++round) {
        for (auto& cnt : contenders) {
          MPI_Barrier(MPI_COMM_WORLD);
          const auto t0 = std::chrono::steady_clock::now();
          for (int i = 0; i < opt.iters; ++i) cnt.call();
          sync();
          const double local = std::chrono::duration<double, std::micro>(
                                   std::chrono::steady_clock::now() - t0)
                                   .count() /
                               opt.iters;
          double slowest = 0;
          MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          cnt.rounds.push_back(slowest);
        }
      }
      for (auto& cnt : contenders) *cnt.us = median(cnt.rounds);

      if (opt.check) {  // each overlapped output against the serial one, on every rank
        serial();
        sync();
        const coll::Reference ref = coll::moveReference(serialOut.download(), opt.dtype);
        auto nmseOf = [&](const cclzCodecConfig_t* codec) {
          overlapped(codec);
          sync();
          const coll::Check got = coll::check(ref, opt.dtype, true, c.download());
          double worst = got.wrong ? 1e300 : got.nmse;
          MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
          return worst;
        };
        row.overlapNmse = nmseOf(nullptr);
        if (fp8) row.fp8Nmse = nmseOf(&fp8Config);
        row.wrong = row.overlapNmse > kPlainNmse || (fp8 && row.fp8Nmse > kFp8Nmse);
        if (row.wrong) exitCode = 1;
      }
      if (rank == 0) {
        fmt::print("  {:>12} {:>7} {:>9.1f} {:>9.1f} {:>9.1f} {:>9.1f} {:>6.2f} {:>9} {:>6} "
                   "{:>9}{}\n",
                   row.bytes, m, row.gemmUs, row.commUs, row.serialUs, row.overlapUs,
                   efficiency(row, row.overlapUs),
                   fp8 ? fmt::format("{:.1f}", row.fp8Us) : std::string("-"),
                   fp8 ? fmt::format("{:.2f}", efficiency(row, row.fp8Us)) : std::string("-"),
                   opt.check ? fmt::format("{:.2e}", std::max(row.overlapNmse, row.fp8Nmse))
                             : std::string("-"),
                   row.wrong ? "  WRONG" : "");
        std::fflush(stdout);
      }
      rows.push_back(row);
    }

    if (rank == 0 && !opt.json.empty()) {
      nlohmann::json out = nlohmann::json::array();
      for (const OverlapRow& r : rows) {
        nlohmann::json j = {{"op", opt.op}, {"ranks", ranks}, {"dtype", dtypeName(opt.dtype)},
                            {"bytes", r.bytes}, {"m", r.rows}, {"n", n}, {"k", k},
                            {"gemm_us", r.gemmUs}, {"comm_us", r.commUs},
                            {"serial_us", r.serialUs}, {"overlap_us", r.overlapUs},
                            {"overlap_efficiency", efficiency(r, r.overlapUs)},
                            {"device", dev.text}, {"iters", opt.iters}};
        if (fp8) {
          j["fp8_us"] = r.fp8Us;
          j["fp8_efficiency"] = efficiency(r, r.fp8Us);
        }
        if (opt.check) {
          j["overlap_nmse"] = r.overlapNmse;
          if (fp8) j["fp8_nmse"] = r.fp8Nmse;
          j["wrong"] = r.wrong;
        }
        out.push_back(j);
      }
      std::ofstream(opt.json) << out.dump(1) << "\n";
    }
    if (rank == 0 && exitCode) fmt::print("# FAILED: an overlapped output is off the serial one\n");
    cclzCommDestroy(self);
    cclzCommDestroy(comm);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "cclz-perf (rank {}): error: {}\n", rankOf(MPI_COMM_WORLD), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return exitCode;
}

#endif  // CCLZ_HAVE_MPI

}  // namespace perf
