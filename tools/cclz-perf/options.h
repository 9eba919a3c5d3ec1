// The flags of cclz-perf, parsed once in main.cpp and read by the ops. Names follow nccl-tests
// (-b -e -f -n -w -c -d) so that users of those tests know them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cclz/cclz.h"

namespace perf {

enum class Device { Cpu, Gpu };
enum class DataKind { Gaussian, UniformBits };

// --batch: rounds of -n calls back to back; the median round is reported.
constexpr int kBatchRounds = 5;

struct Options {
  std::string op = "codec";
  std::string codec = "lossless";  // lossless | none | fp8 | qgrad
  cclzDataType_t dtype = cclzBfloat16;
  Device device = Device::Cpu;  // resolved in main: gpu when built with CUDA and a GPU is present

  // The size sweep, in bytes (rounded down to whole elements): minBytes, minBytes*stepFactor, ...
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  size_t stepFactor = 2;
  int iters = 20;
  int warmup = 5;
  bool check = true;
  // Collectives: time -n calls queued back to back with one sync at the end (nccl-tests' way,
  // and a training step's), instead of each call between barriers.
  bool batch = false;

  // Synthetic data, used when there is no --input.
  DataKind data = DataKind::Gaussian;
  uint64_t seed = 0;
  std::string input;  // a raw tensor file or an index.json; empty = synthetic

  // cclzCodecConfig_t fields; 0 keeps the library's default.
  int chunkElems = 0;
  int bits = 0;        // qgrad
  int blockElems = 0;  // qgrad
  bool stochastic = false;
  uint64_t roundingSeed = 0;
  bool feedback = true;  // qgrad: time the error-feedback encode (cclzEncodeFeedback[Host])

  // fp8 (cclzCodecConfig_t.fp8*): grid, row length, Hadamard size, rotation, threshold,
  // fine-scale candidates; 0 / "default" keeps the library's default.
  std::string fp8Format = "default";  // default | e4m3 | e5m2 | int8
  int fp8RowElems = 0;
  int fp8Hadamard = 0;
  std::string fp8Rotation = "default";  // default | never | always | adaptive
  int fp8Threshold = 0;
  int fp8Candidates = 0;

  bool lossy() const { return codec == "fp8" || codec == "qgrad"; }

  // Collectives (op_collective.cpp).
  std::string redOp = "sum";  // sum | avg
  uint64_t pieceBytes = 0;    // CCLZ_PIECE_BYTES for the run; 0: the library's choice per call
  // cclzCommConfig_t.adaptive: 1 on, 0 off, CCLZ_ADAPTIVE_DEFAULT the library's default.
  int adaptive = CCLZ_ADAPTIVE_DEFAULT;
  // CCLZ_FUSED for the device communicator, "" (off), "1" (frames stored by a kernel) or "ce"
  // (frames copied by the copy engines): the fp8 all-gather and reduce-scatter take a fused
  // NVLink path (docs/collectives.md, "Fused NVLink paths") in cclz's column; the baseline stays
  // plain NCCL.
  std::string fused;

  // The overlapped GEMMs (op_overlap.cpp): the product's columns and inner size per rank; 0: the
  // op's Llama-3-70B MLP shape at TP4.
  uint64_t gemmN = 0, gemmK = 0;

  std::string json;  // --json FILE; empty = none
};

// The cclzCodecConfig_t of --codec and the codec flags (op_codec.cpp).
cclzCodecConfig_t codecConfig(const Options& opt);

}  // namespace perf
