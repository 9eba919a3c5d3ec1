// cclz-perf: benchmarks of cclz in the style of NVIDIA's nccl-tests (same -b -e -f -n -w -c -d
// flags, one table row per size), on the GPU when there is one and on the CPU otherwise.
//   cclz-perf --op codec -b 1K -e 256M -f 4 -d bf16
//   cclz-perf --op codec --input ../shared/data/gpt-small-tensors/index.json --json out.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "data.h"
#include "error.h"
#include "gpu.h"
#include "op_collective.h"
#include "op_overlap.h"
#include "ops.h"
#include "options.h"
#include "report.h"

namespace perf {
namespace {

// nccl-tests' sizes: an integer with an optional K, M or G (powers of 1024).
size_t parseBytes(const std::string& text, const char* flag) {
  size_t end = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &end);
  } catch (const std::exception&) {
    fail("{} {}: not a size (expected e.g. 4096, 64K, 16M, 1G)", flag, text);
  }
  int shift = 0;
  if (end + 1 == text.size()) {
    switch (std::toupper(static_cast<unsigned char>(text[end]))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        end = 0;
    }
    if (end) ++end;
  }
  if (end != text.size() || text[0] == '-')
    fail("{} {}: not a size (expected e.g. 4096, 64K, 16M, 1G)", flag, text);
  if (value > (~0ull >> shift)) fail("{} {}: too large", flag, text);
  return static_cast<size_t>(value << shift);
}

struct Target {
  Device device;
  std::string text;     // for the header
  std::string gpuName;  // empty on the CPU
};

// The default is the GPU when this build has CUDA and a device is visible; asking for a GPU that
// is not there is an error, not a silent fallback.
Target chooseDevice(const std::string& requested) {
  cclzBuildInfo_t info{};
  info.size = sizeof info;
  PERF_CCLZ_CHECK(cclzGetBuildInfo(&info));
  int gpus = 0;
#ifdef CCLZ_HAVE_CUDA
  if (info.hasCuda) gpus = gpu::deviceCount();
#endif
  const bool gpu = requested == "gpu" || (requested.empty() && gpus > 0);
  if (!gpu) {
    const char* why = !info.hasCuda ? "this build has no CUDA" : gpus ? "" : "no CUDA device";
    return {Device::Cpu, *why ? fmt::format("cpu ({})", why) : "cpu", ""};
  }
  if (!info.hasCuda) fail("--device gpu: this build of cclz has no CUDA; use --device cpu");
  if (gpus == 0) fail("--device gpu: no CUDA device is visible; use --device cpu");
  Target t{Device::Gpu, "", ""};
#ifdef CCLZ_HAVE_CUDA
  int device = 0;
  PERF_CUDA_CHECK(cudaGetDevice(&device));
  t.gpuName = gpu::deviceName(device);
  t.text = fmt::format("gpu {} ({}, cuda archs {})", device, t.gpuName, info.cudaArchs);
#endif
  return t;
}

int run(Options& opt, const std::string& deviceFlag) {
  const Target target = chooseDevice(deviceFlag);
  opt.device = target.device;
  if (!opt.json.empty() && !std::ofstream(opt.json, std::ios::app))
    fail("--json {}: cannot open for writing", opt.json);  // fail now, not after the run

  const Op& op = findOp(opt.op);
  if (op.validate) op.validate(opt);
  const Dataset data = loadDataset(opt);
  Report report(opt, data);
  report.printHeader(target.text, data.description);
  const Context ctx{opt, target.gpuName};
  try {
    for (const auto& input : data.inputs) report.add(op.run(ctx, input));
  } catch (const Error&) {
    // Keep the rows measured before the failure: a long device run is not wasted by its last row.
    if (!opt.json.empty()) report.writeJson(opt.json);
    throw;
  }
  report.printSummary();
  if (!opt.json.empty()) report.writeJson(opt.json);
  return report.failures() ? 1 : 0;
}

}  // namespace
}  // namespace perf

