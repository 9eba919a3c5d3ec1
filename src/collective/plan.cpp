// runCollective: validates a call, checks it against the peers' calls, sizes the scratch and
// runs the algorithm. Local validation errors do not return at once: the rank still takes part
// in the descriptor exchange, marked as rejected, so that its peers fail too instead of waiting.
#include "collective/plan.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "collective/plan_memo.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/trace.h"

#ifdef CCLZ_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "codec/device.h"
#endif

namespace cclz {
namespace {

bool isDeviceMemory(const void* p) {
#ifdef CCLZ_HAVE_CUDA
  // The driver's answer costs a good part of a small call's host time (two per call), and
  // training passes the same buffers again and again: the last device pointers are
  // remembered per thread. Only device verdicts are: a host address never becomes device memory,
  // and a device one freed and handed out again as pinned host memory (the one case the cache
  // answers wrongly) stays addressable by the GPU, so the call still moves the right bytes.
  constexpr int kRemembered = 8;
  thread_local const void* remembered[kRemembered] = {};
  thread_local int next = 0;
  for (const void* r : remembered)
    if (r == p) return true;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  const bool device = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
  if (device) {
    remembered[next] = p;
    next = (next + 1) % kRemembered;
  }
  return device;
#else
  (void)p;
  return false;
#endif
}

bool reduces(CollOp op) { return op == CollOp::ReduceScatter || op == CollOp::AllReduce; }

}  // namespace

cclzCodecConfig_t noneConfig() {
  cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
  c.codec = cclzCodecNone;
  return c;
}

namespace {

void checkBuffer(const Transport& t, const void* p, uint64_t elems, uint64_t elemBytes,
                 const char* what) {
  if (elems == 0) return;
  CCLZ_REQUIRE(p, cclzInvalidArgument, std::string(what) + " is NULL");
  CCLZ_REQUIRE(reinterpret_cast<uintptr_t>(p) % elemBytes == 0, cclzInvalidArgument,
               std::string(what) + " is not aligned to the element size");
  const bool device = isDeviceMemory(p);
  if (t.memory() == MemoryKind::Device)
    CCLZ_REQUIRE(device, cclzInvalidArgument,
                 std::string(what) + " must be device memory on a device (NCCL) communicator");
  else
    CCLZ_REQUIRE(!device, cclzInvalidArgument,
                 std::string(what) + " must be host memory on a host (MPI) communicator");
}

}  // namespace

Plan makePlan(Communicator& comm, const CollArgs& a) {
  Transport& t = comm.transport();
  const int n = t.size(), me = t.rank();
  Plan plan;
  plan.use.config = a.codec ? *a.codec : noneConfig();
  const cclzCodecConfig_t& config = plan.use.config;
  if (a.codec)
    CCLZ_REQUIRE(config.magic == CCLZ_CONFIG_MAGIC && config.size == sizeof(cclzCodecConfig_t) &&
                     config.version / 100 == CCLZ_VERSION_CODE / 100,
                 cclzInvalidArgument,
                 "codec config was not initialized with CCLZ_CODEC_CONFIG_INITIALIZER");
  plan.use.codec = &codecFor(config.codec);
  plan.use.codec->validateConfig(config);
  const auto dtype = static_cast<cclzDataType_t>(a.dtype);
  plan.use.dtype = a.dtype;
  plan.elemBytes = dtypeSize(dtype);
  CCLZ_REQUIRE(plan.elemBytes != 0, cclzInvalidArgument, "unknown dtype");
  plan.use.codec->checkDtype(a.dtype);
  if (reduces(a.op)) {
    CCLZ_REQUIRE(dtype == cclzBfloat16 || dtype == cclzFloat16 || dtype == cclzFloat32,
                 cclzNotSupported,
                 std::string("reductions take bf16, fp16 or fp32, not ") + dtypeName(dtype));
    CCLZ_REQUIRE(a.redOp == cclzSum || a.redOp == cclzAvg, cclzInvalidArgument,
                 "the reduction must be cclzSum or cclzAvg");
  }
  CCLZ_REQUIRE(a.count <= (uint64_t{1} << 40) / static_cast<uint64_t>(n), cclzInvalidArgument,
               "count too large");

  const uint64_t count = a.count;
  plan.chunks.reserve(n);  // one allocation, not one per doubling
  switch (a.op) {
    case CollOp::AllGather:
      plan.sendElems = count, plan.recvElems = count * n;
      for (int r = 0; r < n; ++r) plan.chunks.push_back({r * count, count});
      break;
    case CollOp::ReduceScatter:
      plan.sendElems = count * n, plan.recvElems = count;
      for (int r = 0; r < n; ++r) plan.chunks.push_back({r * count, count});
      break;
    case CollOp::AllReduce:
      plan.sendElems = plan.recvElems = count;
      for (int r = 0; r < n; ++r) plan.chunks.push_back(evenShare(count, n, r));
      break;
    case CollOp::AllToAll:
      plan.sendElems = plan.recvElems = count * n;
      for (int r = 0; r < n; ++r) plan.chunks.push_back({r * count, count});
      break;
    case CollOp::Send:
    case CollOp::Recv:
      CCLZ_REQUIRE(a.peer >= 0 && a.peer < n, cclzInvalidArgument,
                   "peer " + std::to_string(a.peer) + " is not a rank of the communicator (0.." +
                       std::to_string(n - 1) + ")");
      CCLZ_REQUIRE(a.peer != me, cclzInvalidArgument,
                   "a rank cannot send to or receive from itself (copy the buffer instead)");
      (a.op == CollOp::Send ? plan.sendElems : plan.recvElems) = count;
      plan.chunks.assign(n, Span{0, 0});
      plan.chunks[a.peer] = {0, count};
      break;
    case CollOp::AllGatherMatmul:
    case CollOp::MatmulReduceScatter:
      CCLZ_FAIL(cclzInternalError, "the overlapped GEMMs are not collectives (src/overlap)");
  }
  checkBuffer(t, a.send, plan.sendElems, plan.elemBytes, "sendbuff");
  checkBuffer(t, a.recv, plan.recvElems, plan.elemBytes, "recvbuff");

  const bool feedback = static_cast<bool>(a.residual) || a.step != nullptr;
  if (feedback) {
    CCLZ_REQUIRE(reduces(a.op), cclzInvalidArgument,
                 "error feedback is for reduce-scatter and all-reduce");
    CCLZ_REQUIRE(plan.use.codec->hasFeedback(), cclzNotSupported,
                 std::string("the ") + plan.use.codec->name() +
                     " codec has no error feedback (qgrad has)");
    CCLZ_REQUIRE(a.residualCount == plan.sendElems, cclzInvalidArgument,
                 "the feedback state holds " + std::to_string(a.residualCount) +
                     " elements, the call sends " + std::to_string(plan.sendElems));
    CCLZ_REQUIRE((a.residualMemory == cclzMemoryDevice) == (t.memory() == MemoryKind::Device),
                 cclzInvalidArgument,
                 t.memory() == MemoryKind::Device
                     ? "a device communicator takes device feedback state (cclzMemoryDevice)"
                     : "a host communicator takes host feedback state (cclzMemoryHost)");
  }

  uint64_t largest = 0;
  for (const Span& c : plan.chunks) largest = std::max(largest, c.count);
  const uint64_t pieceBytes =
      pieceBytesFor(comm.settings().pieceBytes, largest * plan.elemBytes, t.size());
  plan.pieceElems = wholeUnits(std::max<uint64_t>(1, pieceBytes / plan.elemBytes),
                               plan.use.codec->pieceAlignment(plan.use.config), largest);
  return plan;
}

namespace {

CallDescriptor describe(const Communicator& comm, const CollArgs& a, const Plan& plan,
                        bool rejected) {
  CallDescriptor d{};
  d.magic = kDescriptorMagic;
  d.version = kDescriptorVersion;
  d.op = static_cast<uint8_t>(a.op);
  d.dtype = static_cast<uint8_t>(a.dtype);
  d.redOp = reduces(a.op) ? static_cast<uint8_t>(a.redOp + 1) : 0;
  d.codec = static_cast<uint8_t>(plan.use.config.codec);
  d.feedback = a.step != nullptr;
  d.rejected = rejected;
  d.memory = static_cast<uint8_t>(const_cast<Communicator&>(comm).transport().memory());
  d.peer = a.op == CollOp::Send || a.op == CollOp::Recv ? a.peer : -1;
  d.ranks = const_cast<Communicator&>(comm).transport().size();
  d.count = a.count;
  d.pieceElems = plan.pieceElems;
  d.configHash = configHash(plan.use.config);
  return d;
}

}  // namespace

// Sends `d` bytes at `mine` to `peers` and receives theirs: one all-gather when the peers are
// every other rank, else a pair of messages per peer. Returns n blocks of d bytes, by rank (this
// rank's and its peers' filled). A device communicator exchanges over its control mesh, never
// over NCCL (deferred_checks.h says why); a host transport moves the bytes itself.
std::vector<uint8_t> exchangeWithPeers(Communicator& comm, const void* mine, uint64_t d,
                                       const std::vector<int>& peers) {
  // The checking thread owns the control mesh: this exchange waits its turn there.
  if (comm.checksOnThread()) return comm.deferredChecks().exchangeNow(mine, d, peers);
  Transport& t = comm.transport();
  if (t.controlMesh()) return comm.exchangeOnCaller(mine, d, peers);
  CCLZ_REQUIRE(t.memory() == MemoryKind::Host, cclzInternalError,
               "a device transport without a control mesh");
  const int n = t.size(), me = t.rank();
  std::vector<uint8_t> own(static_cast<const uint8_t*>(mine), static_cast<const uint8_t*>(mine) + d);
  std::vector<uint8_t> all(n * d, 0);
  if (static_cast<int>(peers.size()) == n - 1) {
    t.allGather(own.data(), all.data(), d, nullptr);
  } else {
    t.groupStart(nullptr);
    for (int r : peers) {
      t.send(own.data(), d, r);
      t.recv(all.data() + r * d, d, r, nullptr);
    }
    t.groupEnd();
  }
  std::memcpy(all.data() + me * d, mine, d);
  return all;
}

bool everyRankCan(Communicator& comm, bool mine) {
  const int n = comm.transport().size(), me = comm.transport().rank();
  std::vector<int> peers;
  for (int r = 0; r < n; ++r)
    if (r != me) peers.push_back(r);
  const uint64_t word = mine ? 1 : 0;
  const std::vector<uint8_t> bytes = exchangeWithPeers(comm, &word, sizeof word, peers);
  for (int r = 0; r < n; ++r) {
    uint64_t theirs = 0;
    std::memcpy(&theirs, bytes.data() + r * sizeof word, sizeof word);
    if (theirs != 1) return false;
  }
  return true;
}

// The ranks a call exchanges with: its peer for send/recv, else every other rank.
std::vector<int> peersOf(const CollArgs& a, int n, int me) {
  if (a.op == CollOp::Send || a.op == CollOp::Recv) return {a.peer};
  std::vector<int> peers;
  peers.reserve(n - 1);
  for (int r = 0; r < n; ++r)
    if (r != me) peers.push_back(r);
  return peers;
}

std::string checkWithPeers(Communicator& comm, const CallDescriptor& mine,
                           const std::vector<int>& peers) {
  const int me = comm.transport().rank();
  const std::vector<uint8_t> bytes = exchangeWithPeers(comm, &mine, sizeof mine, peers);
  std::vector<CallDescriptor> all(bytes.size() / sizeof mine);
  std::memcpy(all.data(), bytes.data(), bytes.size());
  std::vector<int> ranks = peers;
  ranks.push_back(me);
  std::sort(ranks.begin(), ranks.end());
  return compareDescriptors(all, ranks);
}

// The codec none over a transport with collectives of its own: plain data gains nothing from the
// pipeline, and the network's tuned algorithm is what the caller would get without cclz. False
// where the transport has no such collective for the call (MPI: messages above its int counts,
// overlapping buffers it cannot take): the pipeline runs instead.
// Queued on `stream`: the caller's own, or the engine's move stream for a proxy's job.
bool runNative(Transport& t, const CollArgs& a, const Plan& plan, cclzStream_t stream) {
  const int n = t.size();
  const uint64_t bytes = a.count * plan.elemBytes;
  const bool average = a.redOp == cclzAvg;
  auto at = [&](const void* base, uint64_t elem) {
    return static_cast<const uint8_t*>(base) + elem * plan.elemBytes;
  };
  switch (a.op) {
    case CollOp::ReduceScatter:
      return t.reduceScatter(a.send, a.recv, a.count, a.dtype, average, stream);
    case CollOp::AllReduce:
      return t.allReduce(a.send, a.recv, a.count, a.dtype, average, stream);
    default:
      break;
  }
  if (bytes > t.maxMessageBytes()) return false;
  if (bytes == 0) return true;
  switch (a.op) {
    case CollOp::AllGather:
      t.allGather(a.send, a.recv, bytes, stream);
      return true;
    case CollOp::AllToAll:
      t.groupStart(stream);
      for (int r = 0; r < n; ++r) {
        t.send(at(a.send, r * a.count), bytes, r);
        t.recv(const_cast<uint8_t*>(at(a.recv, r * a.count)), bytes, r, nullptr);
      }
      t.groupEnd();
      return true;
    case CollOp::Send:
    case CollOp::Recv:
      t.groupStart(stream);
      if (a.op == CollOp::Send)
        t.send(a.send, bytes, a.peer);
      else
        t.recv(a.recv, bytes, a.peer, nullptr);
      t.groupEnd();
      return true;
    default:
      return false;
  }
}

// Whether a call runs two-level (two_level.cpp): an all-gather, reduce-scatter or all-reduce
// (with error feedback too), through a codec of fixed frame size (not none: its reductions are
// exact sums in rank order), on a communicator with two-level calls on (CCLZ_TWO_LEVEL, the
// default) whose ranks span nodes of several ranks each. The same answer on every rank: the
// layout and the setting are, and the call's op and codec are checked equal.
bool runsTwoLevel(Communicator& comm, const CollArgs& a, const Plan& plan) {
  if (!comm.settings().twoLevel || !comm.nodes().twoLevel() ||
      plan.use.config.codec == cclzCodecNone ||
      !plan.use.codec->fixedFrameSize())
    return false;
  return a.op == CollOp::AllGather || a.op == CollOp::ReduceScatter ||
         a.op == CollOp::AllReduce;
}

void runPlan(Communicator& comm, const CollArgs& a, const Plan& plan, uint64_t stride) {
  Transport& t = comm.transport();
  Engine& e = comm.engine();
  const int n = t.size(), me = t.rank();
  Pipeline p{t, e, plan.use, n, me, plan.elemBytes, plan.pieceElems, stride,
             plan.use.codec->fixedFrameSize()};
  const float divisor = a.redOp == cclzAvg && reduces(a.op) ? static_cast<float>(n) : 1.0f;
  const bool twoLevel = runsTwoLevel(comm, a, plan);
  switch (a.op) {
    case CollOp::AllGather:
      if (twoLevel)
        gatherPiecesTwoLevel(p, comm.nodes(), a.send, a.recv, plan.chunks);
      else
        gatherPieces(p, a.send, a.recv, plan.chunks);
      break;
    case CollOp::ReduceScatter:
      if (twoLevel)
        reducePiecesTwoLevel(p, comm.nodes(), a.send, a.recv, plan.chunks, divisor, a.residual,
                             a.step ? *a.step : 0);
      else
        reducePieces(p, a.send, a.recv, plan.chunks, divisor, a.residual, a.step ? *a.step : 0);
      break;
    case CollOp::AllReduce: {
      // Reduce-scatter into this rank's shard, then all-gather the shards (re-encoded once).
      uint8_t* shard = e.area(Area::Shard);
      if (twoLevel)
        reducePiecesTwoLevel(p, comm.nodes(), a.send, shard, plan.chunks, divisor, a.residual,
                             a.step ? *a.step : 0);
      else
        reducePieces(p, a.send, shard, plan.chunks, divisor, a.residual, a.step ? *a.step : 0);
      e.join();
      if (twoLevel)
        gatherPiecesTwoLevel(p, comm.nodes(), shard, a.recv, plan.chunks);
      else
        gatherPieces(p, shard, a.recv, plan.chunks);
      const Span own = plan.chunks[me];
      if (a.step && own.count)
        e.foldError(a.residual.at(own.offset), shard, p.at(a.recv, own.offset), own.count, a.dtype,
                    divisor);
      break;
    }
    case CollOp::AllToAll:
      allToAllPieces(p, a.send, a.recv, a.count);
      break;
    case CollOp::Send:
      sendPieces(p, a.send, a.count, a.peer);
      break;
    case CollOp::Recv:
      recvPieces(p, a.recv, a.count, a.peer);
      break;
    case CollOp::AllGatherMatmul:
    case CollOp::MatmulReduceScatter:
      CCLZ_FAIL(cclzInternalError, "the overlapped GEMMs are not collectives (src/overlap)");
  }
}

namespace {

// The largest f(count) over the piece sizes of this call: whole pieces and each chunk's last,
// shorter one (a codec's sizes need not grow with the count: lossless picks its chunking by it).
template <typename F>
uint64_t worstPiece(const Plan& plan, F&& f) {
  uint64_t worst = f(plan.pieceElems);
  for (const Span& c : plan.chunks)
    if (c.count % plan.pieceElems) worst = std::max(worst, f(c.count % plan.pieceElems));
  return worst;
}

}  // namespace

// The bytes of one frame slot.
uint64_t frameStride(const Plan& plan) {
  const uint64_t worst = worstPiece(plan, [&](uint64_t count) {
    return plan.use.codec->maxEncodedBytes(plan.use.config, plan.use.dtype, count);
  });
  return (worst + 255) / 256 * 256;  // keeps every slot 256-byte aligned
}

// The scratch of a call's data part.
void dataBytes(const CollArgs& a, const Plan& plan, int n, int me, MemoryKind memory,
               uint64_t stride, uint64_t* bytes) {
  const uint64_t slots = static_cast<uint64_t>(kSlots) * n * stride;
  bytes[static_cast<int>(Area::SendFrames)] = slots;
  bytes[static_cast<int>(Area::RecvFrames)] = slots;
  bytes[static_cast<int>(Area::Sizes)] = kSlots * 2 * n * sizeof(uint64_t);
  if (reduces(a.op))
    bytes[static_cast<int>(Area::Accumulator)] =
        kSlots * Pipeline::accumulatorStride(plan.pieceElems) * sizeof(float);
  if (a.op == CollOp::AllReduce)
    bytes[static_cast<int>(Area::Shard)] = plan.chunks[me].count * plan.elemBytes;
#ifdef CCLZ_HAVE_CUDA
  if (memory == MemoryKind::Device) {
    bytes[static_cast<int>(Area::Decoded)] = plan.pieceElems * plan.elemBytes;
    if (a.step) bytes[static_cast<int>(Area::Residual)] = plan.pieceElems * sizeof(float);
    // A reduction's and an all-to-all's piece encode their blocks as one batch
    // (Engine::encodeBlocks).
    const size_t blocks = reduces(a.op) || a.op == CollOp::AllToAll ? n : 1;
    bytes[static_cast<int>(Area::CodecScratch)] = worstPiece(plan, [&](uint64_t count) {
      return plan.use.codec->encodeBlocksScratchBytes(plan.use.config, plan.use.dtype, count,
                                                      blocks);
    });
  }
#else
  (void)memory;
#endif
}

// The data part of a checked call: the network's own collective (codec none) or the pipeline.
// startEvent NULL: on the caller's thread, after and before a.stream (begin/end). Otherwise a
// queued call on the proxy thread: after that event, and the proxy joins it (endJoined).
void runData(Communicator& comm, const CollArgs& a, const Plan& plan, uint64_t stride,
             void* startEvent) {
  Transport& t = comm.transport();
  Engine& e = comm.engine();
  const bool none = plan.use.config.codec == cclzCodecNone;
  // Plain data on the caller's thread goes straight onto the caller's stream, as a call to the
  // network itself would: joining the engine's streams would cost four event operations.
  if (none && !startEvent && runNative(t, a, plan, a.stream)) {
    if (a.step) ++*a.step;
    return;
  }
  // The fused NVLink path (CCLZ_FUSED=1 or ce), where it takes the call: straight on the caller's
  // stream, no engine streams, no NCCL kernel. It stands in for the codec's pipeline, so an
  // adaptive communicator's compressed trials time it against plain data. Not on the proxy
  // (asyncCalls): the proxy's jobs run on the engine's streams after an event.
  if (!none && !startEvent && comm.fused() && comm.fused()->takes(a, plan)) {
    CCLZ_TRACE("%s: fused NVLink path", collOpName(a.op));
    comm.fused()->run(a, plan);
    if (a.step) ++*a.step;  // error feedback (CCLZ_FUSED=ce): as the pipeline's calls advance it
    return;
  }
  // The two-level reduce-scatter (an all-reduce's first phase too) moves raw pieces through its
  // slots, and encodes its node's sums from an area of one piece.
  const bool rawSlots = a.op != CollOp::AllGather && runsTwoLevel(comm, a, plan);
  if (rawSlots) stride = std::max(stride, (plan.pieceElems * plan.elemBytes + 255) / 256 * 256);
  uint64_t bytes[static_cast<int>(Area::Count)] = {};
  dataBytes(a, plan, t.size(), t.rank(), e.memory(), stride, bytes);
  if (rawSlots) bytes[static_cast<int>(Area::Partial)] = plan.pieceElems * plan.elemBytes;
  e.reserve(bytes);
  if (startEvent)
    e.beginAfter(startEvent);
  else
    e.begin(a.stream);
  try {
    bool done = false;
    if (none && startEvent) {
      e.stage(Stage::Move, kNoSlot);
      done = runNative(t, a, plan, e.moveStream());
    }
    if (!done) runPlan(comm, a, plan, stride);
    if (a.step) ++*a.step;
    if (!startEvent) e.end();
  } catch (...) {
    e.abandon();
    throw;
  }
}

namespace {

#ifdef CCLZ_HAVE_CUDA
// With asyncCalls a call's work is queued later, by the proxy thread, after an event recorded on
// the caller's stream: a graph captured from that stream would hold the event and nothing else.
void refuseCapture(cclzStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CCLZ_CUDA_CHECK(cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &status));
  CCLZ_REQUIRE(status == cudaStreamCaptureStatusNone, cclzInvalidUsage,
               "the stream is being captured into a CUDA graph, and with asyncCalls a call's "
               "work is queued later by the proxy thread: capture on a communicator without "
               "asyncCalls");
}

// What a queued call keeps: copies of its arguments and plan (the codec configuration by value;
// the buffers and the feedback residual are the caller's, as for any stream-ordered call), the
// step its draws use, its start event (per call: the engine's own would be overwritten by the
// next call) and its ticket (done_events.h).
struct QueuedCall {
  CollArgs args;
  Plan plan;
  uint64_t stride = 0;
  uint64_t step = 0;
  cudaEvent_t start = nullptr;
  uint64_t ticket = 0;
};

// An event recorded on `stream` now, destroyed with its last reference.
DoneEvents::Event recordDone(cclzStream_t stream) {
  cudaEvent_t done = nullptr;
  CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  DoneEvents::Event event(done, [](void* e) { cudaEventDestroy(static_cast<cudaEvent_t>(e)); });
  CCLZ_CUDA_CHECK(cudaEventRecord(done, reinterpret_cast<cudaStream_t>(stream)));
  return event;
}

// On the proxy thread. Whatever happens, the call's ticket is published, so that
// cclzCommStreamWait returns: with its done event after the call's work on the engine's joined
// stream, or without one where that cannot be recorded (the error is then the communicator's).
void runQueued(Communicator& comm, QueuedCall& call) noexcept {
  const std::string op = collOpName(call.args.op);
  const auto ticket = static_cast<unsigned long long>(call.ticket);
  CCLZ_TRACE("proxy: call %llu (%s) starts", ticket, op.c_str());
  try {
    runData(comm, call.args, call.plan, call.stride, call.start);
  } catch (const Error& error) {
    comm.setJobError(error.code(), op + ": " + error.what());
  } catch (const std::exception& error) {
    comm.setJobError(cclzInternalError, op + ": " + error.what());
  } catch (...) {
    comm.setJobError(cclzInternalError, op + ": unknown error");
  }
  DoneEvents::Event done;
  try {
    done = recordDone(comm.engine().endJoined());
    CCLZ_TRACE("proxy: call %llu (%s) queued its work and its done event", ticket, op.c_str());
  } catch (const std::exception& error) {
    comm.setJobError(cclzUnhandledCudaError,
                     op + ": its done event could not be recorded (" + error.what() + ")");
    CCLZ_TRACE("proxy: call %llu (%s) failed to record its done event", ticket, op.c_str());
  }
  comm.doneEvents().publish(call.ticket, std::move(done));
  cudaEventDestroy(call.start);
}

// On the caller's thread, after the check: the caller's stream gets the call's start event (the
// call's work waits for what the stream queued before it: earlier work, so nothing can wait in a
// circle), and the proxy gets the rest. The stream gets no wait: cclzCommStreamWait adds it,
// once the proxy has recorded the event it waits for.
void queueCall(Communicator& comm, const CollArgs& a, const Plan& plan, uint64_t stride) {
  auto call = std::make_shared<QueuedCall>();
  call->args = a;
  call->plan = plan;
  call->args.codec = a.codec ? &call->plan.use.config : nullptr;
  call->stride = stride;
  if (a.step) {
    call->step = *a.step;
    call->args.step = &call->step;
    *a.residualZero = false;  // compressed: the residual takes what the codec drops
    call->args.residualZero = nullptr;
  }
  CCLZ_CUDA_CHECK(cudaEventCreateWithFlags(&call->start, cudaEventDisableTiming));
  try {
    CCLZ_CUDA_CHECK(cudaEventRecord(call->start, reinterpret_cast<cudaStream_t>(a.stream)));
  } catch (...) {
    cudaEventDestroy(call->start);
    throw;
  }
  if (a.step) ++*a.step;  // as a call on the caller's thread does once its encodes are queued
  call->ticket = comm.doneEvents().issue();
  CCLZ_TRACE("%s: queued for the proxy as call %llu", collOpName(a.op),
             static_cast<unsigned long long>(call->ticket));
  Communicator* c = &comm;
  comm.proxy()->submit(Proxy::Job{
      [c, call] { runQueued(*c, *call); },
      [c, call] {
        CCLZ_TRACE("proxy: call %llu cancelled", static_cast<unsigned long long>(call->ticket));
        c->setJobError(cclzInvalidUsage, std::string(collOpName(call->args.op)) +
                                             ": dropped, the communicator was aborted");
        c->doneEvents().publish(call->ticket, nullptr);
        cudaEventDestroy(call->start);
      }});
}
#endif  // CCLZ_HAVE_CUDA

}  // namespace

