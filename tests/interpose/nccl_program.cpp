// An NCCL program that knows nothing of cclz, for libcclz_nccl.so to be preloaded into
// (run_nccl_program.sh). One thread per GPU, each a rank of one communicator. It makes every
// call the drop-in handles, each kind several times (more than the 12 trials of an adaptive cclz
// communicator's kinds below 2 MiB a rank), on seeded data whose exact results it knows:
//   all-gather (out of place and in place), all-to-all, send/recv outside a group (pairs of
//   ranks), the same inside a group, broadcast, all-reduce and reduce-scatter (sum), an int32
//   all-gather, an empty one, and an all-gather captured into a CUDA graph and replayed;
// in bf16, fp16 and fp32 at 64 KiB to 8 MiB per rank with ragged counts. It checks every
// data-movement result bit for bit, the reductions against the fp32 sum in rank order rounded
// once, within one rounding (NCCL rounds in its own order; run_nccl_program.sh compares the
// reductions' bits between runs), and
// prints one line per call and rank: "case NAME rank R hash H", H a 64-bit FNV-1a of the output
// bytes, so that runs with and without the drop-in can be compared line for line. Exit 0 when
// every check passed, 1 when one failed, 77 with fewer than 2 GPUs.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

enum class Type { Bf16, Fp16, Fp32, Int32 };

const char* typeName(Type t) {
  switch (t) {
    case Type::Bf16:
      return "bf16";
    case Type::Fp16:
      return "fp16";
    case Type::Fp32:
      return "fp32";
    case Type::Int32:
      return "int32";
  }
  return "?";
}

ncclDataType_t ncclType(Type t) {
  switch (t) {
    case Type::Bf16:
      return ncclBfloat16;
    case Type::Fp16:
      return ncclFloat16;
    case Type::Fp32:
      return ncclFloat32;
    case Type::Int32:
      return ncclInt32;
  }
  return ncclUint8;
}

size_t typeBytes(Type t) { return t == Type::Bf16 || t == Type::Fp16 ? 2 : 4; }

// ---- Values: bit patterns on the host --------------------------------------------------------

float fromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

uint16_t toBf16(float f) {  // round to nearest even (no NaN here)
  const uint32_t u = bitsOf(f);
  return static_cast<uint16_t>((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

float fromBf16(uint16_t h) { return fromBits(static_cast<uint32_t>(h) << 16); }

uint16_t toFp16(float f) {  // normal and subnormal range, round to nearest even
  const uint32_t u = bitsOf(f);
  const uint32_t sign = (u >> 16) & 0x8000;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7c00);
  if (a < 6.103515625e-05f) {  // subnormal: multiples of 2^-24
    const float q = std::nearbyint(a * 16777216.0f);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(q));
  }
  int e = 0;
  const float m = std::frexp(a, &e);      // a = m * 2^e, m in [0.5, 1)
  float q = std::nearbyint(m * 2048.0f);  // 11 significant bits
  if (q == 2048.0f) q = 1024.0f, ++e;
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(e + 14) << 10 |
                               (static_cast<uint32_t>(q) - 1024));
}

float fromFp16(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float v = e == 0 ? std::ldexp(static_cast<float>(m), -24)
                         : std::ldexp(static_cast<float>(m + 1024), e - 25);
  return h & 0x8000 ? -v : v;
}

float load(Type t, const uint8_t* p, size_t i) {
  if (t == Type::Fp32) return reinterpret_cast<const float*>(p)[i];
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return t == Type::Bf16 ? fromBf16(h) : fromFp16(h);
}

void store(Type t, uint8_t* p, size_t i, float v) {
  if (t == Type::Fp32) {
    reinterpret_cast<float*>(p)[i] = v;
    return;
  }
  const uint16_t h = t == Type::Bf16 ? toBf16(v) : toFp16(v);
  std::memcpy(p + 2 * i, &h, 2);
}

