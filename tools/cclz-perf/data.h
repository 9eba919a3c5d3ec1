// What the benchmark runs on: seeded synthetic tensors (one per size of the sweep) or tensors read
// from files (a raw file, or each entry of an index.json such as ../shared/data/gpt-small-tensors).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "options.h"

namespace perf {

// The dtypes the codecs take. parseDtype accepts bf16|fp16|fp32 and fails on anything else.
cclzDataType_t parseDtype(const std::string& name);
const char* dtypeName(cclzDataType_t dtype);
size_t dtypeSize(cclzDataType_t dtype);

// The bits of the dtype nearest to x, ties to even, with subnormals, overflow to infinity and NaN.
// Written for any IEEE-like format of expBits/manBits, so one routine serves bf16, fp16 and fp32.
uint32_t roundToFormat(double x, int expBits, int manBits);
// The value of one element (little-endian bytes at p).
double elementValue(cclzDataType_t dtype, const uint8_t* p);

struct Input {
  std::string name;                // tensor name; empty for synthetic sizes
  std::span<const uint8_t> bytes;  // count * dtypeSize(dtype) bytes, owned by the Dataset
};

struct Dataset {
  std::vector<Input> inputs;
  std::string description;  // one line for the header: where the data came from
  bool named = false;       // inputs carry tensor names (the table gets a tensor column)
  std::vector<std::vector<uint8_t>> storage;
};

// Synthetic data of the sweep's sizes, or the tensors of --input, as opt.dtype.
Dataset loadDataset(const Options& opt);

}  // namespace perf
