// The real bf16 tensors of ../shared/data/gpt-small-tensors (index.json: name, file, offset,
// nbytes, shape, dtype). The folder comes from $CCLZ_SHARED_DATA, else from the CMake cache
// variable CCLZ_SHARED_DATA; tests skip when it is absent.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cclz::test {

struct RealTensor {
  std::string name;
  std::vector<uint16_t> values;  // bf16 words
  uint64_t cols = 0;             // the last dimension of its shape (row length)
};

// The folder to read, or "" when neither place has an index.json.
std::string realTensorDir();

// Every tensor listed in index.json (throws std::runtime_error on a malformed index or file).
std::vector<RealTensor> loadRealTensors(const std::string& dir);

// A tensor's bf16 words as the bytes a codec call takes.
std::vector<uint8_t> bf16Bytes(const RealTensor& t);

// Empirical entropy, in bits, of the 8-bit exponent field of bf16 words.
double exponentEntropy(const std::vector<uint16_t>& values);

}  // namespace cclz::test
