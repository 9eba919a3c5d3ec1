/* The C side of call_overhead.py: host time per cclzAllGather call, calls queued back to back
 * (no synchronization between them), on one GPU per MPI rank.
 *   mpicc -O2 c_call_loop.c -I include -L build/src -lcclz -lcudart -o c_call_loop
 *   mpirun -n 2 ./c_call_loop BYTES CALLS ROUNDS CODEC   (CODEC: none | fp8)
 * Prints one line per round: "c <codec> <bytes> <us per call>", the host's time to queue CALLS
 * calls (the GPU's work is drained between rounds, so the queue never backs up). */
#include <cclz/cclz.h>
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    cclzResult_t r_ = (call);                                                    \
    if (r_ != cclzSuccess) {                                                     \
      fprintf(stderr, "%s: %s\n", #call, cclzGetLastError(NULL));                \
      MPI_Abort(MPI_COMM_WORLD, 1);                                              \
    }                                                                            \
  } while (0)

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  if (argc != 5) {
    fprintf(stderr, "usage: c_call_loop BYTES CALLS ROUNDS none|fp8\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const size_t bytes = strtoull(argv[1], NULL, 10);
  const int calls = atoi(argv[2]), rounds = atoi(argv[3]);
  const int fp8 = strcmp(argv[4], "fp8") == 0;
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int devices = 0;
  cudaGetDeviceCount(&devices);
  cudaSetDevice(rank % devices);

  cclzUniqueId id;
  if (rank == 0) CHECK(cclzGetUniqueId(&id));
  MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
  cclzComm_t comm;
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  config.adaptive = 0;  /* as call_overhead.py's communicator */
  CHECK(cclzCommInitRankConfig(&comm, size, id, rank, &config));

  cclzCodecConfig_t codec = CCLZ_CODEC_CONFIG_INITIALIZER;
  codec.codec = cclzCodecFp8;
  codec.fp8RowElems = 1024;
  const size_t count = bytes / 2; /* bf16 */
  void *in, *out;
  cudaMalloc(&in, bytes);
  cudaMalloc(&out, bytes * size);
  {  /* seeded values in [-2, 2): bf16 is the upper half of a float */
    unsigned short* host = malloc(bytes);
    srand(1234 + rank);
    for (size_t i = 0; i < count; ++i) {
      float v = 4.0f * rand() / (float)RAND_MAX - 2.0f;
      unsigned int u;
      memcpy(&u, &v, sizeof u);
      host[i] = (unsigned short)(u >> 16);
    }
    cudaMemcpy(in, host, bytes, cudaMemcpyHostToDevice);
    free(host);
  }
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  for (int round = 0; round < rounds + 1; ++round) { /* round 0 warms up */
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = now_us();
    for (int i = 0; i < calls; ++i)
      CHECK(cclzAllGather(in, out, count, cclzBfloat16, comm, fp8 ? &codec : NULL,
                          (cclzStream_t)stream));
    const double t1 = now_us();
    cudaStreamSynchronize(stream);
    if (round > 0 && rank == 0)
      printf("c %s %zu %.3f\n", argv[4], bytes, (t1 - t0) / calls);
  }
  cudaStreamSynchronize(stream);
  CHECK(cclzCommDestroy(comm));
  MPI_Finalize();
  return 0;
}
