// Times a reduce-scatter's encode of one piece on one GPU: the n destinations' blocks encoded one
// after another (Codec::encodeDevice n times: what the fused paths ran) against one batch
// (Codec::encodeBatchDevice: each of the fp8 encode's kernels launched once for all n frames).
// Every frame must be the same bytes both ways. Built against one tree's static library:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DCCLZ_HAVE_CUDA -I TREE/include \
//     -I TREE/src batchprobe.cu BUILD/src/libcclz_core.a -lcublasLt -lnccl -o batchprobe
// bf16 blocks of 4M, 8M and 16M values (8, 16 and 32 MiB; 16 MiB is one destination's block of
// a 64 MiB reduce-scatter at 4 ranks, 32 MiB at 2 ranks), each with channels of its own
// period, for 2, 4 and 8 destinations; the fp8 default (E4M3, the row length chosen from the
// data) and rows of 1024 (nothing sampled). Each way queued 20 times after 5 warm-up
// calls, the median of 5 rounds. Prints one line per case and, with an argument, writes the rows
// as JSON there.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "codec/codec.h"
#include "codec/device.h"
#include "probe_support.h"

namespace {

// bf16 values with channel structure of period `period` (channel c scaled by 2^(c % 7 - 3)),
// from a splitmix64 stream: cheap enough for 128M values on the host.
std::vector<uint16_t> channelBlock(size_t count, size_t period, uint64_t seed) {
  std::vector<uint16_t> out(count);
  uint64_t state = seed;
  for (size_t i = 0; i < count; ++i) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    // A sum of four uniforms, centered: near-Gaussian, enough for the encoder's choices.
    float u = 0;
    for (int k = 0; k < 4; ++k) u += static_cast<float>((z >> (16 * k)) & 0xFFFF) / 65536.0f;
    const float v = (u - 2.0f) * static_cast<float>(1 << ((i % period) % 7)) / 8.0f;
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    out[i] = static_cast<uint16_t>(bits >> 16);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string json;  // the rows (writeJsonRows)
  int failures = 0;
  const cclz::Codec& codec = cclz::fp8Codec();
  const size_t periods[] = {768, 512, 1536, 4096, 640, 2304, 1024, 3072};
  constexpr int kMost = cclz::kMaxBatchFrames;
  const size_t largest = size_t{16} << 20;
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  uint8_t* in = nullptr;
  CK(cudaMalloc(&in, 2 * largest * kMost));
  for (int f = 0; f < kMost; ++f) {
    const std::vector<uint16_t> block = channelBlock(largest, periods[f], 11 + f);
    CK(cudaMemcpy(in + 2 * largest * f, block.data(), 2 * largest, cudaMemcpyHostToDevice));
  }
  void* status = nullptr;
  CK(cudaMalloc(&status, sizeof(cclz::DeviceStatus)));
  CK(cudaMemset(status, 0, sizeof(cclz::DeviceStatus)));
  for (int rows : {0, 1024}) {
    cclzCodecConfig_t config = CCLZ_CODEC_CONFIG_INITIALIZER;
    config.codec = cclzCodecFp8;
    config.fp8RowElems = rows;
    for (size_t count : {size_t{4} << 20, size_t{8} << 20, largest}) {
      const uint64_t capacity = codec.maxEncodedBytes(config, cclzBfloat16, count);
      const uint64_t scratchBytes =
          std::max<uint64_t>(16, codec.encodeBatchScratchBytes(config, cclzBfloat16, count, kMost));
      uint8_t *apart = nullptr, *batched = nullptr, *scratch = nullptr;
      CK(cudaMalloc(&apart, capacity * kMost));
      CK(cudaMalloc(&batched, capacity * kMost));
      CK(cudaMalloc(&scratch, scratchBytes));
      const cclz::DeviceWorkspace ws{static_cast<cclz::DeviceStatus*>(status), scratch,
                                     scratchBytes};
      for (int n : {2, 4, 8}) {
        cclz::FrameBatch batch;
        batch.n = n;
        for (int f = 0; f < n; ++f) {
          batch.src[f] = in + 2 * count * f;  // the blocks of one tensor, as a reduce-scatter's
          batch.dst[f] = batched + capacity * f;
        }
        CK(cudaMemset(apart, 0, capacity * n));
        CK(cudaMemset(batched, 0xA5, capacity * n));
        const float apartUs = medianUs(stream, e0, e1, [&] {
          for (int f = 0; f < n; ++f)
            codec.encodeDevice(config, cclzBfloat16, batch.src[f], count, apart + capacity * f,
                               nullptr, ws, stream);
        });
        const float batchUs = medianUs(stream, e0, e1, [&] {
          codec.encodeBatchDevice(config, cclzBfloat16, batch, count, ws, stream);
        });
        CK(cudaStreamSynchronize(stream));
        std::vector<uint8_t> a(capacity * n), b(capacity * n);
        CK(cudaMemcpy(a.data(), apart, a.size(), cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(b.data(), batched, b.size(), cudaMemcpyDeviceToHost));
        const bool same = a == b;
        failures += !same;
        const double inputGBs = 2.0 * count * n / batchUs / 1e3;
        std::printf(
            "rows %-4s %3zuM values  %d frames  one by one %8.2f us  batch %8.2f us  "
            "%5.2fx  batch reads %6.1f GB/s  %s\n",
            rows ? "1024" : "auto", count >> 20, n, apartUs, batchUs, apartUs / batchUs, inputGBs,
            same ? "same bytes" : "DIFFERENT BYTES");
        char row[320];
        std::snprintf(row, sizeof row,
                      "  {\"rows\": %d, \"values\": %zu, \"frames\": %d, \"one_by_one_us\": %.2f, "
                      "\"batch_us\": %.2f, \"speedup\": %.3f, \"same_bytes\": %s},\n",
                      rows, count, n, apartUs, batchUs, apartUs / batchUs, same ? "true" : "false");
        json += row;
      }
      cudaFree(apart), cudaFree(batched), cudaFree(scratch);
    }
  }
  cudaFree(in), cudaFree(status);
  cudaStreamDestroy(stream);
  if (!writeJsonRows(json, argc > 1 ? argv[1] : nullptr)) return 1;
  return failures ? 1 : 0;
}
