// What a run reports: one Row per size (or tensor), printed as an nccl-tests-like table as it is
// measured, then written as a JSON array (--json) and summed up in one line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data.h"
#include "options.h"

namespace perf {

struct Row {
  std::string op, codec, dtype, device;
  std::string baseline;                // what copy_GBps measured: "memcpy" or "cudaMemcpy D2D"
  std::optional<std::string> tensor;   // --input rows
  std::optional<std::string> gpuName;  // GPU rows
  uint64_t bytes = 0;                  // uncompressed
  uint64_t count = 0;                  // elements
  uint64_t encodedBytes = 0;           // the frame, header included
  double encodeUs = 0, decodeUs = 0, copyUs = 0;  // medians
  double accumulateUs = 0;  // decode-and-accumulate into fp32 (lossy codecs); 0: not measured
  bool feedback = false;    // encodeUs timed the error-feedback encode
  // The check (empty with -c 0): lossless codecs, the round trip is exact; qgrad, every element
  // is within the format's error bound (outOfBound counts those that are not); fp8, no element
  // changed class (brokenClass: a NaN or Inf appeared or vanished).
  std::optional<bool> exact;
  bool lossy = false;
  uint64_t wrong = 0, outOfBound = 0, brokenClass = 0;
  double nmse = 0, maxRelErr = 0;
  int bufferSets = 1;  // input/output copies rotated to defeat the cache

  double ratio() const { return encodedBytes ? double(bytes) / double(encodedBytes) : 0; }
  // GB/s of uncompressed bytes (1 GB = 1e9 bytes), the convention of every bandwidth here.
  double gbps(double us) const { return us > 0 ? double(bytes) / us * 1e-3 : 0; }
  // GB/s of the fp32 accumulator (count * 4 bytes), the output of decode-and-accumulate.
  double accumulateGbps() const {
    return accumulateUs > 0 ? double(count) * 4 / accumulateUs * 1e-3 : 0;
  }
};

class Report {
 public:
  Report(const Options& opt, const Dataset& data);
  // The run's settings (device described by the caller) and the column names.
  void printHeader(const std::string& deviceText, const std::string& dataText) const;
  void add(Row row);  // prints the row
  void printSummary() const;
  void writeJson(const std::string& path) const;
  int failures() const;  // rows whose check failed

 private:
  const Options& opt_;
  size_t nameWidth_ = 0;  // 0: no tensor column
  std::vector<Row> rows_;
};

}  // namespace perf
