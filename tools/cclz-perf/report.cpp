#include "report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "error.h"

namespace perf {
namespace {

std::string configText(int value) { return value ? std::to_string(value) : "default"; }

std::string exactText(const Row& r) {
  if (!r.exact) return "-";
  if (r.lossy && r.codec == "fp8") return *r.exact ? "lossy" : "BROKEN";
  if (r.lossy) return *r.exact ? "bound" : "OUT";
  return *r.exact ? "true" : "false";
}

std::string errorText(const Row& r, double value) {
  if (!r.exact) return "-";
  return std::isfinite(value) ? fmt::format("{:.3e}", value) : "nan";
}

}  // namespace

Report::Report(const Options& opt, const Dataset& data) : opt_(opt) {
  if (!data.named) return;
  nameWidth_ = 6;  // "tensor"
  for (const auto& in : data.inputs) nameWidth_ = std::max(nameWidth_, in.name.size());
}

void Report::printHeader(const std::string& deviceText, const std::string& dataText) const {
  int version = 0;
  PERF_CCLZ_CHECK(cclzGetVersion(&version));
  fmt::print("# cclz-perf (cclz {}.{}.{}): op {}, device {}, dtype {}, codec {}\n", version / 10000,
             version / 100 % 100, version % 100, opt_.op, deviceText, dtypeName(opt_.dtype),
             opt_.codec);
  if (opt_.codec == "qgrad")
    fmt::print("#   codec config: bits {}, block-elems {}, rounding {} (seed {}), encode {}\n",
               configText(opt_.bits), configText(opt_.blockElems),
               opt_.stochastic ? "stochastic" : "nearest", opt_.roundingSeed,
               opt_.feedback ? "with error feedback" : "plain");
  else if (opt_.codec == "fp8")
    fmt::print(
        "#   codec config: fp8-format {}, fp8-row-elems {}, fp8-hadamard {}, fp8-rotation {}, "
        "fp8-threshold {}, fp8-candidates {}\n",
        opt_.fp8Format,
        opt_.fp8RowElems ? std::to_string(opt_.fp8RowElems) : "auto (from the data)",
        configText(opt_.fp8Hadamard), opt_.fp8Rotation, configText(opt_.fp8Threshold),
        configText(opt_.fp8Candidates));
  else
    fmt::print("#   codec config: chunk-elems {}\n", configText(opt_.chunkElems));
  fmt::print("#   data: {}\n", dataText);
  fmt::print(
      "#   iters {}, warmup {}, check {}; times are {}; GB/s = uncompressed bytes / time\n",
      opt_.iters, opt_.warmup, opt_.check ? 1 : 0,
      opt_.batch && opt_.device == Device::Gpu
          ? fmt::format("per call of {} calls back to back, median of {} rounds", opt_.iters,
                        kBatchRounds)
          : std::string("medians of calls timed alone"));
  fmt::print("#\n");
  const std::string name = nameWidth_ ? fmt::format(" {:<{}}", "tensor", nameWidth_) : "";
  fmt::print(
      "#{} {:>12} {:>12} {:>5} {:>9} {:>7} {:>10} {:>9} {:>10} {:>9} {:>10} {:>6} {:>9} {:>9} "
      "{:>9}\n",
      name, "size(B)", "count", "type", "codec", "ratio", "enc(us)", "enc(GB/s)", "dec(us)",
      "dec(GB/s)", "copy(GB/s)", "exact", "acc(GB/s)", "nmse", "maxrel");
  fmt::print("#   exact: true = bit-exact round trip; qgrad: bound = every element within "
             "the format's error bound; fp8: lossy = no NaN/Inf appeared or vanished. acc(GB/s) = fp32 accumulator bytes / decode-and-accumulate "
             "time; maxrel = max|error| / max|x|\n");
  std::fflush(stdout);
}

void Report::add(Row row) {
  const std::string name =
      nameWidth_ ? fmt::format(" {:<{}}", row.tensor.value_or(""), nameWidth_) : "";
  fmt::print(
      " {} {:>12} {:>12} {:>5} {:>9} {:>7.3f} {:>10.2f} {:>9.2f} {:>10.2f} {:>9.2f} {:>10.2f} "
      "{:>6} {:>9} {:>9} {:>9}\n",
      name, row.bytes, row.count, row.dtype, row.codec, row.ratio(), row.encodeUs,
      row.gbps(row.encodeUs), row.decodeUs, row.gbps(row.decodeUs), row.gbps(row.copyUs),
      exactText(row),
      row.accumulateUs > 0 ? fmt::format("{:.2f}", row.accumulateGbps()) : std::string("-"),
      errorText(row, row.nmse), errorText(row, row.maxRelErr));
  std::fflush(stdout);  // rows appear as they are measured, as in nccl-tests
  rows_.push_back(std::move(row));
}

int Report::failures() const {
  return static_cast<int>(
      std::count_if(rows_.begin(), rows_.end(), [](const Row& r) { return r.exact == false; }));
}

void Report::printSummary() const {
  uint64_t bytes = 0, encoded = 0, wrong = 0;
  double enc = 0, dec = 0, copy = 0;
  for (const auto& r : rows_) {
    bytes += r.bytes;
    encoded += r.encodedBytes;
    wrong += r.wrong;
    enc += r.gbps(r.encodeUs);
    dec += r.gbps(r.decodeUs);
    copy += r.gbps(r.copyUs);
  }
  const double n = rows_.empty() ? 1 : double(rows_.size());
  double logNmse = 0;  // the geometric mean over the rows with an error to report
  int nmseRows = 0;
  for (const auto& r : rows_)
    if (std::isfinite(r.nmse) && r.nmse > 0) logNmse += std::log(r.nmse), ++nmseRows;
  const std::string check =
      !opt_.check  ? "not checked"
      : failures()
          ? fmt::format("FAILED: {} rows not exact, out of bound or with NaN/Inf changed, {} "
                        "wrong elements",
                        failures(), wrong)
      : opt_.lossy() ? fmt::format("all within the codec's check, geo-mean nmse {:.3e}",
                                   nmseRows ? std::exp(logNmse / nmseRows) : 0.0)
                     : "all exact";
  fmt::print(
      "# summary: {} {} {} on {}: {} rows, {}; overall ratio {:.3f}; mean GB/s encode {:.2f}, "
      "decode {:.2f}, {} {:.2f}\n",
      opt_.op, opt_.codec, dtypeName(opt_.dtype), opt_.device == Device::Gpu ? "gpu" : "cpu",
      rows_.size(), check, encoded ? double(bytes) / double(encoded) : 0.0, enc / n, dec / n,
      rows_.empty() ? "copy" : rows_.front().baseline, copy / n);
}

void Report::writeJson(const std::string& path) const {
  // ordered_json keeps the keys in the order written here, which reads better than sorted.
  auto rows = nlohmann::ordered_json::array();
  const auto orNull = [](const auto& v) -> nlohmann::ordered_json {
    if (v) return *v;
    return nullptr;
  };
  for (const auto& r : rows_) {
    nlohmann::ordered_json j;
    j["op"] = r.op;
    j["codec"] = r.codec;
    j["dtype"] = r.dtype;
    j["device"] = r.device;
    j["tensor"] = orNull(r.tensor);
    j["bytes"] = r.bytes;
    j["count"] = r.count;
    j["ratio"] = r.ratio();
    j["encoded_bytes"] = r.encodedBytes;
    j["encode_us"] = r.encodeUs;
    j["decode_us"] = r.decodeUs;
    j["time_us"] = r.encodeUs + r.decodeUs;
    j["encode_GBps"] = r.gbps(r.encodeUs);
    j["decode_GBps"] = r.gbps(r.decodeUs);
    j["copy_GBps"] = r.gbps(r.copyUs);
    if (r.accumulateUs > 0) {
      j["accumulate_us"] = r.accumulateUs;
      j["accumulate_fp32_out_GBps"] = r.accumulateGbps();
    }
    j["baseline"] = r.baseline;
    j["algbw_GBps"] = nullptr;  // collectives only
    j["busbw_GBps"] = nullptr;
    j["speedup"] = nullptr;
    j["exact"] = r.lossy ? nlohmann::ordered_json(nullptr) : orNull(r.exact);
    j["wrong"] = r.exact ? nlohmann::ordered_json(r.wrong) : nullptr;
    j["nmse"] = r.exact && std::isfinite(r.nmse) ? nlohmann::ordered_json(r.nmse) : nullptr;
    j["max_rel_err"] =
        r.exact && std::isfinite(r.maxRelErr) ? nlohmann::ordered_json(r.maxRelErr) : nullptr;
    j["lossy"] = r.lossy;
    j["within_bound"] = r.lossy ? orNull(r.exact) : nlohmann::ordered_json(nullptr);
    j["out_of_bound"] = r.lossy && r.exact ? nlohmann::ordered_json(r.outOfBound) : nullptr;
    j["accumulate_us"] = r.accumulateUs > 0 ? nlohmann::ordered_json(r.accumulateUs) : nullptr;
    j["accumulate_GBps"] =
        r.accumulateUs > 0 ? nlohmann::ordered_json(r.accumulateGbps()) : nullptr;
    j["feedback"] = r.feedback;
    j["nan_inf_changed"] = r.lossy && r.exact ? nlohmann::ordered_json(r.brokenClass) : nullptr;
    if (r.codec == "fp8") {
      j["fp8_format"] = opt_.fp8Format;
      j["fp8_row_elems"] = opt_.fp8RowElems;
      j["fp8_hadamard"] = opt_.fp8Hadamard;
      j["fp8_rotation"] = opt_.fp8Rotation;
      j["fp8_threshold"] = opt_.fp8Threshold;
      j["fp8_candidates"] = opt_.fp8Candidates;
    }
    j["iters"] = opt_.iters;
    j["warmup"] = opt_.warmup;
    j["timing"] = opt_.batch && r.device == "gpu" ? "batch" : "each";
    j["buffer_sets"] = r.bufferSets;
    j["chunk_elems"] = opt_.chunkElems;
    j["bits"] = opt_.bits;
    j["block_elems"] = opt_.blockElems;
    j["rounding"] = opt_.stochastic ? "stochastic" : "nearest";
    if (r.gpuName) j["gpu_name"] = *r.gpuName;
    rows.push_back(std::move(j));
  }
  std::ofstream out(path);
  if (!out) fail("--json {}: cannot open for writing", path);
  out << rows.dump(1) << '\n';
  if (!out) fail("--json {}: write failed", path);
}

}  // namespace perf
