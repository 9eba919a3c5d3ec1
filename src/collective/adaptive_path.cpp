// Adaptive calls (cclzCommConfig_t.adaptive; docs/collectives.md, "Adaptive calls"): the tuner
// (src/tune) alternates a kind's first calls between the codec and plain data, times them, and
// settles every rank on the faster path at once. Calls with error feedback that run plain data
// take the residual along, so that nothing the codec dropped is lost.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "collective/plan.h"
#include "common/error.h"
#include "common/trace.h"
#include "tune/stopwatch.h"
#include "tune/tuner.h"

#ifdef CCLZ_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "codec/device.h"
#endif

namespace cclz {
namespace {

// Plain data for a call with error feedback (an adaptive call's choice; plan: the codec none).
// The residual holds what earlier compressed calls dropped from this rank's data: it is added
// into the data and zeroed, so that nothing is lost, and the call then moves the sum. Its
// rounding to the dtype drops at most half a unit in the last place of each value, once. While
// the residual is known to be zero there is nothing to add.
//
// addResidualForPlain queues the addition and returns the buffer to send: the all-reduce adds
// into its output buffer and reduces in place; the reduce-scatter into an engine area, which
// only the engine's streams touch (so that calls on other streams cannot overwrite it early).
// It runs before a plain trial's timing starts: once a kind is settled on plain data the
// residual stays zero, so what the trials compare is the call without it.
const void* addResidualForPlain(Communicator& comm, const CollArgs& a, const Plan& plan) {
  if (*a.residualZero || !plan.sendElems) return a.send;
  Engine& e = comm.engine();
  uint64_t bytes[static_cast<int>(Area::Count)] = {};
  if (a.op == CollOp::ReduceScatter)
    bytes[static_cast<int>(Area::Folded)] = plan.sendElems * plan.elemBytes;
  e.reserve(bytes);
  void* folded = a.op == CollOp::AllReduce ? a.recv : e.area(Area::Folded);
  e.begin(a.stream);
  try {
    e.stage(Stage::Move, kNoSlot);
    e.addResidual(folded, a.send, a.residual, plan.sendElems, a.dtype);
    e.end();
  } catch (...) {
    e.abandon();
    throw;
  }
  *a.residualZero = true;
  return folded;
}

// The plain call itself, from `send` (addResidualForPlain's buffer). From an engine area it
// runs on the engine's streams; otherwise as any plain call.
void runPlainFeedback(Communicator& comm, const CollArgs& a, const Plan& plan, const void* send) {
  CollArgs run = a;
  run.codec = nullptr;
  run.residual = Residual{};
  run.step = nullptr;
  run.residualZero = nullptr;
  run.send = send;
  const uint64_t stride = frameStride(plan);
  ++*a.step;
  if (send == a.send || send == a.recv) return runData(comm, run, plan, stride, nullptr);
  Engine& e = comm.engine();
  Transport& t = comm.transport();
  uint64_t bytes[static_cast<int>(Area::Count)] = {};
  dataBytes(run, plan, t.size(), t.rank(), e.memory(), stride, bytes);
  e.reserve(bytes);
  e.begin(a.stream);
  try {
    e.stage(Stage::Move, kNoSlot);
    if (!runNative(t, run, plan, e.moveStream())) {
      e.join();  // the pipeline's stages start after the addition
      runPlan(comm, run, plan, stride);
    }
    e.end();
  } catch (...) {
    e.abandon();
    throw;
  }
}

// Whether the tuner chooses this call's path: a compressed call that moves data, on an adaptive
// communicator. With error feedback too: plain data takes the residual along (runPlainFeedback).
bool adaptable(Communicator& comm, const CollArgs& a, const Plan& plan) {
  return comm.tuner() && plan.use.config.codec != cclzCodecNone && a.count > 0;
}

TuneKey tuneKey(const CollArgs& a, const Plan& plan) {
  TuneKey k;
  k.op = static_cast<uint8_t>(a.op);
  k.dtype = static_cast<uint8_t>(a.dtype);
  k.codec = static_cast<uint8_t>(plan.use.config.codec);
  k.peer = a.op == CollOp::Send || a.op == CollOp::Recv ? a.peer : -1;
  k.configHash = configHash(plan.use.config);
  k.sizeClass = Tuner::sizeClass(a.count * plan.elemBytes);
  k.feedback = a.step != nullptr;  // a kind of its own: its plain calls may add the residual
  return k;
}

// Before a timed trial: the ranks of the call meet in a collective of 8 bytes on the caller's
// stream (an all-gather; for send/recv a pair exchange), so that the trial's time starts where
// all of them have arrived. Without it a rank that arrives early counts its wait for the others
// as the call's time: in a training step's first calls that wait (other ranks still in their
// first GEMMs) can be many times a collective over NVLink, and decided a kind's path by chance.
// The bytes are not read; the engine's Align area holds them.
void alignRanks(Communicator& comm, const CollArgs& a) {
  Transport& t = comm.transport();
  Engine& e = comm.engine();
  const int n = t.size();
  uint64_t bytes[static_cast<int>(Area::Count)] = {};
  bytes[static_cast<int>(Area::Align)] = 2 * n * sizeof(uint64_t);
  e.reserve(bytes);
  uint8_t* area = e.area(Area::Align);
  if (a.op == CollOp::Send || a.op == CollOp::Recv) {
    t.groupStart(a.stream);
    t.send(area, sizeof(uint64_t), a.peer);
    t.recv(area + n * sizeof(uint64_t), sizeof(uint64_t), a.peer, nullptr);
    t.groupEnd();
    return;
  }
  t.allGather(area, area + n * sizeof(uint64_t), sizeof(uint64_t), a.stream);
}

bool capturing(Communicator& comm, cclzStream_t stream) {
#ifdef CCLZ_HAVE_CUDA
  if (comm.transport().memory() != MemoryKind::Device) return false;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CCLZ_CUDA_CHECK(cudaStreamIsCapturing(reinterpret_cast<cudaStream_t>(stream), &status));
  return status != cudaStreamCaptureStatusNone;
#else
  (void)comm, (void)stream;
  return false;
#endif
}

// Settles a key whose trials are over: the fastest times of this rank and the peers of a call
// like `a`, exchanged, then the same verdict everywhere (tune/tuner.h).
void settleKey(Communicator& comm, const CollArgs& a, const TuneKey& key, const TunedNames& names) {
  const int me = comm.transport().rank();
  const std::vector<int> peers = peersOf(a, comm.transport().size(), me);
  const TrialTimes mine = comm.tuner()->measured(key);
  const std::vector<uint8_t> bytes = exchangeWithPeers(comm, &mine, sizeof mine, peers);
  std::vector<int> ranks = peers;
  ranks.push_back(me);
  std::sort(ranks.begin(), ranks.end());
  std::vector<TrialTimes> times;
  for (int r : ranks) {
    TrialTimes rt;
    std::memcpy(&rt, bytes.data() + r * sizeof rt, sizeof rt);
    times.push_back(rt);
  }
  comm.tuner()->settle(key, times);
  CCLZ_TRACE("%s: settled on %s (%s %.1f us, %s %.1f us here)", names.what,
             names.of(comm.tuner()->settledOr(key)), names.first, mine.compressed * 1e6,
             names.second, mine.plain * 1e6);
}

// The tuner's next call of `key`, made like `a` on `stream` (settling the key first where its
// trials are over). A settled key's calls, the steady state, ask the driver nothing: the capture
// query (~80 ns on an H200's host) is for calls that could be trials.
Tuner::Call nextCall(Communicator& comm, const CollArgs& a, const TuneKey& key, cclzStream_t stream,
                     const TunedNames& names, int trialPairs) {
  Tuner& tuner = *comm.tuner();
  Tuner::Call call;
  if (tuner.nextSettled(key, &call)) return call;
  if (capturing(comm, stream)) {
    call.path = tuner.settledOr(key);
    return call;
  }
  call = tuner.next(key, trialPairs);
  if (call.settling) {
    settleKey(comm, a, key, names);
    call = tuner.next(key, trialPairs);
  }
  return call;
}

}  // namespace

void runChosenPath(Communicator& comm, const CollArgs& a, const Plan& plan) {
  if (!adaptable(comm, a, plan)) {
    comm.setLastPath(Path::Compressed, true);
    if (a.residualZero) *a.residualZero = false;  // the residual takes what the codec drops
    CCLZ_TRACE("%s: data part on the caller's thread", collOpName(a.op));
    runData(comm, a, plan, frameStride(plan), nullptr);
    CCLZ_TRACE("%s: data part queued", collOpName(a.op));
    return;
  }
  Tuner& tuner = *comm.tuner();
  const TuneKey key = tuneKey(a, plan);
  const Tuner::Call call =
      nextCall(comm, a, key, a.stream, TunedNames{collOpName(a.op), "compressed", "plain"},
               Tuner::trialPairsFor(key));
  comm.setLastPath(call.path, call.decided);
  CollArgs run = a;
  // A kind settled on plain data (the steady state of most small calls over NVLink): the
  // network's own collective, as runData would run it, without copying the plan.
  if (call.path == Path::Plain && !call.timed && !a.step) {
    run.codec = nullptr;
    CCLZ_TRACE("%s: data part on the caller's thread, plain", collOpName(a.op));
    if (runNative(comm.transport(), run, plan, a.stream)) return;
  }
  Plan runPlan = plan;
  if (call.path == Path::Plain) {  // the same call through the codec none, already validated
    run.codec = nullptr;
    runPlan.use.config = noneConfig();
    runPlan.use.codec = &codecFor(cclzCodecNone);
  }
  const bool plainFeedback = call.path == Path::Plain && a.step;
  const void* send = plainFeedback ? addResidualForPlain(comm, a, runPlan) : a.send;
  std::unique_ptr<Stopwatch> watch;
  if (call.timed) {
    alignRanks(comm, a);
    watch = makeStopwatch(comm.transport().memory());
    watch->start(a.stream);
  }
  CCLZ_TRACE("%s: data part on the caller's thread, %s%s", collOpName(a.op),
             call.path == Path::Plain ? "plain" : "compressed", call.timed ? ", timed" : "");
  if (plainFeedback) {
    runPlainFeedback(comm, a, runPlan, send);
  } else {
    if (a.residualZero) *a.residualZero = false;  // the residual takes what the codec drops
    runData(comm, run, runPlan, frameStride(runPlan), nullptr);
  }
  if (watch) {
    watch->stop(a.stream);
    tuner.record(key, call.path, std::move(watch));
  }
}

Tuner::Call runTuned(Communicator& comm, const TuneKey& key, int trialPairs, cclzStream_t stream,
                     const TunedNames& names, const std::function<void(Path)>& run) {
  CollArgs all;  // what aligns every rank: an all-gather's peers, on the call's stream
  all.op = CollOp::AllGather;
  all.stream = stream;
  const Tuner::Call call = nextCall(comm, all, key, stream, names, trialPairs);
  std::unique_ptr<Stopwatch> watch;
  if (call.timed) {
    alignRanks(comm, all);
    watch = makeStopwatch(comm.transport().memory());
    watch->start(stream);
  }
  CCLZ_TRACE("%s: %s%s", names.what, names.of(call.path), call.timed ? ", timed" : "");
  run(call.path);
  if (watch) {
    watch->stop(stream);
    comm.tuner()->record(key, call.path, std::move(watch));
  }
  return call;
}

}  // namespace cclz
