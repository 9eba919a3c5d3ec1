#include "overlap/overlap_call.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "codec/codec.h"
#include "collective/communicator.h"
#include "collective/descriptor.h"
#include "collective/plan.h"
#include "common/dtype.h"
#include "common/error.h"
#include "overlap/device_overlap.h"
#include "overlap/host_gemm.h"
#include "tune/tuner.h"

namespace cclz::overlap {
namespace {

// The call's own checks, before the peers': what this rank can tell alone.
void validate(Transport& t, CollOp op, const OverlapCall& call, const cclzCodecConfig_t* codec) {
  CCLZ_REQUIRE(call.a && call.b && call.c, cclzInvalidArgument, "a, b and c must not be NULL");
  CCLZ_REQUIRE(call.m > 0 && call.n > 0 && call.k > 0, cclzInvalidArgument,
               "m, n and k must be above zero");
  CCLZ_REQUIRE(call.dtype == cclzBfloat16 || call.dtype == cclzFloat16 || call.dtype == cclzFloat32,
               cclzInvalidArgument, "dtype: the overlapped GEMMs take bf16, fp16 or fp32");
  CCLZ_REQUIRE(op != CollOp::MatmulReduceScatter || call.redOp == cclzSum || call.redOp == cclzAvg,
               cclzInvalidArgument, "op: cclzSum or cclzAvg");
  CCLZ_REQUIRE(!codec || codec->codec == cclzCodecNone || codec->codec == cclzCodecFp8,
               cclzInvalidArgument, "codec: NULL, none or fp8 (activations' codec)");
  const uint64_t limit = UINT64_MAX / 16 / static_cast<uint64_t>(t.size());
  CCLZ_REQUIRE(call.m < limit / call.k && call.m < limit / call.n && call.n < limit / call.k,
               cclzInvalidArgument, "m, n and k are too large for this communicator");
}

CallDescriptor describe(Transport& t, CollOp op, const OverlapCall& call,
                        const cclzCodecConfig_t& config, bool rejected) {
  CallDescriptor d{};
  d.magic = kDescriptorMagic;
  d.version = kDescriptorVersion;
  d.op = static_cast<uint8_t>(op);
  d.dtype = static_cast<uint8_t>(call.dtype);
  d.redOp = op == CollOp::MatmulReduceScatter ? static_cast<uint8_t>(call.redOp + 1) : 0;
  d.codec = static_cast<uint8_t>(config.codec);
  d.rejected = rejected;
  d.memory = static_cast<uint8_t>(t.memory());
  d.peer = -1;
  d.ranks = t.size();
  d.count = call.m;
  d.configHash = configHash(config);
  d.gemmCols = call.n;
  d.gemmInner = static_cast<uint32_t>(std::min<uint64_t>(call.k, UINT32_MAX));
  d.gemmTransB = call.transB ? 1 : 0;
  return d;
}

// The pairs of trials of an overlapped call's kind: four timed calls each way, twice the
// collectives' (whose two paths differ by up to 10x over NVLink). The two ways of an overlapped
// call are often a few percent apart, less than a socket's time varies from call to call
// (10-20%), and two timed calls each way picked the slower at 5 of 8 shapes there; a kind is
// a GEMM of milliseconds, called thousands of times, so the trials cost little.
constexpr int kOverlapTrialPairs = 5;

// The tuner's key of an overlapped call (docs/overlap.md, "Adaptive calls"): the op, the dtype,
// the codec's configuration with the GEMM's shape, and the octave of a rank's chunk.
TuneKey overlapKey(CollOp op, const OverlapCall& call, const cclzCodecConfig_t& config) {
  TuneKey key;
  key.op = static_cast<uint8_t>(op);
  key.dtype = static_cast<uint8_t>(call.dtype);
  key.codec = static_cast<uint8_t>(config.codec);
  uint64_t h = configHash(config);
  for (uint64_t v : {call.n, call.k, uint64_t{call.transB}}) h = (h ^ v) * 0x100000001b3ULL;
  key.configHash = h;
  const uint64_t es = dtypeSize(static_cast<cclzDataType_t>(call.dtype));
  key.sizeClass = Tuner::sizeClass(call.m * (op == CollOp::AllGatherMatmul ? call.k : call.n) * es);
  return key;
}

// The same work serially, as a framework runs it without overlap: the all-gather (through the
// communicator's collective with the call's codec, itself adaptive) and then one GEMM of the
// whole gathered matrix; or one GEMM of the whole product and then its reduce-scatter. The
// collective is this call's: checked with it, not again. Its path is the call's last path.
void runSerial(Communicator& comm, CollOp op, const OverlapCall& call, cclzStream_t stream) {
  Transport& t = comm.transport();
  const uint64_t es = dtypeSize(static_cast<cclzDataType_t>(call.dtype));
  const uint64_t rows = t.size() * call.m;
  const bool gather = op == CollOp::AllGatherMatmul;
  // The product a reduce-scatter reduces, or the gathered matrix the caller did not ask for.
  const uint64_t scratchBytes = rows * es * (gather ? (call.gathered ? 0 : call.k) : call.n);
  std::vector<uint8_t> hostScratch;
  uint8_t* scratch = nullptr;
#ifdef CCLZ_HAVE_CUDA
  DeviceOverlap* device = t.memory() == MemoryKind::Device ? &comm.deviceOverlap() : nullptr;
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  if (device) scratch = device->beginSerial(s, scratchBytes);
#endif
  if (t.memory() == MemoryKind::Host) {
    hostScratch.resize(scratchBytes);
    scratch = hostScratch.data();
  }
  void* product = gather && call.gathered ? call.gathered : scratch;

  CollArgs a;
  a.op = gather ? CollOp::AllGather : CollOp::ReduceScatter;
  a.send = gather ? call.a : product;
  a.recv = gather ? product : call.c;
  a.count = call.m * (gather ? call.k : call.n);
  a.dtype = call.dtype;
  a.redOp = call.redOp;
  a.codec = call.codec ? &call.config : nullptr;
  a.stream = stream;
  // The whole product: rows x n, row-major (with the all-gather's bias).
  const GemmArgs g =
      rowsGemm(call, gather ? product : call.a, rows, gather ? call.c : product);
  auto collective = [&] { runChosenPath(comm, a, makePlan(comm, a)); };
  auto gemm = [&] {
#ifdef CCLZ_HAVE_CUDA
    if (device) return device->wholeGemm(g, s);
#endif
    gemmHost(g);
  };
  if (gather) collective();
  gemm();
  if (!gather) collective();
#ifdef CCLZ_HAVE_CUDA
  if (device) device->endSerial(s);
#endif
}

// The call as asked: its schedule, overlapped.
void runOverlapped(Communicator& comm, CollOp op, const OverlapCall& call, cclzStream_t stream) {
  Transport& t = comm.transport();
  if (t.memory() == MemoryKind::Device) {
#ifdef CCLZ_HAVE_CUDA
    DeviceOverlap& device = comm.deviceOverlap();
    const auto s = reinterpret_cast<cudaStream_t>(stream);
    if (op == CollOp::AllGatherMatmul)
      device.allGatherMatmul(t, call, s);
    else
      device.matmulReduceScatter(t, call, s);
#endif
    return;
  }
  if (op == CollOp::AllGatherMatmul)
    allGatherMatmulHost(t, call);
  else
    matmulReduceScatterHost(t, call);
}

}  // namespace

void runOverlapCall(Communicator& comm, CollOp op, OverlapCall call, const cclzCodecConfig_t* codec,
                    cclzStream_t stream) {
  const std::lock_guard<std::timed_mutex> lock(comm.callMutex());
  comm.throwIfCheckFailed();
  Transport& t = comm.transport();
  const cclzCodecConfig_t config = codec ? *codec : noneConfig();
  std::exception_ptr rejected;
  try {
    validate(t, op, call, codec);
    if (t.memory() == MemoryKind::Device && config.codec == cclzCodecFp8) {
      // The device decoder stores 16 bytes at a time, into chunks of the gathered matrix.
      const uint64_t es = dtypeSize(static_cast<cclzDataType_t>(call.dtype));
      CCLZ_REQUIRE(
          (op == CollOp::AllGatherMatmul ? call.m * call.k : call.m * call.n) * es % 16 == 0 &&
              reinterpret_cast<uintptr_t>(op == CollOp::AllGatherMatmul ? call.gathered : call.c) %
                      16 ==
                  0,
          cclzInvalidArgument,
          "with the fp8 codec on a device communicator, a chunk (m rows) must fill whole "
          "16-byte words and the gathered matrix (all-gather) or c (reduce-scatter) "
          "must be 16-byte aligned");
    }
    if (config.codec == cclzCodecFp8) {
      call.codec = &codecFor(cclzCodecFp8);
      call.codec->validateConfig(config);
      rejectForeignFields(config);
      call.config = config;
    }
  } catch (...) {
    rejected = std::current_exception();
  }
  // The collectives' call check (plan.cpp): now at the first call of each op, later ones handed
  // to the checking thread where the communicator has one (CCLZ_CHECK_CALLS=deferred), so that a
  // call does not wait for a round trip to its peers. Every rank sends its descriptor, a rank
  // that rejected its arguments too, so that its peers fail instead of waiting for its data.
  const CallDescriptor mine = describe(t, op, call, config, rejected != nullptr);
  const CheckWhen check = comm.checkWhen(op);
  if (check == CheckWhen::Deferred)
    comm.deferredChecks().queue(mine, DeferredChecks::kEveryPeer, op);
  if (check == CheckWhen::Now) {
    CollArgs all;  // an all-gather's peers: every other rank
    const std::string verdict = checkWithPeers(comm, mine, peersOf(all, t.size(), t.rank()));
    if (rejected) std::rethrow_exception(rejected);
    CCLZ_REQUIRE(verdict.empty(), cclzInvalidUsage, std::string(collOpName(op)) + ": " + verdict);
  }
  if (rejected) std::rethrow_exception(rejected);
  // Across nodes, a reduce-scatter with a codec adds inside each node before crossing it
  // (CCLZ_TWO_LEVEL, agreed by every rank when the communicator was made).
  if (comm.settings().twoLevel) call.nodes = &comm.nodes();
#ifdef CCLZ_HAVE_CUDA
  if (t.memory() == MemoryKind::Device) {
    DeviceOverlap& device = comm.deviceOverlap();
    if (device.copyUndecided()) {
      // The first overlapped call, checked with its peers already (the first call of an op is
      // checked before its data): every rank is here, and decides alike.
      const auto s = reinterpret_cast<cudaStream_t>(stream);
      const std::string here = device.copyEnginesHere(t, s);
      device.decideCopy(t, everyRankCan(comm, here.empty()), here);
    }
  }
#endif
  // An adaptive communicator runs the call overlapped or serially, whichever its first calls of
  // the kind measured faster on the slowest rank (overlapped only where it wins by more than
  // Tuner::kMargin): serial where the GEMM's chunks lose more than the transfers hide (NVLink),
  // overlapped where they hide a slow network.
  if (!comm.tuner()) {
    runOverlapped(comm, op, call, stream);
    comm.setLastPath(Path::Compressed, true);
    return;
  }
  const TunedNames names{collOpName(op), "overlapped", "serial"};
  const Tuner::Call chosen = runTuned(comm, overlapKey(op, call, config), kOverlapTrialPairs,
                                      stream, names, [&](Path path) {
                                        if (path == Path::Plain)
                                          runSerial(comm, op, call, stream);
                                        else
                                          runOverlapped(comm, op, call, stream);
                                      });
  if (chosen.path == Path::Plain)
    comm.setLastPath(comm.lastPath(), chosen.decided, true);
  else
    comm.setLastPath(Path::Compressed, chosen.decided);
}

}  // namespace cclz::overlap
