// What the overlapped GEMMs' own GEMMs cost on one GPU, with no communication (issue 37's overlap
// efficiency, docs/overlap.md): at the overlap benchmark's per-rank shapes (Llama-3-70B and
// GPT-3-175B at TP 2 and 4, 4096 and 16384 tokens; the all-gather's GEMM, the gathered sequence
// times a weight shard, and the reduce-scatter's, the hidden activations times theirs), bf16:
//   best     the fastest of cuBLASLt's first four algorithms for the whole product, split-K
//            allowed (DeviceGemm(0, false): the serial form's GEMM, as good as torch's);
//   alike    the overlapped schedule's plan: the first algorithm that splits nothing along k,
//            chosen at the first GEMM (a chunk of m / tp rows, as the schedule's first) and kept
//            for every row count, on all but 16 multiprocessors (CCLZ_OVERLAP_COMM_SMS's
//            default) and on all of them (the copy-engine path's); and on all of them with the
//            algorithm chosen at the whole product's rows instead (`at whole`);
// each as one GEMM of the whole product and as tp row chunks one after another (what the
// schedule computes). An overlapped call cannot beat its chunks' GEMMs: their time over `best`
// bounds the efficiency it can reach. Built against one tree's static library:
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DCCLZ_HAVE_CUDA -I TREE/include \
//     -I TREE/src gemmprobe.cu BUILD/src/libcclz_core.a -lcublasLt -lnccl -o gemmprobe
// Each way queued 20 times after 5 warm-up calls, the median of 5 rounds. Prints one line per
// shape and, with an argument, writes the rows as JSON there.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "overlap/device_gemm.h"
#include "probe_support.h"

namespace {

using cclz::overlap::DeviceGemm;
using cclz::overlap::GemmArgs;

// C (m x n) = A (m x k) B^T, B n x k, row-major bf16, rows [row0, row0 + m) of A and C.
GemmArgs rowsOf(void* a, void* b, void* c, uint64_t row0, uint64_t m, uint64_t n, uint64_t k) {
  GemmArgs g;
  g.a = static_cast<uint16_t*>(a) + row0 * k;
  g.b = b;
  g.c = static_cast<uint16_t*>(c) + row0 * n;
  g.m = m, g.n = n, g.k = k;
  g.transB = true;
  g.dtype = cclzBfloat16;
  g.lda = k, g.ldb = k, g.ldc = n;
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  struct Model {
    const char* name;
    uint64_t hidden, ffn;
  };
  const Model models[] = {{"llama3-70b", 8192, 28672}, {"gpt3-175b", 12288, 49152}};
  cudaStream_t stream;
  CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  std::string json;  // the rows (writeJsonRows)
  std::printf(
      "%-10s %-7s %2s %5s %5s x %5s x %5s  %9s %6s  %s\n", "model", "gemm", "tp", "tok", "m", "n",
      "k", "best ms", "TF/s",
      "x best: alike-116 whole, chunks | alike-132 whole, chunks | at whole: whole, chunks");
  for (const Model& model : models)
    for (uint64_t tp : {2, 4})
      for (uint64_t tokens : {4096, 16384})
        for (int rs = 0; rs < 2; ++rs) {
          const uint64_t k = rs ? model.ffn / tp : model.hidden;
          const uint64_t n = rs ? model.hidden : model.ffn / tp;
          const uint64_t m = tokens, chunk = m / tp;
          void *a, *b, *c;
          CK(cudaMalloc(&a, 2 * m * k));
          CK(cudaMalloc(&b, 2 * n * k));
          CK(cudaMalloc(&c, 2 * m * n));
          CK(cudaMemset(a, 0x3c, 2 * m * k));  // bf16 0.0115: any finite values will do
          CK(cudaMemset(b, 0x3c, 2 * n * k));
          DeviceGemm best(0, false), alike116(16), alike132(0), atWhole(0);
          const float bestMs =
              medianUs(stream, e0, e1, [&] { best.run(rowsOf(a, b, c, 0, m, n, k), stream); }) /
              1000.0f;
          float ratio[6];
          int at = 0;
          for (DeviceGemm* g : {&alike116, &alike132, &atWhole}) {
            // The plan: at a chunk's rows (the schedule's first GEMM), or at the whole product's.
            g->run(rowsOf(a, b, c, 0, g == &atWhole ? m : chunk, n, k), stream);
            const float whole =
                medianUs(stream, e0, e1, [&] { g->run(rowsOf(a, b, c, 0, m, n, k), stream); });
            const float chunks = medianUs(stream, e0, e1, [&] {
              for (uint64_t r = 0; r < tp; ++r)
                g->run(rowsOf(a, b, c, r * chunk, chunk, n, k), stream);
            });
            ratio[at++] = whole / 1000.0f / bestMs;
            ratio[at++] = chunks / 1000.0f / bestMs;
          }
          CK(cudaStreamSynchronize(stream));
          CK(cudaGetLastError());
          const double tflops = 2.0 * m * n * k / bestMs / 1e9;
          const char* gemm = rs ? "gemm_rs" : "ag_gemm";
          std::printf(
              "%-10s %-7s %2lu %5lu %5lu x %5lu x %5lu  %9.3f %6.0f  %.3f %.3f | %.3f %.3f | %.3f "
              "%.3f\n",
              model.name, gemm, tp, tokens, m, n, k, bestMs, tflops, ratio[0], ratio[1], ratio[2],
              ratio[3], ratio[4], ratio[5]);
          char row[512];
          std::snprintf(row, sizeof row,
                        "  {\"model\": \"%s\", \"gemm\": \"%s\", \"tp\": %lu, \"tokens\": %lu, "
                        "\"m\": %lu, \"n\": %lu, \"k\": %lu, \"best_ms\": %.4f, \"best_tflops\": "
                        "%.1f, \"alike116_whole_x\": %.4f, \"alike116_chunks_x\": %.4f, "
                        "\"alike132_whole_x\": %.4f, \"alike132_chunks_x\": %.4f, "
                        "\"at_whole_whole_x\": %.4f, \"at_whole_chunks_x\": %.4f},\n",
                        model.name, gemm, tp, tokens, m, n, k, bestMs, tflops, ratio[0],
                        ratio[1], ratio[2], ratio[3], ratio[4], ratio[5]);
          json += row;
          cudaFree(a), cudaFree(b), cudaFree(c);
        }
  if (!writeJsonRows(json, argc > 1 ? argv[1] : nullptr)) return 1;
  return 0;
}
