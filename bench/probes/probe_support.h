// What the .cu probes share: the checks of a CUDA call (CK) and a cclz call (CZ), which on
// failure print the call and the error and return 1 from the enclosing function (main); their
// timing of queued calls (medianUs); Gaussian bf16 data; and the JSON file of their rows.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cclz/cclz.h"

#define CK(x)                                              \
  do {                                                     \
    cudaError_t e_ = (x);                                  \
    if (e_ != cudaSuccess) {                               \
      std::printf("%s: %s\n", #x, cudaGetErrorString(e_)); \
      return 1;                                            \
    }                                                      \
  } while (0)
#define CZ(x)                                                 \
  do {                                                        \
    if ((x) != cclzSuccess) {                                 \
      std::printf("%s: %s\n", #x, cclzGetLastError(nullptr)); \
      return 1;                                               \
    }                                                         \
  } while (0)

// The median of 5 rounds of 20 calls queued back to back on `stream`, after 5 warm-up calls, in
// microseconds a call.
template <typename Call>
float medianUs(cudaStream_t stream, cudaEvent_t e0, cudaEvent_t e1, Call call) {
  for (int w = 0; w < 5; ++w) call();
  std::vector<float> rounds;
  for (int round = 0; round < 5; ++round) {
    cudaEventRecord(e0, stream);
    for (int k = 0; k < 20; ++k) call();
    cudaEventRecord(e1, stream);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    rounds.push_back(ms * 1000.0f / 20);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[2];
}

// count standard normal values as bf16, by truncation of fp32 (any bf16 values will do), from
// a generator seeded with `seed`.
inline std::vector<uint16_t> gaussianBf16(size_t count, uint32_t seed) {
  std::vector<uint16_t> x(count);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (auto& v : x) {
    const float f = normal(rng);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    v = static_cast<uint16_t>(bits >> 16);
  }
  return x;
}

// rows: JSON objects, each "  {...},\n". Closed into an array (the last comma dropped) and written
// to `path` where there is one. False if the file could not be written.
inline bool writeJsonRows(std::string rows, const char* path) {
  if (!path) return true;
  if (!rows.empty()) rows.erase(rows.size() - 2, 1);
  rows = "[\n" + rows + "]\n";
  FILE* f = std::fopen(path, "w");
  if (!f) return false;
  std::fputs(rows.c_str(), f);
  return std::fclose(f) == 0;
}
