// fp8-quality: NMSE and max relative error of the fp8 codec's CPU reference against float64, per
// tensor and per design choice (an ablation), on the real tensors and the stress set.
//
//   fp8-quality [--data DIR] [--json FILE] [--timing]
//
// Each codec row is a real encode + decode (bf16 in, bf16 out) through cclz::fp8::encodeRef /
// decodeRef. The two reference rows (per-tensor E4M3, 1x32 blocks with exact fp32 scales) use
// the codec's own E4M3 rounding (fp8::quantize) in float64 scales, as the data's README does.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "codec/fp8/ref.h"
#include "codec/fp8/shape.h"
#include "common/float_bits.h"
#include "support/stress.h"
#include "support/tensors.h"

namespace {

using cclz::fp8::Params;

struct Tensor {
  std::string name;
  uint64_t cols;
  std::vector<float> x;  // bf16 values, widened
  bool stress;
};

struct Error {
  double nmse = 0, maxRel = 0;
  double bytesPerValue = 0;
  uint32_t rowElems = 0;  // codec rows: the frame's row length (the encoder's choice where auto)
  bool smoothed = false;  // codec rows: the frame was smoothed
};

// NMSE over all elements; max relative error over elements with |x| >= rms (smaller ones are
// measured by the NMSE; their relative error says little).
Error measure(const std::vector<float>& x, const std::vector<double>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (y[i] - x[i]) * (y[i] - x[i]);
    ref += double(x[i]) * x[i];
  }
  const double rms = std::sqrt(ref / double(x.size()));
  Error e;
  e.nmse = err / ref;
  for (size_t i = 0; i < x.size(); ++i)
    if (std::fabs(x[i]) >= rms && x[i] != 0)
      e.maxRel = std::max(e.maxRel, std::fabs(y[i] - x[i]) / std::fabs(x[i]));
  return e;
}

double e4m3Round(double v) {  // E4M3 to nearest even, saturating at 448, via the codec's helper
  return cclz::fp8::codeValue(cclz::fp8::kE4M3, cclz::fp8::quantize(cclz::fp8::kE4M3, float(v)));
}

// Scale in float64, round the scaled value to E4M3 (the scaled value is computed in float64 and
// handed over as fp32, which is exact to far below E4M3's step).
Error blockExact(const Tensor& t, uint64_t block) {
  std::vector<double> y(t.x.size());
  for (uint64_t b = 0; b < t.x.size(); b += block) {
    const uint64_t e = std::min<uint64_t>(t.x.size(), b + block);
    double a = 0;
    for (uint64_t i = b; i < e; ++i) a = std::max(a, std::fabs(double(t.x[i])));
    const double s = a > 0 ? a / 448.0 : 1.0;
    for (uint64_t i = b; i < e; ++i) y[i] = e4m3Round(t.x[i] / s) * s;
  }
  Error err = measure(t.x, y);
  err.bytesPerValue = 1.0 + 4.0 / double(block);
  return err;
}

