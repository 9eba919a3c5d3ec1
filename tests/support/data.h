// Seeded test inputs for the codecs (STYLE.md: seeded data, never zeros). Every generator is a
// pure function of its arguments, so a failing case reproduces from its test name alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cclz/cclz.h"

namespace cclz::test {

// Bytes per element of the float dtypes the lossless codec takes (and of the others, for none).
size_t elementSize(int dtype);
const char* dtypeLabel(int dtype);

enum class DataKind {
  kGauss1,             // N(0, 1)
  kGaussTiny,          // N(0, 1e-5): fp16 subnormals
  kGaussHuge,          // N(0, 1e4)
  kSpecial,            // +-0, +-Inf, NaNs (quiet, signaling, payloads), subnormals, max/min normal,
                       // one element in four, mixed with N(0, 1)
  kRandomBits,         // uniformly random words: incompressible
  kConstant,           // every element the same (non-zero) value: one symbol in every chunk
  kOneSymbolPerChunk,  // each chunk one symbol (a different one per chunk), random raw bits
  kTwoSymbolsPerChunk,  // each chunk exactly two symbols (both present when n >= 2)
  kSkewed,              // symbol counts follow the Fibonacci numbers: optimal Huffman codes are
                        // deeper than 12 bits, so the encoder must limit code lengths
};

const std::vector<DataKind>& allDataKinds();
const char* dataKindLabel(DataKind kind);

// count elements of dtype (bf16, fp16 or fp32; kRandomBits and kConstant take any dtype).
// chunkElems tells the per-chunk kinds where chunks begin.
std::vector<uint8_t> makeData(DataKind kind, int dtype, size_t count, uint32_t chunkElems,
                              uint64_t seed);

// The 8-bit symbol the lossless format codes for a word of dtype (docs/formats.md), and a word
// built from a symbol and the remaining raw bits, derived here from the IEEE layouts rather than
// taken from src/, so that the tests check the codec's element splitting independently.
uint32_t symbolOf(int dtype, uint32_t word);
uint32_t wordFrom(int dtype, uint32_t symbol, uint32_t raw);

// Rounding conversions (round to nearest even), for generating bf16 and fp16 data. The golden
// frames' inputs go through them (lossless_golden_test.cpp pins those inputs by hash).
uint16_t floatToBf16(float f);
// Element i of a bf16, fp16 or fp32 byte array as fp32, decoded here independently of the library.
float elementAsFloat(int dtype, const std::vector<uint8_t>& data, size_t i);
uint16_t floatToHalf(float f);

// A stable seed from a test's coordinates.
uint64_t mixSeed(uint64_t a, uint64_t b = 0, uint64_t c = 0, uint64_t d = 0);

// FNV-1a 64 of a byte range (golden frame hashes).
uint64_t fnv1a64(const void* data, size_t bytes);

// Index of the first differing byte, or SIZE_MAX when the ranges are equal.
size_t firstMismatch(const void* a, const void* b, size_t bytes);

}  // namespace cclz::test