int main(int argc, char** argv) {
  perf::Options opt;
  std::string minBytes = "32M", maxBytes = "32M", dtype = "bf16", device, data = "gaussian";
  int check = 1;

  CLI::App app{"cclz-perf: throughput, compression and correctness of cclz (nccl-tests style)"};
  std::vector<std::string> ops = perf::opNames();
  for (const char* const* name = perf::collectiveOpNames(); *name; ++name) ops.emplace_back(*name);
  for (const char* name : {"ag_gemm", "gemm_rs"}) ops.emplace_back(name);
  app.add_option("--op", opt.op, "what to measure (collectives: one process per rank, mpirun)")
      ->check(CLI::IsMember(ops))
      ->capture_default_str();
  auto* bFlag =
      app.add_option("-b,--minbytes", minBytes, "smallest size in bytes (K, M, G suffixes)")
          ->capture_default_str();
  auto* eFlag =
      app.add_option("-e,--maxbytes", maxBytes, "largest size in bytes (K, M, G suffixes)")
          ->capture_default_str();
  auto* fFlag = app.add_option("-f,--stepfactor", opt.stepFactor, "multiply the size by this")
                    ->check(CLI::Range(2, 1 << 20))
                    ->capture_default_str();
  app.add_option("-n,--iters", opt.iters, "timed iterations (the median is reported)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("-w,--warmup_iters", opt.warmup, "untimed iterations first")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("-d,--datatype", dtype, "element type")
      ->check(CLI::IsMember({"bf16", "fp16", "fp32"}))
      ->capture_default_str();
  app.add_option("-c,--check", check, "check the decoded data against the input (0/1)")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  auto* codecFlag =
      app.add_option("--codec", opt.codec, "codec (ag_gemm, gemm_rs: none or fp8, default fp8)")
          ->check(CLI::IsMember({"lossless", "none", "fp8", "qgrad"}))
          ->capture_default_str();
  app.add_option("--device", device,
                 "cpu or gpu (default: gpu if cclz was built with CUDA and a GPU is visible)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  auto* inputFlag = app.add_option(
      "--input", opt.input, "a raw tensor file (read as -d) or an index.json of tensors (bf16)");
  auto* dataFlag = app.add_option("--data", data, "synthetic data when there is no --input")
                       ->check(CLI::IsMember({"gaussian", "uniform-bits"}))
                       ->capture_default_str();
  app.add_option("--seed", opt.seed, "seed of the synthetic data")->capture_default_str();
  app.add_option("--chunk-elems", opt.chunkElems, "cclzCodecConfig_t.chunkElems (0: default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--bits", opt.bits, "qgrad: cclzCodecConfig_t.bits, 8, 4 or 2 (0: default 4)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--block-elems", opt.blockElems,
                 "qgrad: cclzCodecConfig_t.blockElems (0: default 64)")
      ->check(CLI::NonNegativeNumber);
  std::string rounding = "nearest";
  app.add_option("--rounding", rounding, "qgrad: nearest or stochastic")
      ->check(CLI::IsMember({"nearest", "stochastic"}))
      ->capture_default_str();
  app.add_option("--rounding-seed", opt.roundingSeed, "qgrad: cclzCodecConfig_t.seed")
      ->capture_default_str();
  int feedback = 1;
  app.add_option("--feedback", feedback,
                 "qgrad: 1 uses error feedback (codec: cclzEncodeFeedback; all-reduce and "
                 "reduce-scatter: the *Feedback calls, one state per size), 0 does not")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  app.add_option("--fp8-format", opt.fp8Format, "fp8: grid of the codes")
      ->check(CLI::IsMember({"default", "e4m3", "e5m2", "int8"}))
      ->capture_default_str();
  app.add_option("--fp8-row-elems", opt.fp8RowElems,
                 "fp8: elements per row (the coarse scale's span; 0: the encoder chooses it from "
                 "the data)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fp8-hadamard", opt.fp8Hadamard, "fp8: Hadamard size (0: default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fp8-rotation", opt.fp8Rotation, "fp8: which rows are rotated")
      ->check(CLI::IsMember({"default", "never", "always", "adaptive"}))
      ->capture_default_str();
  app.add_option("--fp8-threshold", opt.fp8Threshold,
                 "fp8: adaptive rotation threshold (0: default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--fp8-candidates", opt.fp8Candidates,
                 "fp8: fine-scale candidates searched per block (0: default)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--redop", opt.redOp, "collectives: the reduction, sum or avg")
      ->check(CLI::IsMember({"sum", "avg"}))
      ->capture_default_str();
  std::string pieceBytes;
  app.add_option("--piece-bytes", pieceBytes,
                 "collectives: pipeline piece per destination (CCLZ_PIECE_BYTES; default: the "
                 "library's choice per call)");
  std::string adaptive = "default";
  app.add_option("--adaptive", adaptive,
                 "collectives: cclzCommConfig_t.adaptive, whether a call may run as plain data "
                 "where that is faster (default: the library's, CCLZ_ADAPTIVE or on); each row "
                 "says which path its timed calls took")
      ->check(CLI::IsMember({"default", "on", "off"}))
      ->capture_default_str();
  app.add_flag("--fused{1}", opt.fused,
               "collectives on the GPU: CCLZ_FUSED for cclz's communicator, the fused NVLink paths "
               "where they apply: --fused (=1) stores the frames by a kernel (fp8 all-gather and "
               "reduce-scatter, lossless all-gather), --fused=ce copies them by the copy engines "
               "(also the all-reduce and qgrad), --fused=direct is the kernel path with the frames "
               "encoded into the peers' windows; also as CCLZ_FUSED is set")
      ->check(CLI::IsMember({"1", "ce", "direct"}));
  app.add_flag("--batch", opt.batch,
               "collectives, and the codec on the GPU: time the -n calls back to back, one sync "
               "(one event pair) at the end (nccl-tests' timing), 5 rounds, median; default: "
               "each call alone (between barriers, or between its own events)");
  app.add_option("--gemm-n", opt.gemmN,
                 "ag_gemm, gemm_rs: the product's columns per rank (0: 7168 for ag_gemm, 8192 "
                 "for gemm_rs, Llama-3-70B's MLP at TP4)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--gemm-k", opt.gemmK,
                 "ag_gemm, gemm_rs: the inner size per rank (0: 8192 for ag_gemm, 7168 for "
                 "gemm_rs); the sweep's size is the bytes of ranks x m rows of k")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", opt.json, "write the rows to this file as a JSON array");
  // With --input the tensors decide the sizes and the data; a sweep flag too would be ignored.
  for (auto* flag : {bFlag, eFlag, fFlag, dataFlag}) inputFlag->excludes(flag);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  try {
    opt.dtype = perf::parseDtype(dtype);
    opt.check = check != 0;
    opt.stochastic = rounding == "stochastic";
    opt.feedback = feedback != 0;
    opt.adaptive = adaptive == "on" ? 1 : adaptive == "off" ? 0 : CCLZ_ADAPTIVE_DEFAULT;
    opt.data = data == "gaussian" ? perf::DataKind::Gaussian : perf::DataKind::UniformBits;
    opt.minBytes = perf::parseBytes(minBytes, "-b/--minbytes");
    opt.maxBytes = perf::parseBytes(maxBytes, "-e/--maxbytes");
    // Without --piece-bytes, the caller's CCLZ_PIECE_BYTES holds (cclz-perf sets it for the run).
    const char* pieceEnv = std::getenv("CCLZ_PIECE_BYTES");
    if (pieceBytes.empty() && pieceEnv && *pieceEnv) pieceBytes = pieceEnv;
    if (!pieceBytes.empty()) opt.pieceBytes = perf::parseBytes(pieceBytes, "--piece-bytes");
    const char* fusedEnv = std::getenv("CCLZ_FUSED");
    const std::string fusedSet = fusedEnv ? fusedEnv : "";
    if (opt.fused.empty() && (fusedSet == "1" || fusedSet == "ce" || fusedSet == "direct"))
      opt.fused = fusedSet;
    if (opt.minBytes > opt.maxBytes)
      perf::fail("-b/--minbytes ({}) is larger than -e/--maxbytes ({})", opt.minBytes,
                 opt.maxBytes);
    if (perf::isOverlapOp(opt.op)) {
      if (codecFlag->count() == 0) opt.codec = "fp8";  // the plain and the fp8 columns
      return perf::runOverlap(opt, device, &argc, &argv);
    }
    if (perf::isCollectiveOp(opt.op)) {
      if (!opt.input.empty()) perf::fail("--op {}: --input is not supported (seeded data)", opt.op);
      return perf::runCollectives(opt, device, &argc, &argv);
    }
    return perf::run(opt, device);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "cclz-perf: error: {}\n", e.what());
    return 1;
  }
}
