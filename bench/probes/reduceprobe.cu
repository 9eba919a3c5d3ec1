// Times the fp8 decoder's fused steps of a reduce-scatter's sum (ReduceStep, src/codec/device.h)
// on one GPU, beside the plain decode-and-accumulate: no cclz-perf op reaches them apart from the
// collective, which needs 2 GPUs. Built against one tree's static library, so that two trees can
// be run side by side:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DCCLZ_HAVE_CUDA -I TREE/include \
//     -I TREE/src reduceprobe.cu BUILD/src/libcclz_core.a -lcublasLt -lnccl -o reduceprobe
// One bf16 frame (E4M3, rows of 1024, Gaussian values) of 64 and 256 MiB; each step queued 20
// times after 5 warm-up calls (the median of 5 rounds). GB/s: of the fp32 accumulator (4 bytes a
// value), as cclz-perf's acc column; traffic: bytes a value each step moves (codes 1, accumulator
// read 4 and written 4, bf16 stored 2).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cclz/cclz.h"
#include "codec/device.h"
#include "probe_support.h"

int main() {
  for (size_t mib : {size_t{64}, size_t{256}}) {
    const size_t count = (mib << 20) / 2;
    const std::vector<uint16_t> x = gaussianBf16(count, 7);
    cclzCodecConfig_t cfg = CCLZ_CODEC_CONFIG_INITIALIZER;
    cfg.codec = cclzCodecFp8;
    cfg.fp8RowElems = 1024;
    cclzCodec_t codec;
    CZ(cclzCodecCreate(&codec, &cfg));
    size_t capacity = 0, bytes = 0;
    CZ(cclzCodecMaxEncodedSize(codec, count, cclzBfloat16, &capacity));
    void *in, *frame, *acc, *out, *status;
    CK(cudaMalloc(&in, 2 * count));
    CK(cudaMalloc(&frame, capacity));
    CK(cudaMalloc(&acc, 4 * count));
    CK(cudaMalloc(&out, 2 * count));
    CK(cudaMalloc(&status, sizeof(cclz::DeviceStatus)));
    CK(cudaMemset(status, 0, sizeof(cclz::DeviceStatus)));
    CK(cudaMemset(acc, 0, 4 * count));
    CK(cudaMemcpy(in, x.data(), 2 * count, cudaMemcpyHostToDevice));
    cudaStream_t stream;
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CZ(cclzEncode(codec, in, count, cclzBfloat16, frame, capacity, nullptr,
                  reinterpret_cast<cclzStream_t>(stream)));
    CZ(cclzCodecSynchronize(codec, &bytes));
    struct Step {
      const char* name;
      cclz::ReduceStep step;
      int trafficPerValue;
    };
    float* a = static_cast<float*>(acc);
    const Step steps[] = {{"accumulate", {a, false, nullptr, 1.0f}, 9},
                          {"first", {a, true, nullptr, 1.0f}, 5},
                          {"last", {a, false, out, 2.0f}, 7},
                          {"first+last", {a, true, out, 2.0f}, 3}};
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (const Step& s : steps) {
      const auto call = [&] {
        cclz::fp8::decodeDevice(static_cast<const uint8_t*>(frame), bytes, cclzBfloat16, count,
                                nullptr, &s.step, static_cast<cclz::DeviceStatus*>(status),
                                stream);
      };
      for (int w = 0; w < 5; ++w) call();
      std::vector<float> rounds;
      for (int round = 0; round < 5; ++round) {
        CK(cudaEventRecord(e0, stream));
        for (int k = 0; k < 20; ++k) call();
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        rounds.push_back(ms * 1000.0f / 20);
      }
      std::sort(rounds.begin(), rounds.end());
      const double us = rounds[2];
      std::printf("%-10s %4zu MiB bf16  %8.2f us  acc %8.1f GB/s  traffic %5.2f TB/s\n", s.name,
                  mib, us, 4.0 * count / us / 1e3, double(s.trafficPerValue) * count / us / 1e6);
    }
    cclz::DeviceStatus st;
    CK(cudaMemcpy(&st, status, sizeof st, cudaMemcpyDeviceToHost));
    std::printf("decode errors: %u\n", st.decodeError);
    cudaFree(in), cudaFree(frame), cudaFree(acc), cudaFree(out), cudaFree(status);
    cclzCodecDestroy(codec);
    cudaStreamDestroy(stream);
  }
  return 0;
}