uint64_t wholeUnits(uint64_t pieceElems, uint64_t unit, uint64_t largest) {
  const uint64_t whole = unit > 1 ? std::max(unit, pieceElems - pieceElems % unit) : pieceElems;
  return std::max<uint64_t>(1, std::min(whole, largest));
}

void runCollective(Communicator& comm, const CollArgs& a) {
  const std::lock_guard<std::timed_mutex> call(comm.callMutex());
  comm.throwIfCheckFailed();
  Transport& t = comm.transport();
  const int n = t.size(), me = t.rank();

  // A device communicator's call like one validated before takes that call's plan
  // (plan_memo.h); calls with error feedback are validated each time.
  const bool memo = t.memory() == MemoryKind::Device && !a.step && !a.residual;
  Plan fresh;
  const Plan* planned = memo ? comm.planMemo().find(a) : nullptr;
  std::exception_ptr rejected;
  try {
    if (!planned) {
      fresh = makePlan(comm, a);
      planned = memo ? &comm.planMemo().keep(a, std::move(fresh)) : &fresh;
    }
#ifdef CCLZ_HAVE_CUDA
    if (comm.proxy()) refuseCapture(a.stream);
#endif
  } catch (...) {
    rejected = std::current_exception();
    if (!planned) {
      fresh.use.config = a.codec ? *a.codec : noneConfig();
      planned = &fresh;
    }
  }
  const Plan& plan = *planned;
  const bool pointToPoint = a.op == CollOp::Send || a.op == CollOp::Recv;
  const bool peerValid = !pointToPoint || (a.peer >= 0 && a.peer < n && a.peer != me);
  CheckWhen check = comm.checkWhen(a.op);
  if (!peerValid) check = CheckWhen::Skip;
  if (check == CheckWhen::Skip && rejected) std::rethrow_exception(rejected);

  // A deferred check is queued and judged later (deferred_checks.h): a rank that rejected its
  // arguments still sends its descriptor, so that its peers learn of it.
  if (check == CheckWhen::Deferred) {
    comm.deferredChecks().queue(describe(comm, a, plan, rejected != nullptr),
                                pointToPoint ? a.peer : DeferredChecks::kEveryPeer, a.op);
    CCLZ_TRACE("%s count %llu: check deferred", collOpName(a.op),
               static_cast<unsigned long long>(a.count));
    if (rejected) std::rethrow_exception(rejected);
  }

  // The check now, on the caller's thread: its verdict is this call's return code.
  if (check == CheckWhen::Now) {
    const std::vector<int> peers = peersOf(a, n, me);
    CCLZ_TRACE("%s count %llu: check", collOpName(a.op), static_cast<unsigned long long>(a.count));
    const std::string verdict =
        checkWithPeers(comm, describe(comm, a, plan, rejected != nullptr), peers);
    CCLZ_TRACE("%s: check answered (%s)", collOpName(a.op), verdict.empty() ? "agreed" : "differs");
    if (rejected) std::rethrow_exception(rejected);
    if (!verdict.empty())
      CCLZ_FAIL(cclzInvalidUsage, std::string(collOpName(a.op)) + ": " + verdict);
  }

#ifdef CCLZ_HAVE_CUDA
  // asyncCalls: every call goes to the proxy, so that one event covers all of them
  // (cclzCommStreamWait) and the data communicator sees the calls in the order they were made.
  // Such a communicator has no tuner: its calls run compressed.
  if (comm.proxy()) {
    comm.setLastPath(Path::Compressed, true);
    queueCall(comm, a, plan, frameStride(plan));
    return;
  }
#endif
  runChosenPath(comm, a, plan);
}

}  // namespace cclz
