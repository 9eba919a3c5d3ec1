// The fused NVLink all-gather and reduce-scatter (CCLZ_FUSED=1, or =ce where the program runs
// with CCLZ_FUSED=ce; docs/collectives.md, "Fused NVLink paths"), one process per GPU under
// mpirun: their output must be the very bytes of the codec's pipeline (the same fp8 frames,
// decoded, summed in rank order) on a device communicator without it, and of the host path (the
// CPU reference over MPI). Ragged counts per rank (1, 7, 4097, 1000001: several pieces of
// CCLZ_PIECE_BYTES=1M, and outputs at offsets that are not 16-byte aligned), bf16 and fp32, the
// E4M3 default and the rotated INT8 grid (the decoder's two paths), three calls queued back to
// back (the window's slot reused), and a call captured into a CUDA graph and replayed on new
// inputs. The graph shows that the fused path ran: its nodes include pushFrameKernel (with the
// copy engines: the flags' memory-operation nodes, and no push kernel). With the copy engines
// also the all-reduce, qgrad and error feedback (NcclFusedWider); on the kernel path also the
// lossless all-gather, bit for bit (NcclFusedLossless). Last, a count mismatch caught by a
// deferred check ends in an error on every rank, not a hang.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "nccl_main.h"
#include "support/data.h"

