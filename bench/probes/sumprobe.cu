// Times a reduce-scatter's sum over n fp8 frames on one GPU: the n steps of ReduceStep (the first
// from zero into the fp32 accumulator, the plain ones added to it, the last stored as bf16: what
// the fused paths ran per piece) against the one pass (fp8::sumDevice, the fused paths' sum now).
// Both outputs must be the same bytes. Built against one tree's static library:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DCCLZ_HAVE_CUDA -I TREE/include \
//     -I TREE/src sumprobe.cu BUILD/src/libcclz_core.a -lcublasLt -lnccl -o sumprobe
// bf16 frames (E4M3, rows of 1024, Gaussian values, one seed per frame) of 4M and 16M values (the
// block of one rank of a 32 or 128 MiB reduce-scatter at four ranks); each way queued 20 times
// after 5 warm-up calls, the median of 5 rounds. Prints one line per case and, with an argument,
// writes the rows as JSON there.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "codec/device.h"
#include "probe_support.h"

int main(int argc, char** argv) {
  std::string json;  // the rows (writeJsonRows)
  int failures = 0;
  for (size_t count : {size_t{4} << 20, size_t{16} << 20}) {
    cclzCodecConfig_t cfg = CCLZ_CODEC_CONFIG_INITIALIZER;
    cfg.codec = cclzCodecFp8;
    cfg.fp8RowElems = 1024;
    cclzCodec_t codec;
    CZ(cclzCodecCreate(&codec, &cfg));
    size_t capacity = 0, bytes = 0;
    CZ(cclzCodecMaxEncodedSize(codec, count, cclzBfloat16, &capacity));
    cudaStream_t stream;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    void *in, *acc, *outSteps, *outPass, *status;
    CK(cudaMalloc(&in, 2 * count));
    CK(cudaMalloc(&acc, 4 * count));
    CK(cudaMalloc(&outSteps, 2 * count));
    CK(cudaMalloc(&outPass, 2 * count));
    CK(cudaMalloc(&status, sizeof(cclz::DeviceStatus)));
    CK(cudaMemset(status, 0, sizeof(cclz::DeviceStatus)));
    std::vector<uint8_t*> frames(cclz::kMaxSumFrames);
    for (int r = 0; r < cclz::kMaxSumFrames; ++r) {
      const std::vector<uint16_t> x = gaussianBf16(count, 7 + r);
      CK(cudaMemcpy(in, x.data(), 2 * count, cudaMemcpyHostToDevice));
      CK(cudaMalloc(&frames[r], capacity));
      CZ(cclzEncode(codec, in, count, cclzBfloat16, frames[r], capacity, nullptr,
                    reinterpret_cast<cclzStream_t>(stream)));
      CZ(cclzCodecSynchronize(codec, &bytes));
    }
    auto* st = static_cast<cclz::DeviceStatus*>(status);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int n : {2, 4, 8}) {
      const float divisor = 1.0f;
      const float stepsUs = medianUs(stream, e0, e1, [&] {
        for (int r = 0; r < n; ++r) {
          const cclz::ReduceStep step{static_cast<float*>(acc), r == 0,
                                      r == n - 1 ? outSteps : nullptr, divisor};
          cclz::fp8::decodeDevice(frames[r], bytes, cclzBfloat16, count, nullptr, &step, st,
                                  stream);
        }
      });
      cclz::FrameSum sum;
      for (int r = 0; r < n; ++r) sum.frames[r] = frames[r];
      sum.n = n, sum.frameBytes = bytes, sum.store = outPass, sum.divisor = divisor;
      const float passUs = medianUs(
          stream, e0, e1, [&] { cclz::fp8::sumDevice(sum, cclzBfloat16, count, st, stream); });
      std::vector<uint16_t> a(count), b(count);
      CK(cudaMemcpy(a.data(), outSteps, 2 * count, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(b.data(), outPass, 2 * count, cudaMemcpyDeviceToHost));
      const bool same = std::memcmp(a.data(), b.data(), 2 * count) == 0;
      failures += !same;
      // Bytes a value moves: the steps read n codes, write and read the fp32 accumulator n - 1
      // times and store 2; the pass reads n codes and stores 2.
      const double passTraffic = double(n + 2) * count / passUs / 1e6;
      std::printf("%3zuM values  %d frames  steps %8.2f us  one pass %8.2f us  %5.2fx  "
                  "pass traffic %5.2f TB/s  %s\n",
                  count >> 20, n, stepsUs, passUs, stepsUs / passUs, passTraffic,
                  same ? "same bytes" : "DIFFERENT BYTES");
      char row[256];
      std::snprintf(row, sizeof row,
                    "  {\"values\": %zu, \"frames\": %d, \"steps_us\": %.2f, \"one_pass_us\": "
                    "%.2f, \"speedup\": %.3f, \"same_bytes\": %s},\n",
                    count, n, stepsUs, passUs, stepsUs / passUs, same ? "true" : "false");
      json += row;
    }
    cclz::DeviceStatus after;
    CK(cudaMemcpy(&after, status, sizeof after, cudaMemcpyDeviceToHost));
    std::printf("decode errors: %u\n", after.decodeError);
    failures += after.decodeError != 0;
    for (uint8_t* f : frames) cudaFree(f);
    cudaFree(in), cudaFree(acc), cudaFree(outSteps), cudaFree(outPass), cudaFree(status);
    cclzCodecDestroy(codec);
    cudaStreamDestroy(stream);
  }
  if (!writeJsonRows(json, argc > 1 ? argv[1] : nullptr)) return 1;
  return failures ? 1 : 0;
}