// rowElems 0: the encoder chooses (Params::shape = kShapeAuto).
Error codec(const Tensor& t, Params p, uint64_t rowElems) {
  p.shape = rowElems ? cclz::fp8::kShapeCaller : cclz::fp8::kShapeAuto;
  p.rowElems = rowElems ? static_cast<uint32_t>(rowElems) : cclz::fp8::kAutoFallbackRowElems;
  std::vector<uint16_t> in(t.x.size()), out(t.x.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = cclz::floatToBf16(t.x[i]);
  std::vector<uint8_t> frame(cclz::fp8::maxEncodedBytes(p, in.size()));
  const uint64_t bytes =
      cclz::fp8::encodeRef(p, cclzBfloat16, in.data(), in.size(), frame.data(), frame.size());
  if (cclz::fp8::decodeRef(frame.data(), bytes, cclzBfloat16, in.size(), out.data()) != 0)
    throw std::runtime_error("decode failed");
  std::vector<double> y(out.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = cclz::bf16ToFloat(out[i]);
  Error e = measure(t.x, y);
  e.bytesPerValue = double(bytes) / double(in.size());
  cclz::FrameHeader h;
  std::memcpy(&h, frame.data(), sizeof h);
  e.rowElems = h.chunkElems;
  e.smoothed = h.params[7] != 0;
  return e;
}

struct Variant {
  std::string key, text;
  std::function<Error(const Tensor&)> run;
};

Params params(uint32_t grid, uint32_t policy, uint32_t candidates, uint32_t smoothing = 0) {
  Params p;
  p.grid = grid;
  p.policy = policy;
  p.candidates = candidates;
  p.smoothing = smoothing;
  return p;
}

// Median of 5 runs of f, in milliseconds.
template <class F>
double medianMs(F f) {
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[2];
}

// The cost of the encoder's decisions next to a whole encode (default E4M3 with the caller's
// rows, and the INT8 option with rows chosen and smoothing), on the CPU reference.
void printTiming(const std::vector<Tensor>& tensors, nlohmann::ordered_json& json) {
  using namespace cclz::fp8;
  fmt::print("\nCPU cost of the decisions (median of 5, ms; sample: the first {} values for the row "
             "length, {} rows for smoothing)\n\n| tensor | values | encode E4M3 (rows given) | "
             "choose row length | choose smoothing | encode INT8 (rows chosen, smoothing) |\n"
             "|---|---|---|---|---|---|\n",
             kShapeSampleElems, kSmoothMinRows);
  for (const Tensor& t : tensors) {
    std::vector<uint16_t> in(t.x.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = cclz::floatToBf16(t.x[i]);
    Params given = params(kE4M3, kRotateNever, 32);
    given.rowElems = static_cast<uint32_t>(t.cols);
    Params chosen = params(kInt8, kRotateAlways, 1, 1);
    chosen.shape = kShapeAuto;
    std::vector<uint8_t> frame(std::max(maxEncodedBytes(given, in.size()),
                                        maxEncodedBytes(chosen, in.size())));
    std::vector<uint8_t> shifts(t.cols);
    volatile uint32_t sink = 0;
    const double encode = medianMs([&] {
      encodeRef(given, cclzBfloat16, in.data(), in.size(), frame.data(), frame.size());
    });
    const double shape = medianMs(
        [&] { sink = chooseRowElemsRef(cclzBfloat16, in.data(), in.size(), 6); });
    const double smooth = medianMs([&] {
      sink = chooseSmoothingRef(cclzBfloat16, in.data(), in.size(), uint32_t(t.cols),
                                shifts.data());
    });
    const double encodeAuto = medianMs([&] {
      encodeRef(chosen, cclzBfloat16, in.data(), in.size(), frame.data(), frame.size());
    });
    (void)sink;
    fmt::print("| {} | {} | {:.2f} | {:.3f} | {:.3f} | {:.2f} |\n", t.name, in.size(), encode,
               shape, smooth, encodeAuto);
    json["timing_ms"][t.name] = {{"encode_e4m3_rows_given", encode},
                                 {"choose_row_length", shape},
                                 {"choose_smoothing", smooth},
                                 {"encode_int8_rows_chosen_smoothing", encodeAuto}};
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cclz::fp8;
  std::string dir = cclz::test::realTensorDir(), jsonPath;
  CLI::App app{"fp8-quality: the fp8 codec's error per tensor and design choice (CPU reference)"};
  app.add_option("--data", dir, "folder of the real tensors (index.json)");
  app.add_option("--json", jsonPath, "write every number as JSON");
  bool timing = false;
  app.add_flag("--timing", timing,
               "also time, per tensor, the encoder's decisions (row length, smoothing) against a "
               "whole encode (CPU reference, median of 5)");
  CLI11_PARSE(app, argc, argv);

  std::vector<Tensor> tensors;
  if (!dir.empty())
    for (auto& r : cclz::test::loadRealTensors(dir)) {
      Tensor t{r.name, r.cols, std::vector<float>(r.values.size()), false};
      for (size_t i = 0; i < t.x.size(); ++i) t.x[i] = cclz::bf16ToFloat(r.values[i]);
      tensors.push_back(std::move(t));
    }
  for (auto& s : cclz::test::makeStressTensors(0))
    tensors.push_back(Tensor{s.name, s.cols, s.values, true});

  const auto whole = [](const Tensor& t) { return uint64_t(t.x.size()); };
  const auto rows = [](const Tensor& t) { return t.cols; };
  const std::vector<Variant> variants = {
      {"cast-e4m3", "plain cast to E4M3, no scale: clips above 448, flushes below 2^-10",
       [](const Tensor& t) {
         std::vector<double> y(t.x.size());
         for (size_t i = 0; i < y.size(); ++i) y[i] = e4m3Round(t.x[i]);
         Error e = measure(t.x, y);
         e.bytesPerValue = 1.0;
         return e;
       }},
      {"pt-e4m3", "per-tensor E4M3, exact fp32 scale (reference)",
       [](const Tensor& t) { return blockExact(t, t.x.size()); }},
      {"b32-exact", "1x32 E4M3, exact fp32 scale per block (the target; 1.125 B/value)",
       [](const Tensor& t) { return blockExact(t, 32); }},
      {"block", "1x64 E4M3, 8-bit fine scale rounded up, one fp32 coarse scale per tensor",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateNever, 1), whole(t)); }},
      {"+rows", "+ reshaping: coarse scale per row of the tensor's hidden dimension",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateNever, 1), rows(t)); }},
      {"+adaptive-had", "+ adaptive Hadamard-64 (threshold 4)",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateAdaptive, 1), rows(t)); }},
      {"+always-had", "+ Hadamard-64 on every row (for comparison)",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateAlways, 1), rows(t)); }},
      {"+dual-search", "+ dual-scale search (32 fine-scale candidates), no rotation: the default",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateNever, 32), rows(t)); }},
      {"search-16", "the default with 16 candidates (half an octave): less encode arithmetic",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateNever, 16), rows(t)); }},
      {"search-8", "the default with 8 candidates",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateNever, 8), rows(t)); }},
      {"+search+adaptive", "+ dual-scale search and adaptive Hadamard-64",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateAdaptive, 32), rows(t)); }},
      {"default-rows", "the default with the default row (1024) instead of the hidden dimension",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateNever, 32), 1024); }},
      {"e5m2", "E5M2 grid, dual-scale search, no rotation",
       [&](const Tensor& t) { return codec(t, params(kE5M2, kRotateNever, 32), rows(t)); }},
      {"int8-had", "INT8 grid after Hadamard-64 on every row, fine scale rounded up",
       [&](const Tensor& t) { return codec(t, params(kInt8, kRotateAlways, 1), rows(t)); }},
      {"int8-adaptive", "INT8 grid, adaptive Hadamard-64 (threshold 4), fine scale rounded up",
       [&](const Tensor& t) { return codec(t, params(kInt8, kRotateAdaptive, 1), rows(t)); }},
      {"int8-had-search", "INT8 grid after Hadamard-64, dual-scale search",
       [&](const Tensor& t) { return codec(t, params(kInt8, kRotateAlways, 32), rows(t)); }},
      // The row length chosen from the data and per-channel smoothing (docs/formats.md, fp8
      // "Why this design").
      {"auto-rows", "the default with the row length chosen from the data (fp8RowElems 0)",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateNever, 32), 0); }},
      {"+smooth", "the default + per-channel smoothing (adaptive), no rotation",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateNever, 32, 1), rows(t)); }},
      {"+search+adaptive+smooth", "search, adaptive Hadamard-64 and adaptive smoothing",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateAdaptive, 32, 1), rows(t)); }},
      {"+always-had+smooth", "search, Hadamard-64 on every row and adaptive smoothing",
       [&](const Tensor& t) { return codec(t, params(kE4M3, kRotateAlways, 32, 1), rows(t)); }},
      {"int8-had+smooth", "INT8 after Hadamard-64 with adaptive smoothing (the INT8 option's default)",
       [&](const Tensor& t) { return codec(t, params(kInt8, kRotateAlways, 1, 1), rows(t)); }},
      {"int8-auto", "the INT8 option with fp8RowElems 0: rows chosen, adaptive smoothing",
       [&](const Tensor& t) { return codec(t, params(kInt8, kRotateAlways, 1, 1), 0); }},
  };

  nlohmann::ordered_json json;
  json["command"] = "fp8-quality";
  json["nmse_definition"] = "sum (y - x)^2 / sum x^2 in float64, x = the bf16 input, y = output";
  json["max_rel_definition"] = "max |y - x| / |x| over elements with |x| >= rms(x)";
  json["variants"] = nlohmann::ordered_json::array();
  for (const auto& v : variants)
    json["variants"].push_back({{"key", v.key}, {"description", v.text}});
  std::vector<std::vector<Error>> results(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    nlohmann::ordered_json row;
    row["tensor"] = tensors[i].name;
    row["cols"] = tensors[i].cols;
    for (const auto& v : variants) {
      results[i].push_back(v.run(tensors[i]));
      const Error& e = results[i].back();
      row[v.key] = {{"nmse", e.nmse}, {"max_rel", e.maxRel}, {"bytes_per_value", e.bytesPerValue}};
      if (e.rowElems) row[v.key]["row_elems"] = e.rowElems, row[v.key]["smoothed"] = e.smoothed;
    }
    json["tensors"].push_back(row);
    fmt::print(stderr, "{} done\n", tensors[i].name);
  }

  // The NMSE table, then the max relative error table, then the geometric means.
  for (int table = 0; table < 2; ++table) {
    fmt::print("\n{}\n\n| tensor |", table == 0 ? "NMSE" : "max relative error (|x| >= rms)");
    for (const auto& v : variants) fmt::print(" {} |", v.key);
    fmt::print("\n|---|");
    for (size_t k = 0; k < variants.size(); ++k) fmt::print("---|");
    fmt::print("\n");
    for (size_t i = 0; i < tensors.size(); ++i) {
      fmt::print("| {} |", tensors[i].name);
      for (const auto& e : results[i]) fmt::print(" {:.2e} |", table == 0 ? e.nmse : e.maxRel);
      fmt::print("\n");
    }
  }
  // What the encoder decided from the data, where it decides: row length (auto) and smoothing.
  fmt::print("\nrow length chosen / smoothed (s) by the encoder\n\n| tensor | hidden |");
  std::vector<size_t> deciding;
  for (size_t k = 0; k < variants.size(); ++k)
    if (variants[k].key.find("auto") != std::string::npos ||
        variants[k].key.find("smooth") != std::string::npos)
      deciding.push_back(k), fmt::print(" {} |", variants[k].key);
  fmt::print("\n|---|---|");
  for (size_t k = 0; k < deciding.size(); ++k) fmt::print("---|");
  for (size_t i = 0; i < tensors.size(); ++i) {
    fmt::print("\n| {} | {} |", tensors[i].name, tensors[i].cols);
    for (size_t k : deciding)
      fmt::print(" {}{} |", results[i][k].rowElems, results[i][k].smoothed ? " s" : "");
  }
  fmt::print("\n");
  fmt::print("\n| summary (real tensors) |");
  for (const auto& v : variants) fmt::print(" {} |", v.key);
  fmt::print("\n|---|");
  for (size_t k = 0; k < variants.size(); ++k) fmt::print("---|");
  nlohmann::ordered_json summary;
  std::vector<double> geo(variants.size(), 0), worst(variants.size(), 0), bytes(variants.size(), 0);
  size_t real = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].stress) continue;
    ++real;
    for (size_t k = 0; k < variants.size(); ++k) {
      geo[k] += std::log(results[i][k].nmse);
      worst[k] = std::max(worst[k], results[i][k].nmse / results[i][2].nmse);  // vs b32-exact
      bytes[k] = std::max(bytes[k], results[i][k].bytesPerValue);
    }
  }
  const auto line = [&](const char* label, auto value) {
    fmt::print("\n| {} |", label);
    for (size_t k = 0; k < variants.size(); ++k) fmt::print(" {} |", value(k));
  };
  if (real) {
    line("geo-mean NMSE", [&](size_t k) { return fmt::format("{:.3e}", std::exp(geo[k] / real)); });
    line("worst NMSE / b32-exact", [&](size_t k) { return fmt::format("{:.2f}", worst[k]); });
    line("wire bytes per value (max)", [&](size_t k) { return fmt::format("{:.4f}", bytes[k]); });
    for (size_t k = 0; k < variants.size(); ++k)
      summary[variants[k].key] = {{"geomean_nmse", std::exp(geo[k] / real)},
                                  {"worst_ratio_to_b32_exact", worst[k]},
                                  {"max_bytes_per_value", bytes[k]}};
    json["summary_real"] = summary;
  }
  fmt::print("\n");
  if (timing) printTiming(tensors, json);
  if (!jsonPath.empty()) std::ofstream(jsonPath) << json.dump(1) << '\n';
  return 0;
}