namespace cclz::test {
namespace {

// The fused path under test: CCLZ_FUSED as the program was started with, 1 (frames stored by a
// kernel) unless it was ce (copied by the copy engines) or direct (the kernel path with the
// reduce-scatter's frames encoded into the peers' windows). main() unsets the variable, so that
// the reference communicators are made without it.
std::string& fusedMode() {
  static std::string mode = "1";
  return mode;
}
bool copyEngines() { return fusedMode() == "ce"; }

// A device communicator created with CCLZ_FUSED (the variable is set for its creation only:
// comms().device, the reference, is created without it).
cclzComm_t& fusedComm() {
  static cclzComm_t comm = [] {
    comms();  // the reference communicators first, without the variable
    cclzUniqueId id{};
    if (worldRank() == 0 && cclzGetUniqueId(&id) != cclzSuccess) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
    config.adaptive = 0;  // every call through its codec: the fused path
    setenv("CCLZ_FUSED", fusedMode().c_str(), 1);
    cclzComm_t made = nullptr;
    const cclzResult_t r = cclzCommInitRankConfig(&made, worldSize(), id, worldRank(), &config);
    unsetenv("CCLZ_FUSED");
    if (r != cclzSuccess) {
      std::fprintf(stderr, "cclzCommInitRankConfig with CCLZ_FUSED=%s: %s\n",
                   fusedMode().c_str(), cclzGetLastError(nullptr));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return made;
  }();
  return comm;
}

struct FusedCase {
  int dtype;
  size_t count;  // per rank
  int format;    // cclzFp8Format
};

std::string caseName(const ::testing::TestParamInfo<FusedCase>& info) {
  return std::string(dtypeLabel(info.param.dtype)) + "_" + std::to_string(info.param.count) +
         (info.param.format == cclzFp8Int8 ? "_int8" : "_e4m3");
}

cclzCodecConfig_t fp8Config(int format) {
  cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
  c.codec = cclzCodecFp8;
  c.fp8Format = static_cast<cclzFp8Format_t>(format);
  return c;
}

struct Device {
  explicit Device(size_t bytes) : size(bytes) {
    EXPECT_EQ(cudaMalloc(&ptr, bytes ? bytes : 1), cudaSuccess);
    EXPECT_EQ(cudaMemset(ptr, 0xA5, bytes ? bytes : 1), cudaSuccess);  // never zeros
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~Device() { cudaFree(ptr); }
  void upload(const std::vector<uint8_t>& bytes, cudaStream_t stream) const {
    EXPECT_EQ(cudaMemcpyAsync(ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice, stream),
              cudaSuccess);
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> out(size);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr, size, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  void* ptr = nullptr;
  size_t size;
};

std::vector<uint8_t> inputOf(const FusedCase& c, int call) {
  return makeData(DataKind::kGauss1, c.dtype, c.count, 0,
                  mixSeed(0xF05ED, worldRank(), c.count * 8 + c.dtype, call));
}

// The codec's pipeline on the reference device communicator, waited for.
std::vector<uint8_t> referenceGather(const FusedCase& c, const std::vector<uint8_t>& in) {
  const int n = worldSize();
  const size_t es = elementSize(c.dtype);
  const cclzCodecConfig_t codec = fp8Config(c.format);
  Device send(in.size()), recv(c.count * n * es);
  send.upload(in, comms().stream);
  EXPECT_EQ(cclzAllGather(send.ptr, recv.ptr, c.count, static_cast<cclzDataType_t>(c.dtype),
                          comms().device, &codec, reinterpret_cast<cclzStream_t>(comms().stream)),
            cclzSuccess)
      << cclzGetLastError(comms().device);
  EXPECT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
  return recv.download();
}

void expectNoAsyncError(cclzComm_t comm) {
  cclzResult_t async = cclzInternalError;
  EXPECT_EQ(cclzCommGetAsyncError(comm, &async), cclzSuccess);
  EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(comm);
}

// Inputs for calls queued back to back, each in its own device buffer with its own output, on a
// stream of their own: the second and third calls reuse the fused path's slots while nothing
// waits on the host.
struct BackToBack {
  static constexpr int kCalls = 3;
  BackToBack(const std::function<std::vector<uint8_t>(int)>& inputOfCall, size_t outBytes) {
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
    for (int i = 0; i < kCalls; ++i) {
      inputs.push_back(inputOfCall(i));
      sends.push_back(std::make_unique<Device>(inputs[i].size()));
      recvs.push_back(std::make_unique<Device>(outBytes));
      sends[i]->upload(inputs[i], stream);
    }
  }
  ~BackToBack() { cudaStreamDestroy(stream); }
  cclzStream_t cclzStream() const { return reinterpret_cast<cclzStream_t>(stream); }

  // Queues call(i) for every call on the fused communicator, then waits for the stream; false
  // (with the failure reported) when a call or the wait failed or an asynchronous error is left.
  bool queueAndWait(const std::function<cclzResult_t(int)>& call) const {
    for (int i = 0; i < kCalls; ++i) {
      const cclzResult_t r = call(i);
      if (r != cclzSuccess) {
        ADD_FAILURE() << "rank " << worldRank() << " call " << i << ": "
                      << cclzGetLastError(fusedComm());
        return false;
      }
    }
    if (cudaStreamSynchronize(stream) != cudaSuccess) {
      ADD_FAILURE() << "rank " << worldRank() << ": the stream failed";
      return false;
    }
    cclzResult_t async = cclzInternalError;
    EXPECT_EQ(cclzCommGetAsyncError(fusedComm(), &async), cclzSuccess);
    EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(fusedComm());
    return async == cclzSuccess;
  }

  cudaStream_t stream = nullptr;
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<std::unique_ptr<Device>> sends, recvs;
};

class NcclFused : public ::testing::TestWithParam<FusedCase> {};

// Three all-gathers queued back to back, each on its own input and output.
TEST_P(NcclFused, BackToBackCallsEqualThePipelineAndTheHostPath) {
  const FusedCase& c = GetParam();
  const int n = worldSize(), me = worldRank();
  const size_t es = elementSize(c.dtype);
  const cclzCodecConfig_t codec = fp8Config(c.format);
  BackToBack calls([&](int i) { return inputOf(c, i); }, c.count * n * es);
  ASSERT_TRUE(calls.queueAndWait([&](int i) {
    return cclzAllGather(calls.sends[i]->ptr, calls.recvs[i]->ptr, c.count,
                         static_cast<cclzDataType_t>(c.dtype), fusedComm(), &codec,
                         calls.cclzStream());
  }));
  const auto& inputs = calls.inputs;
  for (int i = 0; i < BackToBack::kCalls; ++i) {
    const std::vector<uint8_t> fused = calls.recvs[i]->download();
    const std::vector<uint8_t> reference = referenceGather(c, inputs[i]);
    EXPECT_EQ(firstMismatch(fused.data(), reference.data(), fused.size()), SIZE_MAX)
        << "rank " << me << " call " << i << ": the fused output differs from the pipeline's";
    if (i == 0) {
      std::vector<uint8_t> host(c.count * n * es, 0xA5);
      ASSERT_EQ(cclzAllGather(inputs[i].data(), host.data(), c.count,
                              static_cast<cclzDataType_t>(c.dtype), comms().host, &codec, nullptr),
                cclzSuccess)
          << cclzGetLastError(comms().host);
      EXPECT_EQ(firstMismatch(fused.data(), host.data(), fused.size()), SIZE_MAX)
          << "rank " << me << ": the fused output differs from the host path's";
    }
  }
}

// The same buffers three times, new data each time: on the copy-engine path the first call makes
// a CUDA graph and the next two replay it (CCLZ_FUSED_GRAPHS, on by default); every output equals
// the pipeline's.
TEST_P(NcclFused, RepeatedBuffersEqualThePipeline) {
  const FusedCase& c = GetParam();
  const int n = worldSize(), me = worldRank();
  const size_t es = elementSize(c.dtype);
  const cclzCodecConfig_t codec = fp8Config(c.format);
  const auto s = reinterpret_cast<cclzStream_t>(comms().stream);
  Device send(c.count * es), recv(c.count * n * es);
  for (int i = 0; i < 3; ++i) {
    const std::vector<uint8_t> in = inputOf(c, 30 + i);
    send.upload(in, comms().stream);
    ASSERT_EQ(cclzAllGather(send.ptr, recv.ptr, c.count, static_cast<cclzDataType_t>(c.dtype),
                            fusedComm(), &codec, s),
              cclzSuccess)
        << cclzGetLastError(fusedComm());
    ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
    const std::vector<uint8_t> fused = recv.download();
    const std::vector<uint8_t> reference = referenceGather(c, in);
    EXPECT_EQ(firstMismatch(fused.data(), reference.data(), fused.size()), SIZE_MAX)
        << "rank " << me << " call " << i << ": the fused output differs from the pipeline's";
  }
  cclzResult_t async = cclzInternalError;
  EXPECT_EQ(cclzCommGetAsyncError(fusedComm(), &async), cclzSuccess);
  EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(fusedComm());
}

std::vector<uint8_t> reduceInputOf(const FusedCase& c, int call) {
  return makeData(DataKind::kGauss1, c.dtype, c.count * worldSize(), 0,
                  mixSeed(0xF05ED5, worldRank(), c.count * 8 + c.dtype, call));
}

cclzRedOp_t redOpOf(int call) { return call % 2 ? cclzAvg : cclzSum; }

// The codec's pipeline on the reference device communicator, waited for.
std::vector<uint8_t> referenceReduceScatter(const FusedCase& c, const std::vector<uint8_t>& in,
                                            cclzRedOp_t op) {
  const size_t es = elementSize(c.dtype);
  const cclzCodecConfig_t codec = fp8Config(c.format);
  Device send(in.size()), recv(c.count * es);
  send.upload(in, comms().stream);
  EXPECT_EQ(cclzReduceScatter(send.ptr, recv.ptr, c.count, static_cast<cclzDataType_t>(c.dtype),
                              op, comms().device, &codec,
                              reinterpret_cast<cclzStream_t>(comms().stream)),
            cclzSuccess)
      << cclzGetLastError(comms().device);
  EXPECT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
  return recv.download();
}

// The reduce-scatter likewise: three calls back to back (sum, average, sum), each rank's block of
// the sum in fp32 over the n frames in rank order, as the pipeline and the host path sum.
TEST_P(NcclFused, BackToBackReduceScattersEqualThePipelineAndTheHostPath) {
  const FusedCase& c = GetParam();
  const int me = worldRank();
  const size_t es = elementSize(c.dtype);
  const cclzCodecConfig_t codec = fp8Config(c.format);
  BackToBack calls([&](int i) { return reduceInputOf(c, i); }, c.count * es);
  ASSERT_TRUE(calls.queueAndWait([&](int i) {
    return cclzReduceScatter(calls.sends[i]->ptr, calls.recvs[i]->ptr, c.count,
                             static_cast<cclzDataType_t>(c.dtype), redOpOf(i), fusedComm(),
                             &codec, calls.cclzStream());
  }));
  const auto& inputs = calls.inputs;
  for (int i = 0; i < BackToBack::kCalls; ++i) {
    const std::vector<uint8_t> fused = calls.recvs[i]->download();
    const std::vector<uint8_t> reference = referenceReduceScatter(c, inputs[i], redOpOf(i));
    EXPECT_EQ(firstMismatch(fused.data(), reference.data(), fused.size()), SIZE_MAX)
        << "rank " << me << " call " << i << ": the fused sum differs from the pipeline's";
    if (i < 2) {
      std::vector<uint8_t> host(c.count * es, 0xA5);
      ASSERT_EQ(cclzReduceScatter(inputs[i].data(), host.data(), c.count,
                                  static_cast<cclzDataType_t>(c.dtype), redOpOf(i), comms().host,
                                  &codec, nullptr),
                cclzSuccess)
          << cclzGetLastError(comms().host);
      EXPECT_EQ(firstMismatch(fused.data(), host.data(), fused.size()), SIZE_MAX)
          << "rank " << me << " call " << i << ": the fused sum differs from the host path's";
    }
  }
}

// A driver function by name, through the runtime (the test does not link libcuda: it must load,
// and skip, on machines without a GPU driver). NULL when the driver has none.
template <typename F>
F driverFunction(const char* name) {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(name, &f, 12040, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    return nullptr;
  return reinterpret_cast<F>(f);
}

// Kernel nodes of the graph whose function's name contains `name`; -1 when no kernel node's name
// could be read. Through the driver: libcclz links CUDA's runtime statically, so the test's
// runtime may not know its kernels' host stubs, but the driver knows every node's function.
int kernelNodesNamed(cudaGraph_t graph, const char* name) {
  using NodeType = CUresult (*)(CUgraphNode, CUgraphNodeType*);
  using KernelParams = CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*);
  using FuncName = CUresult (*)(const char**, CUfunction);
  using KernelName = CUresult (*)(const char**, CUkernel);
  const auto nodeType = driverFunction<NodeType>("cuGraphNodeGetType");
  const auto kernelParams = driverFunction<KernelParams>("cuGraphKernelNodeGetParams");
  const auto funcName = driverFunction<FuncName>("cuFuncGetName");
  const auto kernelName = driverFunction<KernelName>("cuKernelGetName");
  if (!nodeType || !kernelParams || !funcName || !kernelName) return -1;
  size_t count = 0;
  if (cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) return -1;
  std::vector<cudaGraphNode_t> nodes(count);
  if (cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) return -1;
  int found = 0, named = 0;
  for (cudaGraphNode_t node : nodes) {
    const auto cuNode = reinterpret_cast<CUgraphNode>(node);
    CUgraphNodeType type;
    if (nodeType(cuNode, &type) != CUDA_SUCCESS || type != CU_GRAPH_NODE_TYPE_KERNEL) continue;
    CUDA_KERNEL_NODE_PARAMS params{};
    if (kernelParams(cuNode, &params) != CUDA_SUCCESS) continue;
    const char* fn = nullptr;
    const CUresult got = params.func   ? funcName(&fn, params.func)
                         : params.kern ? kernelName(&fn, params.kern)
                                       : CUDA_ERROR_INVALID_VALUE;
    if (got != CUDA_SUCCESS || !fn) continue;
    ++named;
    if (std::strstr(fn, name)) ++found;
  }
  return named ? found : -1;
}

// The copy-engine path takes more than the kernel path: the all-reduce, the qgrad codec, ragged
// chunks (an all-reduce's count that the ranks do not divide), error feedback. Each against the
// codec's pipeline on the reference device communicator, byte for byte.
struct WiderCase {
  int codec;     // cclzCodecFp8 or cclzCodecQgrad
  size_t count;  // all-reduce: the whole count; all-gather and reduce-scatter: per rank
};

std::string widerName(const ::testing::TestParamInfo<WiderCase>& info) {
  return std::string(info.param.codec == cclzCodecQgrad ? "qgrad_" : "fp8_") +
         std::to_string(info.param.count);
}

cclzCodecConfig_t configOf(int codec) {
  cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
  c.codec = static_cast<cclzCodecType_t>(codec);
  return c;
}

class NcclFusedWider : public ::testing::TestWithParam<WiderCase> {
 protected:
  void SetUp() override {
    if (!copyEngines()) GTEST_SKIP() << "the kernel path (CCLZ_FUSED=1) takes fp8 gathers and "
                                        "reductions without feedback only";
  }
};

// Three all-reduces back to back (sum, average, sum), each against the pipeline's.
TEST_P(NcclFusedWider, AllReducesEqualThePipeline) {
  const WiderCase& c = GetParam();
  const int me = worldRank();
  const cclzCodecConfig_t codec = configOf(c.codec);
  const size_t bytes = c.count * 2;  // bf16
  BackToBack calls(
      [&](int i) {
        return makeData(DataKind::kGauss1, cclzBfloat16, c.count, 0,
                        mixSeed(0xA11, me, c.count, i));
      },
      bytes);
  ASSERT_TRUE(calls.queueAndWait([&](int i) {
    return cclzAllReduce(calls.sends[i]->ptr, calls.recvs[i]->ptr, c.count, cclzBfloat16,
                         redOpOf(i), fusedComm(), &codec, calls.cclzStream());
  }));
  for (int i = 0; i < BackToBack::kCalls; ++i) {
    Device send(bytes), recv(bytes);
    send.upload(calls.inputs[i], comms().stream);
    ASSERT_EQ(cclzAllReduce(send.ptr, recv.ptr, c.count, cclzBfloat16, redOpOf(i),
                            comms().device, &codec, reinterpret_cast<cclzStream_t>(comms().stream)),
              cclzSuccess)
        << cclzGetLastError(comms().device);
    const std::vector<uint8_t> fused = calls.recvs[i]->download(), reference = recv.download();
    EXPECT_EQ(firstMismatch(fused.data(), reference.data(), fused.size()), SIZE_MAX)
        << "rank " << me << " call " << i << ": the fused all-reduce differs from the pipeline's";
  }
}

// The all-gather and the reduce-scatter of the case's codec, one call each.
TEST_P(NcclFusedWider, GatherAndReduceScatterEqualThePipeline) {
  const WiderCase& c = GetParam();
  const int n = worldSize(), me = worldRank();
  const cclzCodecConfig_t codec = configOf(c.codec);
  const auto s = reinterpret_cast<cclzStream_t>(comms().stream);
  const std::vector<uint8_t> in =
      makeData(DataKind::kGauss1, cclzBfloat16, c.count * n, 0, mixSeed(0xA12, me, c.count));
  Device send(in.size());
  send.upload(in, comms().stream);
  for (bool gather : {true, false}) {
    SCOPED_TRACE(gather ? "all-gather" : "reduce-scatter");
    const size_t outBytes = (gather ? c.count * n : c.count) * 2;
    Device fusedOut(outBytes), referenceOut(outBytes);
    for (cclzComm_t comm : {fusedComm(), comms().device}) {
      void* out = comm == fusedComm() ? fusedOut.ptr : referenceOut.ptr;
      const cclzResult_t r =
          gather ? cclzAllGather(send.ptr, out, c.count, cclzBfloat16, comm, &codec, s)
                 : cclzReduceScatter(send.ptr, out, c.count, cclzBfloat16, cclzSum, comm, &codec,
                                     s);
      ASSERT_EQ(r, cclzSuccess) << cclzGetLastError(comm);
    }
    const std::vector<uint8_t> fused = fusedOut.download(), reference = referenceOut.download();
    EXPECT_EQ(firstMismatch(fused.data(), reference.data(), fused.size()), SIZE_MAX)
        << "rank " << me;
  }
}

// Error feedback (qgrad): three steps of the all-reduce and of the reduce-scatter, each state's
// outputs and residuals against the pipeline's with a state of its own.
TEST_P(NcclFusedWider, FeedbackEqualsThePipeline) {
  const WiderCase& c = GetParam();
  if (c.codec != cclzCodecQgrad) GTEST_SKIP() << "error feedback is qgrad's";
  const int n = worldSize(), me = worldRank();
  const cclzCodecConfig_t codec = configOf(c.codec);
  const auto s = reinterpret_cast<cclzStream_t>(comms().stream);
  for (bool allReduce : {true, false}) {
    SCOPED_TRACE(allReduce ? "all-reduce" : "reduce-scatter");
    const size_t total = allReduce ? c.count : c.count * n;  // the state's elements
    const size_t outCount = c.count;
    cclzFeedback_t fusedState = nullptr, referenceState = nullptr;
    ASSERT_EQ(cclzFeedbackCreate(&fusedState, total, cclzMemoryDevice), cclzSuccess);
    ASSERT_EQ(cclzFeedbackCreate(&referenceState, total, cclzMemoryDevice), cclzSuccess);
    void *fusedResidual = nullptr, *referenceResidual = nullptr;
    cclzFeedbackGetResidual(fusedState, &fusedResidual, nullptr);
    cclzFeedbackGetResidual(referenceState, &referenceResidual, nullptr);
    // The same buffers at every step: on the copy engines the later steps replay the graph the
    // first made (rounding to nearest never reads the step).
    Device send(total * 2), fusedOut(outCount * 2), referenceOut(outCount * 2);
    for (int step = 0; step < 3; ++step) {
      const std::vector<uint8_t> g = makeData(DataKind::kGauss1, cclzBfloat16, total, 0,
                                              mixSeed(0xFEED, me, total, step));
      send.upload(g, comms().stream);
      for (bool fusedCall : {true, false}) {
        cclzComm_t comm = fusedCall ? fusedComm() : comms().device;
        cclzFeedback_t state = fusedCall ? fusedState : referenceState;
        void* out = fusedCall ? fusedOut.ptr : referenceOut.ptr;
        const cclzResult_t r =
            allReduce ? cclzAllReduceFeedback(send.ptr, out, c.count, cclzBfloat16, cclzAvg, comm,
                                              &codec, state, s)
                      : cclzReduceScatterFeedback(send.ptr, out, c.count, cclzBfloat16, cclzSum,
                                                  comm, &codec, state, s);
        ASSERT_EQ(r, cclzSuccess) << cclzGetLastError(comm);
      }
      EXPECT_EQ(fusedOut.download(), referenceOut.download()) << "rank " << me << " step " << step;
      std::vector<uint8_t> a(total * 4), b(total * 4);
      ASSERT_EQ(cudaMemcpy(a.data(), fusedResidual, a.size(), cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(b.data(), referenceResidual, b.size(), cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(firstMismatch(a.data(), b.data(), a.size()), SIZE_MAX)
          << "rank " << me << " step " << step << ": the residuals differ";
    }
    cclzFeedbackDestroy(fusedState);
    cclzFeedbackDestroy(referenceState);
  }
  expectNoAsyncError(fusedComm());
}

// A NaN in one rank's input, with error feedback: that rank's asynchronous error says its encode
// met a NaN or Inf (the blocks were sent as NaN), as the pipeline reports it; the other ranks
// have none, and the communicator goes on (the next call leaves no error).
TEST_P(NcclFusedWider, NonFiniteInputIsReportedOnItsRank) {
  const WiderCase& c = GetParam();
  if (c.codec != cclzCodecQgrad || c.count != 4099) GTEST_SKIP() << "one qgrad case";
  const int me = worldRank();
  const cclzCodecConfig_t codec = configOf(c.codec);
  const auto s = reinterpret_cast<cclzStream_t>(comms().stream);
  cclzFeedback_t state = nullptr;
  ASSERT_EQ(cclzFeedbackCreate(&state, c.count, cclzMemoryDevice), cclzSuccess);
  for (bool withNan : {true, false}) {
    std::vector<uint8_t> g =
        makeData(DataKind::kGauss1, cclzBfloat16, c.count, 0, mixSeed(0xBAD, me, withNan));
    if (withNan && me == 0) g[0] = 0xC0, g[1] = 0x7F;  // bf16 quiet NaN (0x7FC0), little-endian
    Device send(g.size()), recv(g.size());
    send.upload(g, comms().stream);
    ASSERT_EQ(cclzAllReduceFeedback(send.ptr, recv.ptr, c.count, cclzBfloat16, cclzSum,
                                    fusedComm(), &codec, state, s),
              cclzSuccess)
        << cclzGetLastError(fusedComm());
    ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
    cclzResult_t async = cclzInternalError;
    EXPECT_EQ(cclzCommGetAsyncError(fusedComm(), &async), cclzSuccess);
    if (withNan && me == 0) {
      EXPECT_EQ(async, cclzInvalidArgument);
      EXPECT_NE(std::string(cclzGetLastError(fusedComm())).find("NaN or Inf"), std::string::npos)
          << cclzGetLastError(fusedComm());
    } else {
      EXPECT_EQ(async, cclzSuccess) << "rank " << me << ": " << cclzGetLastError(fusedComm());
    }
  }
  cclzFeedbackDestroy(state);
}

std::vector<WiderCase> widerCases() {
  std::vector<WiderCase> cases;
  // 1000003: several pieces of CCLZ_PIECE_BYTES=1M, chunks of an all-reduce that differ by one,
  // a reduce-scatter's outputs at odd offsets.
  for (int codec : {cclzCodecFp8, cclzCodecQgrad})
    for (size_t count : {size_t{5}, size_t{4099}, size_t{1000003}}) cases.push_back({codec, count});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(CopyEngines, NcclFusedWider, ::testing::ValuesIn(widerCases()),
                         widerName);

// The lossless all-gather on the kernel path, whose frames vary in size (the push moves the bytes
// each frame's header gives, read on the GPU): every rank's output is every rank's input, bit for
// bit, for compressible values and for incompressible ones (the largest frames), bf16, fp16 and
// fp32, one piece and several (CCLZ_PIECE_BYTES=1M), and with the output at an odd offset
// (decoded through the staging area). The copy engines take fixed-size frames only.
TEST(NcclFusedLossless, AllGatherGivesEveryRanksInputBitForBit) {
  if (copyEngines()) GTEST_SKIP() << "the copy engines take fixed-size frames only";
  const int n = worldSize(), me = worldRank();
  cclzCodecConfig_t lossless = CCLZ_CODEC_CONFIG_INITIALIZER;
  lossless.codec = cclzCodecLossless;
  const auto s = reinterpret_cast<cclzStream_t>(comms().stream);
  for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32})
    for (DataKind kind : {DataKind::kGauss1, DataKind::kRandomBits})
      for (size_t count : {size_t{5}, size_t{4099}, size_t{1000003}})
        for (size_t shift : {size_t{0}, size_t{2}}) {
          SCOPED_TRACE("dtype " + std::to_string(dtype) + ", " + dataKindLabel(kind) + ", count " +
                       std::to_string(count) + ", output at +" + std::to_string(shift));
          const size_t eb = dtype == cclzFloat32 ? 4 : 2;
          std::vector<uint8_t> expected;
          for (int r = 0; r < n; ++r) {
            const std::vector<uint8_t> part = makeData(kind, dtype, count, 0, 31 * dtype + r);
            expected.insert(expected.end(), part.begin(), part.end());
          }
          Device send(count * eb), recv(shift + count * n * eb);
          send.upload(std::vector<uint8_t>(expected.begin() + me * count * eb,
                                           expected.begin() + (me + 1) * count * eb),
                      comms().stream);
          ASSERT_EQ(cclzAllGather(send.ptr, static_cast<uint8_t*>(recv.ptr) + shift, count,
                                  static_cast<cclzDataType_t>(dtype), fusedComm(), &lossless, s),
                    cclzSuccess)
              << cclzGetLastError(fusedComm());
          ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
          const std::vector<uint8_t> got = recv.download();
          EXPECT_TRUE(std::equal(expected.begin(), expected.end(), got.begin() + shift))
              << "rank " << me << ": the output is not every rank's input";
        }
  cclzResult_t async = cclzInternalError;
  EXPECT_EQ(cclzCommGetAsyncError(fusedComm(), &async), cclzSuccess);
  EXPECT_EQ(async, cclzSuccess) << cclzGetLastError(fusedComm());
}

// Nodes of the graph of the driver's node type `type`; -1 where the driver cannot tell.
int nodesOfType(cudaGraph_t graph, CUgraphNodeType type) {
  using NodeType = CUresult (*)(CUgraphNode, CUgraphNodeType*);
  const auto nodeType = driverFunction<NodeType>("cuGraphNodeGetType");
  size_t count = 0;
  if (!nodeType || cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) return -1;
  std::vector<cudaGraphNode_t> nodes(count);
  if (cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) return -1;
  int found = 0;
  for (cudaGraphNode_t node : nodes) {
    CUgraphNodeType t;
    if (nodeType(reinterpret_cast<CUgraphNode>(node), &t) != CUDA_SUCCESS) return -1;
    if (t == type) ++found;
  }
  return found;
}

// One call captured after a direct call of the same size (which grew the window), replayed three
// times on new inputs copied into the captured send buffer: each replay equals the pipeline.
// The graph shows the fused path: the push kernel, or with the copy engines no push kernel and
// the flags' stream memory operations (batch memory operation nodes).
TEST_P(NcclFused, CapturedCallReplaysEqualThePipeline) {
  const FusedCase& c = GetParam();
  const int n = worldSize(), me = worldRank();
  const size_t es = elementSize(c.dtype);
  const cclzCodecConfig_t codec = fp8Config(c.format);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  Device send(c.count * es), recv(c.count * n * es);
  send.upload(inputOf(c, 10), stream);
  ASSERT_EQ(cclzAllGather(send.ptr, recv.ptr, c.count, static_cast<cclzDataType_t>(c.dtype),
                          fusedComm(), &codec, reinterpret_cast<cclzStream_t>(stream)),
            cclzSuccess)
      << cclzGetLastError(fusedComm());  // the warm-up
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const cclzResult_t captured =
      cclzAllGather(send.ptr, recv.ptr, c.count, static_cast<cclzDataType_t>(c.dtype), fusedComm(),
                    &codec, reinterpret_cast<cclzStream_t>(stream));
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(captured, cclzSuccess) << cclzGetLastError(fusedComm());
  const int fusedNodes = kernelNodesNamed(graph, "pushFrameKernel");
  EXPECT_NE(fusedNodes, -1) << "rank " << me << ": no kernel node's name could be read";
  if (copyEngines()) {
    EXPECT_EQ(fusedNodes, 0) << "rank " << me << ": a captured call took the kernel path";
    if (worldSize() > 1)  // a rank alone has no peer to flag
      EXPECT_GE(nodesOfType(graph, CU_GRAPH_NODE_TYPE_BATCH_MEM_OP), 1)
          << "rank " << me << ": the captured call did not take the copy engines' path";
  } else {
    EXPECT_GE(fusedNodes, 1) << "rank " << me << ": the captured call did not take the fused path";
  }
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    const std::vector<uint8_t> in = inputOf(c, 20 + replay);
    send.upload(in, stream);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    const std::vector<uint8_t> fused = recv.download();
    const std::vector<uint8_t> reference = referenceGather(c, in);
    EXPECT_EQ(firstMismatch(fused.data(), reference.data(), fused.size()), SIZE_MAX)
        << "rank " << me << " replay " << replay;
  }
  expectNoAsyncError(fusedComm());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

std::vector<FusedCase> fusedCases() {
  std::vector<FusedCase> cases;
  for (int format : {cclzFp8E4M3, cclzFp8Int8})
    for (int dtype : {cclzBfloat16, cclzFloat32})
      for (size_t count : {size_t{1}, size_t{7}, size_t{4097}, size_t{1000001}})
        cases.push_back({dtype, count, format});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Fp8, NcclFused, ::testing::ValuesIn(fusedCases()), caseName);

// A device communicator with CCLZ_FUSED of the test's own (the mismatch below aborts it).
cclzComm_t makeFusedComm() {
  cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
  config.adaptive = 0;
  setenv("CCLZ_FUSED", fusedMode().c_str(), 1);
  cclzComm_t comm = makeDeviceComm(config);
  unsetenv("CCLZ_FUSED");
  return comm;
}

// The calls took the fused path under test itself, not the pipeline (whose bytes are the same):
// a communicator of the test's own, traced (CCLZ_TRACE=1), makes an fp8 all-gather (and with the
// copy engines a qgrad all-reduce) with stderr led into a file, and the trace names the path.
class NcclFusedPath : public ::testing::TestWithParam<int> {};

// The trace (stderr) of one call on `comm`, waited for.
std::string traceOf(cclzComm_t comm, const std::function<cclzResult_t()>& call) {
  char file[] = "/tmp/cclz-fused-trace-XXXXXX";
  const int fd = mkstemp(file);
  EXPECT_GE(fd, 0);
  if (fd < 0) return "";
  std::fflush(stderr);
  const int saved = dup(2);
  dup2(fd, 2);
  const cclzResult_t r = call();
  const bool synced = cudaStreamSynchronize(comms().stream) == cudaSuccess;
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::string trace;
  if (FILE* f = std::fopen(file, "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f)) trace += line;
    std::fclose(f);
  }
  std::remove(file);
  EXPECT_EQ(r, cclzSuccess) << cclzGetLastError(comm);
  EXPECT_TRUE(synced);
  return trace;
}

TEST_P(NcclFusedPath, CallsTakeTheFusedPath) {
  const int n = worldSize(), me = worldRank();
  // NOTE: set until after the calls: every thread of the library reads it again every 256th
  // look (the checking thread among them), and unset before a call it went off within the call.
  setenv("CCLZ_TRACE", "1", 1);
  cclzComm_t comm = makeFusedComm();
  ASSERT_NE(comm, nullptr);
  const size_t count = 4097;
  const std::vector<uint8_t> in = makeData(DataKind::kGauss1, cclzBfloat16, count * n, 0, 11);
  Device send(in.size()), recv(count * n * 2);
  send.upload(in, comms().stream);
  ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
  const auto s = reinterpret_cast<cclzStream_t>(comms().stream);
  const cclzCodecConfig_t fp8 = fp8Config(cclzFp8E4M3), qgrad = configOf(cclzCodecQgrad);
  const std::string gatherTrace = traceOf(comm, [&] {
    return cclzAllGather(send.ptr, recv.ptr, count, cclzBfloat16, comm, &fp8, s);
  });
  const char* expected =
      copyEngines() ? "fused (copy engines): all-gather of 4097" : "fused: all-gather of 4097";
  EXPECT_NE(gatherTrace.find(expected), std::string::npos)
      << "rank " << me << ": no \"" << expected << "\" in the call's trace:\n"
      << gatherTrace;
  if (copyEngines()) {  // a second call on the same buffers replays the first one's graph
    const std::string again = traceOf(comm, [&] {
      return cclzAllGather(send.ptr, recv.ptr, count, cclzBfloat16, comm, &fp8, s);
    });
    EXPECT_NE(again.find("all-gather of 4097 values per rank, replayed as a graph\n"),
              std::string::npos)
        << "rank " << me << ": the second call was not a replay:\n"
        << again;
  }
  if (!copyEngines()) {  // and the lossless all-gather, whose frames vary in size
    cclzCodecConfig_t lossless = CCLZ_CODEC_CONFIG_INITIALIZER;
    lossless.codec = cclzCodecLossless;
    const std::string losslessTrace = traceOf(comm, [&] {
      return cclzAllGather(send.ptr, recv.ptr, count, cclzBfloat16, comm, &lossless, s);
    });
    EXPECT_NE(losslessTrace.find("fused: all-gather of 4097"), std::string::npos)
        << "rank " << me << ": the lossless all-gather did not take the kernel path:\n"
        << losslessTrace;
  }
  if (copyEngines()) {  // and the all-reduce of the qgrad codec
    const std::string reduceTrace = traceOf(comm, [&] {
      return cclzAllReduce(send.ptr, recv.ptr, count * n, cclzBfloat16, cclzSum, comm, &qgrad, s);
    });
    EXPECT_NE(reduceTrace.find("fused (copy engines): all-reduce of"), std::string::npos)
        << "rank " << me << ": the qgrad all-reduce did not take the copy engines' path:\n"
        << reduceTrace;
  }
  unsetenv("CCLZ_TRACE");
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess) << cclzGetLastError(nullptr);
}

// Without CCLZ_PIECE_BYTES the kernel path takes each rank's block as one piece (up to
// kFusedPieceCap, tune/piece_size.h): its all-gather and reduce-scatter equal the pipeline's on a
// communicator whose piece is the block, and its trace says one piece. (The copy engines keep the
// pipeline's pieces.)
TEST_P(NcclFusedPath, WithoutPieceBytesABlockIsOnePiece) {
  if (copyEngines()) GTEST_SKIP() << "the copy engines' pieces are the pipeline's";
  const int n = worldSize(), me = worldRank();
  const size_t count = 3000000;  // 6 MB of bf16 a rank: six pieces of 1M, one by default
  auto commWith = [&](const char* fused, const char* pieces) {
    cclzCommConfig_t config = CCLZ_COMM_CONFIG_INITIALIZER;
    config.adaptive = 0;
    if (fused) setenv("CCLZ_FUSED", fused, 1);
    if (pieces)
      setenv("CCLZ_PIECE_BYTES", pieces, 1);
    else
      unsetenv("CCLZ_PIECE_BYTES");
    cclzComm_t comm = makeDeviceComm(config);
    unsetenv("CCLZ_FUSED");
    setenv("CCLZ_PIECE_BYTES", "1M", 1);  // main()'s, for the other tests' communicators
    return comm;
  };
  const std::string block = std::to_string(count * 2);
  // Set before the communicators are made, whose creation reads it at once (the library's
  // threads read it again only every 256th look: set just before the call, it may not be on).
  setenv("CCLZ_TRACE", "1", 1);
  cclzComm_t fused = commWith(fusedMode().c_str(), nullptr);
  cclzComm_t onePiece = commWith(nullptr, block.c_str());
  ASSERT_TRUE(fused && onePiece);
  const auto s = reinterpret_cast<cclzStream_t>(comms().stream);
  const cclzCodecConfig_t fp8 = fp8Config(cclzFp8E4M3);

  const std::vector<uint8_t> in = makeData(DataKind::kGauss1, cclzBfloat16, count * n, 0, 21 + me);
  Device send(in.size()), got(count * n * 2), want(count * n * 2);
  send.upload(in, comms().stream);
  ASSERT_EQ(cudaStreamSynchronize(comms().stream), cudaSuccess);
  const std::string trace = traceOf(fused, [&] {
    return cclzAllGather(send.ptr, got.ptr, count, cclzBfloat16, fused, &fp8, s);
  });
  unsetenv("CCLZ_TRACE");
  EXPECT_NE(trace.find("all-gather of 3000000 values per rank, 1 pieces"), std::string::npos)
      << "rank " << me << ":\n" << trace;
  ASSERT_EQ(cclzAllGather(send.ptr, want.ptr, count, cclzBfloat16, onePiece, &fp8, s),
            cclzSuccess);
  EXPECT_EQ(got.download(), want.download()) << "rank " << me << ": the all-gather";

  Device gotRs(count * 2), wantRs(count * 2);
  ASSERT_EQ(cclzReduceScatter(send.ptr, gotRs.ptr, count, cclzBfloat16, cclzSum, fused, &fp8, s),
            cclzSuccess);
  ASSERT_EQ(
      cclzReduceScatter(send.ptr, wantRs.ptr, count, cclzBfloat16, cclzSum, onePiece, &fp8, s),
      cclzSuccess);
  EXPECT_EQ(gotRs.download(), wantRs.download()) << "rank " << me << ": the reduce-scatter";
  EXPECT_EQ(cclzCommDestroy(fused), cclzSuccess) << cclzGetLastError(nullptr);
  EXPECT_EQ(cclzCommDestroy(onePiece), cclzSuccess) << cclzGetLastError(nullptr);
}

INSTANTIATE_TEST_SUITE_P(Fp8, NcclFusedPath, ::testing::Values(0));

// A later call whose count differs on the last rank (its check deferred: the data moves before
// the verdict): the last rank queues one piece, the others two, so the others' second gather
// kernel waits in its barrier for a peer that never comes (with the copy engines: their decode
// stream waits for a flag that never comes). The failed check sets the fused path's abort flag
// (releases the flags) before it aborts NCCL: the wait ends, the stream drains, every rank gets
// the error, and later calls fail. No hang (the stage's timeout would end one).
// NOTE: a parameterized suite (one case) registered after NcclFused and NcclFusedPath, so that
// it runs last: gtest runs the TEST() suites first, and this one aborts a communicator.
class NcclFusedMismatch : public ::testing::TestWithParam<int> {};
TEST_P(NcclFusedMismatch, DeferredCountMismatchEndsWithAnErrorNotAHang) {
  if (worldSize() < 2) GTEST_SKIP() << "a mismatch needs two ranks (a rank alone checks no call)";
  const int n = worldSize(), me = worldRank();
  cclzComm_t comm = makeFusedComm();
  ASSERT_NE(comm, nullptr);
  const cclzCodecConfig_t codec = fp8Config(cclzFp8E4M3);
  const size_t count = size_t{1} << 20;  // 2 MiB of bf16: two pieces of CCLZ_PIECE_BYTES=1M
  const std::vector<uint8_t> in = makeData(DataKind::kGauss1, cclzBfloat16, count, 0, 7);
  Device send(in.size()), recv(count * n * 2);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  send.upload(in, stream);
  const auto s = reinterpret_cast<cclzStream_t>(stream);
  // The first all-gather is checked before its data moves, and agrees.
  ASSERT_EQ(cclzAllGather(send.ptr, recv.ptr, count, cclzBfloat16, comm, &codec, s), cclzSuccess)
      << cclzGetLastError(comm);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const size_t mine = me == n - 1 ? count / 2 : count;
  const cclzResult_t r = cclzAllGather(send.ptr, recv.ptr, mine, cclzBfloat16, comm, &codec, s);
  EXPECT_TRUE(r == cclzSuccess || r == cclzInvalidUsage) << r << ": " << cclzGetLastError(comm);
  cclzResult_t async = cclzSuccess;
  for (int i = 0; i < 6000 && async == cclzSuccess; ++i) {
    EXPECT_EQ(cclzCommGetAsyncError(comm, &async), cclzSuccess);
    if (async == cclzSuccess) usleep(10000);
  }
  EXPECT_EQ(async, cclzInvalidUsage) << cclzGetLastError(comm);
  cudaStreamSynchronize(stream);  // returns: the waiting gather kernel has ended
  cudaGetLastError();
  EXPECT_EQ(cclzAllGather(send.ptr, recv.ptr, count, cclzBfloat16, comm, &codec, s),
            cclzInvalidUsage);
  EXPECT_EQ(cclzCommDestroy(comm), cclzSuccess) << cclzGetLastError(nullptr);
  cudaStreamDestroy(stream);
}

INSTANTIATE_TEST_SUITE_P(Fp8, NcclFusedMismatch, ::testing::Values(0));

}  // namespace
}  // namespace cclz::test

int main(int argc, char** argv) {
  using namespace cclz::test;
  // 1 MiB pieces: the 1000001-value cases run several pieces, fp32 more than the window's slot
  // sets (so that a set is reused within a call).
  if (const char* mode = std::getenv("CCLZ_FUSED");
      mode && (std::string(mode) == "ce" || std::string(mode) == "direct"))
    fusedMode() = mode;
  unsetenv("CCLZ_FUSED");
  if (const int skip = startNcclTests(&argc, argv, "1M")) return skip;
  fusedComm();
  const bool passed = allRanks(RUN_ALL_TESTS() == 0);
  cclzCommDestroy(fusedComm());
  cclzCommDestroy(comms().device);
  cclzCommDestroy(comms().host);
  MPI_Finalize();
  return passed ? 0 : 1;
}