// Rank r's `count` values for a seed: near-Gaussian floats (a sum of four uniform values: the
// exponents of trained weights and activations, the lossless codec's kind of data, at a fraction
// of a Gaussian draw's cost), integers for int32.
std::vector<uint8_t> values(Type t, size_t count, int rank, uint64_t seed) {
  std::vector<uint8_t> out(count * typeBytes(t));
  uint64_t s =
      seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(rank) * 0xD1B54A32D192ED03ull + 1;
  auto next = [&s] {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    return s;
  };
  for (size_t i = 0; i < count; ++i) {
    if (t == Type::Int32) {
      reinterpret_cast<int32_t*>(out.data())[i] = static_cast<int32_t>(next() >> 32);
      continue;
    }
    const uint64_t a = next(), b = next();
    const float sum = static_cast<float>(a & 0xffffffff) + static_cast<float>(a >> 32) +
                      static_cast<float>(b & 0xffffffff) + static_cast<float>(b >> 32);
    store(t, out.data(), i, (sum * 2.3283064e-10f - 2.0f) * 1.7320508f);
  }
  return out;
}

uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

// ---- One rank ------------------------------------------------------------------------------

#define CHECK_CUDA(call)                                                               \
  do {                                                                                 \
    const cudaError_t e_ = (call);                                                     \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "rank %d: %s: %s\n", rank_, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

#define CHECK_NCCL(call)                                                                   \
  do {                                                                                     \
    const ncclResult_t r_ = (call);                                                        \
    if (r_ != ncclSuccess) {                                                               \
      std::fprintf(stderr, "rank %d: %s: %s (%s)\n", rank_, #call, ncclGetErrorString(r_), \
                   ncclGetLastError(comm_));                                               \
      std::exit(1);                                                                        \
    }                                                                                      \
  } while (0)

std::mutex printMutex;
int failures = 0;

class Rank {
 public:
  Rank(int rank, int ranks, const ncclUniqueId& id) : rank_(rank), ranks_(ranks) {
    CHECK_CUDA(cudaSetDevice(rank));
    CHECK_NCCL(ncclCommInitRank(&comm_, ranks, id, rank));
    CHECK_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }

  ~Rank() {
    cudaStreamDestroy(stream_);
    ncclCommDestroy(comm_);
    for (void* p : buffers_) cudaFree(p);
  }

  void run(int iterations) {
    const size_t sizes[] = {32768, 1000003, 2097151};  // elements: 64 KiB of bf16 to 8 MiB fp32
    // A point-to-point call before any collective (on 2 ranks it may set up cclz).
    sendRecv(Type::Bf16, 4099, 0, false);
    for (int it = 0; it < iterations; ++it)
      for (Type t : {Type::Bf16, Type::Fp16, Type::Fp32})
        for (size_t count : sizes) {
          const uint64_t seed = 1000 * it + count + static_cast<int>(t);
          allGather(t, count, seed, false);
          allGather(t, count, seed + 1, true);
          allToAll(t, count / ranks_ + 1, seed + 2);
          sendRecv(t, count, seed + 3, false);
          sendRecv(t, count, seed + 4, true);
          broadcast(t, count, seed + 5);
          allReduce(t, count, seed + 6);
          reduceScatter(t, count / ranks_ + 1, seed + 7);
        }
    allGather(Type::Int32, 1000003, 7, false);
    allGather(Type::Bf16, 0, 8, false);
    capturedAllGather(Type::Bf16, 65536, 9);
  }

 private:
  uint8_t* device(size_t bytes) {
    void* p = nullptr;
    CHECK_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
    buffers_.push_back(p);
    return static_cast<uint8_t*>(p);
  }

  uint8_t* upload(const std::vector<uint8_t>& host) {
    uint8_t* p = device(host.size());
    CHECK_CUDA(cudaMemcpy(p, host.data(), host.size(), cudaMemcpyHostToDevice));
    return p;
  }

  std::vector<uint8_t> download(const uint8_t* p, size_t bytes) {
    CHECK_CUDA(cudaStreamSynchronize(stream_));
    std::vector<uint8_t> host(bytes);
    CHECK_CUDA(cudaMemcpy(host.data(), p, bytes, cudaMemcpyDeviceToHost));
    return host;
  }

  void release() {
    CHECK_CUDA(cudaDeviceSynchronize());
    for (void* p : buffers_) cudaFree(p);
    buffers_.clear();
  }

  void report(const std::string& name, const std::vector<uint8_t>& got,
              const std::vector<uint8_t>& want, Type t, bool exact) {
    bool ok = got.size() == want.size();
    size_t bad = 0;
    if (ok && exact) {
      ok = got == want;
    } else if (ok) {  // NCCL rounds once per step: up to one rounding per rank of partial
      // sums as large as the values (about unit size), whatever the total
      const size_t n = got.size() / typeBytes(t);
      for (size_t i = 0; i < n; ++i) {
        const float g = load(t, got.data(), i), w = load(t, want.data(), i);
        const float ulp = t == Type::Fp32 ? 1.2e-7f : t == Type::Bf16 ? 7.9e-3f : 9.8e-4f;
        if (std::fabs(g - w) > ranks_ * ulp * std::fmax(std::fabs(w), 1.0f)) ++bad;
      }
      ok = bad == 0;
    }
    std::lock_guard<std::mutex> lock(printMutex);
    std::printf("case %s rank %d hash %016llx%s\n", name.c_str(), rank_,
                static_cast<unsigned long long>(fnv1a(got)), ok ? "" : " FAILED");
    if (!ok) ++failures;
  }

  std::string caseName(const char* op, Type t, size_t count, uint64_t seed) {
    return std::string(op) + "." + typeName(t) + "." + std::to_string(count) + ".s" +
           std::to_string(seed);
  }

  void allGather(Type t, size_t count, uint64_t seed, bool inPlace) {
    const size_t bytes = count * typeBytes(t);
    std::vector<uint8_t> want;
    for (int r = 0; r < ranks_; ++r) {
      const std::vector<uint8_t> v = values(t, count, r, seed);
      want.insert(want.end(), v.begin(), v.end());
    }
    uint8_t* recv = device(bytes * ranks_);
    const uint8_t* send = recv + rank_ * bytes;
    if (inPlace) {
      CHECK_CUDA(cudaMemcpy(recv + rank_ * bytes, want.data() + rank_ * bytes, bytes,
                            cudaMemcpyHostToDevice));
    } else {
      send = upload(values(t, count, rank_, seed));
    }
    CHECK_NCCL(ncclAllGather(send, recv, count, ncclType(t), comm_, stream_));
    report(caseName(inPlace ? "allgather-inplace" : "allgather", t, count, seed),
           download(recv, bytes * ranks_), want, t, true);
    release();
  }

  // Rank r sends block j of values(r) to rank j.
  void allToAll(Type t, size_t count, uint64_t seed) {
    const size_t bytes = count * typeBytes(t);
    uint8_t* send = upload(values(t, count * ranks_, rank_, seed));
    uint8_t* recv = device(bytes * ranks_);
    std::vector<uint8_t> want;
    for (int r = 0; r < ranks_; ++r) {
      const std::vector<uint8_t> v = values(t, count * ranks_, r, seed);
      want.insert(want.end(), v.begin() + rank_ * bytes, v.begin() + (rank_ + 1) * bytes);
    }
    CHECK_NCCL(ncclAlltoAll(send, recv, count, ncclType(t), comm_, stream_));
    report(caseName("alltoall", t, count, seed), download(recv, bytes * ranks_), want, t, true);
    release();
  }

  // Pairs (0, 1), (2, 3), ...: outside a group the even rank sends first and the odd one
  // receives first (NCCL runs point-to-point calls outside a group one at a time); inside a group
  // both directions at once. An unpaired last rank takes no part.
  void sendRecv(Type t, size_t count, uint64_t seed, bool grouped) {
    const int peer = rank_ ^ 1;
    if (peer >= ranks_) return;
    const size_t bytes = count * typeBytes(t);
    uint8_t* send = upload(values(t, count, rank_, seed));
    uint8_t* recv = device(bytes);
    const ncclDataType_t d = ncclType(t);
    if (grouped) CHECK_NCCL(ncclGroupStart());
    if (rank_ % 2 == 0 || grouped) {
      CHECK_NCCL(ncclSend(send, count, d, peer, comm_, stream_));
      CHECK_NCCL(ncclRecv(recv, count, d, peer, comm_, stream_));
    } else {
      CHECK_NCCL(ncclRecv(recv, count, d, peer, comm_, stream_));
      CHECK_NCCL(ncclSend(send, count, d, peer, comm_, stream_));
    }
    if (grouped) CHECK_NCCL(ncclGroupEnd());
    report(caseName(grouped ? "sendrecv-group" : "sendrecv", t, count, seed), download(recv, bytes),
           values(t, count, peer, seed), t, true);
    release();
  }

  void broadcast(Type t, size_t count, uint64_t seed) {
    const size_t bytes = count * typeBytes(t);
    uint8_t* send = upload(values(t, count, rank_, seed));
    uint8_t* recv = device(bytes);
    CHECK_NCCL(ncclBroadcast(send, recv, count, ncclType(t), 0, comm_, stream_));
    report(caseName("broadcast", t, count, seed), download(recv, bytes), values(t, count, 0, seed),
           t, true);
    release();
  }

  // sum over ranks of element offset+i of values(r), in fp32 in rank order, rounded once.
  std::vector<uint8_t> sum(Type t, size_t total, size_t offset, size_t count, uint64_t seed) {
    std::vector<float> acc(count, 0.0f);
    for (int r = 0; r < ranks_; ++r) {
      const std::vector<uint8_t> v = values(t, total, r, seed);
      for (size_t i = 0; i < count; ++i) acc[i] += load(t, v.data(), offset + i);
    }
    std::vector<uint8_t> out(count * typeBytes(t));
    for (size_t i = 0; i < count; ++i) store(t, out.data(), i, acc[i]);
    return out;
  }

  void allReduce(Type t, size_t count, uint64_t seed) {
    const size_t bytes = count * typeBytes(t);
    uint8_t* send = upload(values(t, count, rank_, seed));
    uint8_t* recv = device(bytes);
    CHECK_NCCL(ncclAllReduce(send, recv, count, ncclType(t), ncclSum, comm_, stream_));
    report(caseName("allreduce", t, count, seed), download(recv, bytes),
           sum(t, count, 0, count, seed), t, false);
    release();
  }

  void reduceScatter(Type t, size_t count, uint64_t seed) {
    const size_t bytes = count * typeBytes(t);
    uint8_t* send = upload(values(t, count * ranks_, rank_, seed));
    uint8_t* recv = device(bytes);
    CHECK_NCCL(ncclReduceScatter(send, recv, count, ncclType(t), ncclSum, comm_, stream_));
    report(caseName("reducescatter", t, count, seed), download(recv, bytes),
           sum(t, count * ranks_, rank_ * count, count, seed), t, false);
    release();
  }

  // Captured: the drop-in must leave it to NCCL. Replayed twice, the second time on new input.
  void capturedAllGather(Type t, size_t count, uint64_t seed) {
    const size_t bytes = count * typeBytes(t);
    uint8_t* send = upload(values(t, count, rank_, seed));
    uint8_t* recv = device(bytes * ranks_);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CHECK_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    CHECK_NCCL(ncclAllGather(send, recv, count, ncclType(t), comm_, stream_));
    CHECK_CUDA(cudaStreamEndCapture(stream_, &graph));
    CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    for (uint64_t replay = 0; replay < 2; ++replay) {
      const std::vector<uint8_t> mine = values(t, count, rank_, seed + replay);
      CHECK_CUDA(cudaMemcpy(send, mine.data(), bytes, cudaMemcpyHostToDevice));
      CHECK_CUDA(cudaGraphLaunch(exec, stream_));
      std::vector<uint8_t> want;
      for (int r = 0; r < ranks_; ++r) {
        const std::vector<uint8_t> v = values(t, count, r, seed + replay);
        want.insert(want.end(), v.begin(), v.end());
      }
      report(caseName("allgather-graph", t, count, seed + replay), download(recv, bytes * ranks_),
             want, t, true);
    }
    CHECK_CUDA(cudaGraphExecDestroy(exec));
    CHECK_CUDA(cudaGraphDestroy(graph));
    release();
  }

  int rank_, ranks_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::vector<void*> buffers_;
};

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 14;
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus < 2) {
    std::printf("skipped: %d GPUs, the program needs 2 or more\n", gpus);
    return 77;
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::vector<std::thread> threads;
  for (int r = 0; r < gpus; ++r)
    threads.emplace_back([r, gpus, &id, iterations] {
      Rank rank(r, gpus, id);
      rank.run(iterations);
    });
  for (std::thread& t : threads) t.join();
  std::printf("%d ranks, %d failed checks\n", gpus, failures);
  return failures == 0 ? 0 : 1;
}
