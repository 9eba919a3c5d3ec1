// Diagnostic (not part of cclz): what a small control exchange before each NCCL collective costs.
// 2+ ranks under mpirun, one GPU each. Prints, per variant, the median host time of the whole
// call, of the control phase, and the GPU time of the data collective (events on its stream).
#include <mpi.h>
#include <nccl.h>
#include <cuda_runtime.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#define CK(x) do { auto e_ = (x); if (e_ != cudaSuccess) { std::printf("cuda %s line %d\n", cudaGetErrorString(e_), __LINE__); std::exit(1);} } while (0)
#define NK(x) do { auto e_ = (x); if (e_ != ncclSuccess) { std::printf("nccl %s line %d\n", ncclGetErrorString(e_), __LINE__); std::exit(1);} } while (0)
using clk = std::chrono::steady_clock;
static double us(clk::time_point a, clk::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }
static double median(std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
static double maxAll(double x) { double m; MPI_Allreduce(&x, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD); return m; }

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank, n; MPI_Comm_rank(MPI_COMM_WORLD, &rank); MPI_Comm_size(MPI_COMM_WORLD, &n);
  int ndev; CK(cudaGetDeviceCount(&ndev)); CK(cudaSetDevice(rank % ndev));
  ncclUniqueId id; if (rank == 0) NK(ncclGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  ncclComm_t data, ctrl, other; NK(ncclCommInitRank(&data, n, id, rank));
  NK(ncclCommSplit(data, 0, rank, &ctrl, nullptr));
  ncclUniqueId id2; if (rank == 0) NK(ncclGetUniqueId(&id2));
  MPI_Bcast(&id2, sizeof id2, MPI_BYTE, 0, MPI_COMM_WORLD);
  NK(ncclCommInitRank(&other, n, id2, rank));  // an independent second communicator
  cudaStream_t user, cs; CK(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  const size_t maxBytes = 256u << 20;
  void *send, *recv, *cw; CK(cudaMalloc(&send, maxBytes)); CK(cudaMalloc(&recv, maxBytes * n));
  CK(cudaMalloc(&cw, 64 * (n + 1))); CK(cudaMemset(send, 0, maxBytes));
  unsigned char* host; CK(cudaMallocHost((void**)&host, 64 * (n + 1)));
  const char* names[] = {"none", "split+copies", "split, no copies", "data comm+copies",
                         "other comm+copies", "mpi host", "split+copies, then data on ctrl"};
  const int iters = 30;
  for (size_t bytes : {size_t(64) << 10, size_t(1) << 20, size_t(16) << 20, size_t(256) << 20}) {
    for (int op = 0; op < 2; ++op) {
      for (int v = 0; v < 7; ++v) {
        std::vector<double> total, control, gpu;
        for (int it = 0; it < iters + 3; ++it) {
          MPI_Barrier(MPI_COMM_WORLD);
          auto t0 = clk::now();
          ncclComm_t cc = v == 3 ? data : v == 4 ? other : ctrl;
          if (v == 1 || v == 3 || v == 4 || v == 6) {
            CK(cudaMemcpyAsync((char*)cw + 64 * n, host + 64 * n, 64, cudaMemcpyHostToDevice, cs));
            NK(ncclAllGather((char*)cw + 64 * n, cw, 64, ncclUint8, cc, cs));
            CK(cudaMemcpyAsync(host, cw, 64 * n, cudaMemcpyDeviceToHost, cs));
            CK(cudaStreamSynchronize(cs));
          } else if (v == 2) {
            NK(ncclAllGather((char*)cw + 64 * n, cw, 64, ncclUint8, ctrl, cs));
            CK(cudaStreamSynchronize(cs));
          } else if (v == 5) {
            unsigned char mine[64] = {}, all[64 * 8];
            MPI_Allgather(mine, 64, MPI_BYTE, all, 64, MPI_BYTE, MPI_COMM_WORLD);
          }
          auto t1 = clk::now();
          ncclComm_t dc = v == 6 ? ctrl : data;
          CK(cudaEventRecord(e0, user));
          if (op == 0) NK(ncclAllGather(send, recv, bytes, ncclUint8, dc, user));
          else NK(ncclAllReduce(send, recv, bytes / 2, ncclBfloat16, ncclSum, dc, user));
          CK(cudaEventRecord(e1, user));
          CK(cudaStreamSynchronize(user));
          auto t2 = clk::now();
          float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
          if (it < 3) continue;
          total.push_back(maxAll(us(t0, t2))); control.push_back(maxAll(us(t0, t1)));
          gpu.push_back(maxAll(ms * 1000.0));
        }
        if (rank == 0)
          std::printf("%-10s %9zu  %-32s total %8.1f  control %7.1f  data gpu %8.1f us\n",
                      op ? "allreduce" : "allgather", bytes, names[v], median(total),
                      median(control), median(gpu));
        std::fflush(stdout);
      }
    }
  }
  // Back to back: 20 calls queued without a sync between them (as a training step queues its
  // collectives), the check's host wait then overlapping the previous call's GPU work.
  for (size_t bytes : {size_t(64) << 10, size_t(1) << 20, size_t(16) << 20, size_t(256) << 20}) {
    for (int v : {0, 1}) {
      std::vector<double> per;
      for (int rep = 0; rep < 7; ++rep) {
        MPI_Barrier(MPI_COMM_WORLD);
        auto t0 = clk::now();
        for (int it = 0; it < 20; ++it) {
          if (v == 1) {
            CK(cudaMemcpyAsync((char*)cw + 64 * n, host + 64 * n, 64, cudaMemcpyHostToDevice, cs));
            NK(ncclAllGather((char*)cw + 64 * n, cw, 64, ncclUint8, ctrl, cs));
            CK(cudaMemcpyAsync(host, cw, 64 * n, cudaMemcpyDeviceToHost, cs));
            CK(cudaStreamSynchronize(cs));
          }
          NK(ncclAllReduce(send, recv, bytes / 2, ncclBfloat16, ncclSum, data, user));
        }
        CK(cudaStreamSynchronize(user));
        if (rep) per.push_back(maxAll(us(t0, clk::now()) / 20));
      }
      if (rank == 0)
        std::printf("back-to-back allreduce %9zu  %-14s per call %8.1f us\n", bytes,
                    v ? "split+copies" : "none", median(per));
      std::fflush(stdout);
    }
  }
  ncclCommDestroy(ctrl); ncclCommDestroy(other); ncclCommDestroy(data);
  MPI_Finalize();
}
