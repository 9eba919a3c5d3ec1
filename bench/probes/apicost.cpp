// Host cost per call of cclz's device codec calls against cudaMemcpyAsync, and the GPU time per
// call when N calls are queued back to back (one event pair around all of them). If the GPU time
// per call equals the host time per call, the benchmark at that size measures the host.
#include <cclz/cclz.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define CK(x) do { auto e_ = (x); if (e_ != 0) { std::printf("fail %s: %d\n", #x, (int)e_); std::exit(1);} } while (0)

static void measure(const char* name, cudaStream_t s, const std::function<void()>& call) {
  const int n = 2000;
  for (int i = 0; i < 50; ++i) call();
  CK(cudaStreamSynchronize(s));
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  CK(cudaEventRecord(a, s));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) call();
  auto t1 = std::chrono::steady_clock::now();
  CK(cudaEventRecord(b, s));
  CK(cudaStreamSynchronize(s));
  float ms = 0; CK(cudaEventElapsedTime(&ms, a, b));
  double host = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  std::printf("%-44s host %7.2f us/call  gpu %7.2f us/call\n", name, host, 1e3 * ms / n);
}

int main() {
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (size_t bytes : {size_t(1) << 20, size_t(4) << 20}) {
    const size_t count = bytes / 2;
    void *in, *out, *frame;
    CK(cudaMalloc(&in, bytes)); CK(cudaMalloc(&out, bytes)); CK(cudaMalloc(&frame, 2 * bytes + 65536));
    std::vector<uint16_t> h(count);
    unsigned x = 1;
    for (auto& v : h) { x = x * 1103515245u + 12345u; v = 0x3c00 + ((x >> 8) & 0x3ff) + ((x >> 20) & 1) * 0x8000 - ((x >> 21) & 3) * 0x80; }
    CK(cudaMemcpy(in, h.data(), bytes, cudaMemcpyHostToDevice));
    char label[96];
    std::snprintf(label, sizeof label, "cudaMemcpyAsync D2D %zu KiB", bytes >> 10);
    measure(label, s, [&] { CK(cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, s)); });
    for (int codecType : {1, 2}) {
      for (int chunk : {0, 1024}) {
        if (codecType == 2 && chunk) continue;
        cclzCodecConfig_t cfg = CCLZ_CODEC_CONFIG_INITIALIZER;
        cfg.codec = static_cast<cclzCodecType_t>(codecType);
        if (codecType == 1) cfg.chunkElems = chunk;
        if (codecType == 2) cfg.fp8RowElems = 1024;
        cclzCodec_t c; CK(cclzCodecCreate(&c, &cfg));
        size_t cap = 0; CK(cclzCodecMaxEncodedSize(c, count, cclzBfloat16, &cap));
        CK(cclzEncode(c, in, count, cclzBfloat16, frame, cap, nullptr, s));
        size_t enc = 0; CK(cclzCodecSynchronize(c, &enc));
        const char* nm = codecType == 1 ? "lossless" : "fp8 rows1024";
        std::snprintf(label, sizeof label, "%s chunk %d encode %zu KiB", nm, chunk, bytes >> 10);
        measure(label, s, [&] { CK(cclzEncode(c, in, count, cclzBfloat16, frame, cap, nullptr, s)); });
        std::snprintf(label, sizeof label, "%s chunk %d decode %zu KiB", nm, chunk, bytes >> 10);
        measure(label, s, [&] { CK(cclzDecode(c, frame, enc, out, count, cclzBfloat16, s)); });
        CK(cclzCodecSynchronize(c, nullptr));
        CK(cclzCodecDestroy(c));
      }
    }
    CK(cudaFree(in)); CK(cudaFree(out)); CK(cudaFree(frame));
  }
  return 0;
}
