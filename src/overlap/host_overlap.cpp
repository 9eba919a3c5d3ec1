#include "overlap/host_overlap.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "codec/codec.h"
#include "codec/frame.h"
#include "collective/reduce.h"
#include "common/dtype.h"
#include "common/error.h"
#include "common/float_bits.h"
#include "overlap/host_gemm.h"
#include "overlap/schedule.h"
#include "transport/transport.h"

namespace cclz::overlap {
namespace {

// A chunk as it travels: its frame, or its plain rows.
struct Wire {
  std::vector<uint8_t> bytes;
  uint64_t used = 0;
};

uint64_t frameCapacity(const OverlapCall& call, uint64_t elements) {
  return call.codec ? call.codec->maxEncodedBytes(call.config, call.dtype, elements)
                    : elements * dtypeSize(static_cast<cclzDataType_t>(call.dtype));
}

// The chunk's rows (elements values of the dtype) onto the wire: its frame, or a copy.
void toWire(const OverlapCall& call, const void* rows, uint64_t elements, Wire& w) {
  w.bytes.resize(frameCapacity(call, elements));
  if (!call.codec) {
    std::memcpy(w.bytes.data(), rows, w.bytes.size());
    w.used = w.bytes.size();
    return;
  }
  w.used = call.codec->encodeHost(call.config, call.dtype, rows, elements, w.bytes.data(),
                                  w.bytes.size());
}

// Exchanges one step's chunks: `out` to `to` while `in` comes from `from`.
void exchange(Transport& t, int to, const Wire& out, int from, Wire& in, uint64_t capacity) {
  in.bytes.resize(capacity);
  uint64_t received = capacity;
  t.groupStart(nullptr);
  t.send(out.bytes.data(), out.used, to);
  t.recv(in.bytes.data(), capacity, from, t.learnsReceivedSize() ? &received : nullptr);
  t.groupEnd();
  in.used = received;
}

// A chunk's values off the wire: its frame decoded into `decoded`, or its plain rows.
const uint8_t* fromWire(const OverlapCall& call, const Wire& w, uint64_t elements,
                        std::vector<uint8_t>& decoded) {
  const uint64_t bytes = elements * dtypeSize(static_cast<cclzDataType_t>(call.dtype));
  if (!call.codec) {
    CCLZ_REQUIRE(w.used == bytes, cclzInvalidUsage, "a peer's partial has another size");
    return w.bytes.data();
  }
  decoded.resize(bytes);
  const uint32_t err = call.codec->decodeHost(call.config, w.bytes.data(), w.used, call.dtype,
                                              elements, decoded.data());
  CCLZ_REQUIRE(err == kFrameOk, cclzCorruptFrame,
               std::string("a partial's frame was rejected: ") + frameErrorText(err));
  return decoded.data();
}

void accumulate(std::vector<float>& sum, const void* values, int dtype) {
  for (uint64_t i = 0; i < sum.size(); ++i) reduce::accumulateElement(sum.data(), i, values, dtype);
}

void store(const std::vector<float>& sum, float divisor, int dtype, void* out) {
  for (uint64_t i = 0; i < sum.size(); ++i)
    reduce::storeElement(sum.data(), i, divisor, dtype, out);
}

float divisorOf(const Transport& t, const OverlapCall& call) {
  return call.redOp == cclzAvg ? static_cast<float>(t.size()) : 1.0f;
}

void gemmRows(const OverlapCall& call, const void* a, uint64_t rows, void* c) {
  gemmHost(rowsGemm(call, a, rows, c));
}

void checkCall(const Transport& t, const OverlapCall& call) {
  CCLZ_REQUIRE(t.memory() == MemoryKind::Host, cclzInvalidUsage,
               "the host overlap path takes host communicators");
  CCLZ_REQUIRE(call.dtype == cclzBfloat16 || call.dtype == cclzFloat16 ||
                   call.dtype == cclzFloat32,
               cclzInvalidArgument, "the overlapped GEMMs take bf16, fp16 or fp32");
  CCLZ_REQUIRE(call.m > 0 && call.n > 0 && call.k > 0, cclzInvalidArgument,
               "the overlapped GEMMs need m, n and k above zero");
}

// A chunk that arrived (its frame decoded, or its rows) into its place in the gathered matrix.
void land(const OverlapCall& call, const Wire& w, uint8_t* rows) {
  const uint64_t elements = call.m * call.k;
  const uint64_t chunkBytes = elements * dtypeSize(static_cast<cclzDataType_t>(call.dtype));
  if (!call.codec) {
    CCLZ_REQUIRE(w.used == chunkBytes, cclzInvalidUsage, "a peer's chunk has another size");
    std::memcpy(rows, w.bytes.data(), chunkBytes);
    return;
  }
  const uint32_t err =
      call.codec->decodeHost(call.config, w.bytes.data(), w.used, call.dtype, elements, rows);
  CCLZ_REQUIRE(err == kFrameOk, cclzCorruptFrame,
               std::string("a chunk's frame was rejected: ") + frameErrorText(err));
}

// The two-level all-gather (schedule.h: twoLevelGatherPlan): its groups of transfers, each
// chunk landed as it arrives, then the GEMMs in the plan's order.
void allGatherMatmulTwoLevelHost(Transport& t, const OverlapCall& call, uint8_t* gathered) {
  const int me = t.rank();
  const uint64_t elements = call.m * call.k, capacity = frameCapacity(call, elements);
  const uint64_t es = dtypeSize(static_cast<cclzDataType_t>(call.dtype));
  const uint64_t chunkBytes = elements * es;
  std::vector<Wire> wires(t.size());
  toWire(call, call.a, elements, wires[me]);
  land(call, wires[me], gathered + me * chunkBytes);
  const GatherPlan plan = twoLevelGatherPlan(*call.nodes, me);
  for (const TransferGroup& g : plan.groups) {
    std::vector<uint64_t> received(g.recvs.size(), capacity);
    t.groupStart(nullptr);
    for (const Transfer& out : g.sends)
      t.send(wires[out.chunk].bytes.data(), wires[out.chunk].used, out.peer);
    for (size_t i = 0; i < g.recvs.size(); ++i) {
      Wire& in = wires[g.recvs[i].chunk];
      in.bytes.resize(capacity);
      t.recv(in.bytes.data(), capacity, g.recvs[i].peer,
             t.learnsReceivedSize() ? &received[i] : nullptr);
    }
    t.groupEnd();
    for (size_t i = 0; i < g.recvs.size(); ++i) {
      const int chunk = g.recvs[i].chunk;
      wires[chunk].used = received[i];
      land(call, wires[chunk], gathered + chunk * chunkBytes);
    }
  }
  for (const int chunk : plan.compute)
    gemmRows(call, gathered + chunk * chunkBytes, call.m,
             static_cast<uint8_t*>(call.c) + chunk * call.m * call.n * es);
}

// The two-level schedule (schedule.h: twoLevelReduceScatterSteps), in the order of the device
// path's additions.
void matmulReduceScatterTwoLevelHost(Transport& t, const OverlapCall& call) {
  const int me = t.rank();
  const NodeLayout& nodes = *call.nodes;
  const uint64_t es = dtypeSize(static_cast<cclzDataType_t>(call.dtype));
  const uint64_t elements = call.m * call.n;
  const uint64_t capacity = frameCapacity(call, elements);
  OverlapCall plain = call;
  plain.codec = nullptr;  // partials move inside a node as plain rows
  std::vector<uint8_t> partial(elements * es), rounded(elements * es), decoded;
  std::vector<float> nodeSum(elements, 0.0f), mine(elements, 0.0f);
  Wire out, in;
  for (const NodeStep& step : twoLevelReduceScatterSteps(nodes, me)) {
    gemmRows(call, static_cast<const uint8_t*>(call.a) + step.compute * call.m * call.k * es,
             call.m, partial.data());
    // The last phase sums this rank's own rows; the others a chunk of another node.
    std::vector<float>& sum = nodes.nodeOf[step.compute] == nodes.nodeOf[me] ? mine : nodeSum;
    if (step.insideTo >= 0) {
      toWire(plain, partial.data(), elements, out);
      exchange(t, step.insideTo, out, step.insideFrom, in, elements * es);
      accumulate(sum, fromWire(plain, in, elements, decoded), call.dtype);
      continue;
    }
    accumulate(sum, partial.data(), call.dtype);
    if (step.acrossTo < 0) break;  // this rank's own rows, last
    store(nodeSum, 1.0f, call.dtype, rounded.data());
    std::fill(nodeSum.begin(), nodeSum.end(), 0.0f);
    toWire(call, rounded.data(), elements, out);
    exchange(t, step.acrossTo, out, step.acrossFrom, in, capacity);
    accumulate(mine, fromWire(call, in, elements, decoded), call.dtype);
  }
  store(mine, divisorOf(t, call), call.dtype, call.c);
}

}  // namespace

void allGatherMatmulHost(Transport& t, const OverlapCall& call) {
  checkCall(t, call);
  const int n = t.size(), me = t.rank();
  const uint64_t elements = call.m * call.k, chunkBytes = elements * dtypeSize(static_cast<cclzDataType_t>(call.dtype));
  std::vector<uint8_t> own;
  uint8_t* gathered = static_cast<uint8_t*>(call.gathered);
  if (!gathered) {
    own.resize(n * chunkBytes);
    gathered = own.data();
  }
  if (gathersTwoLevel(call)) return allGatherMatmulTwoLevelHost(t, call, gathered);
  // This rank's chunk: onto the wire once, and into the gathered matrix as every rank sees it.
  Wire held, arriving;
  toWire(call, call.a, elements, held);
  land(call, held, gathered + me * chunkBytes);
  const uint64_t capacity = frameCapacity(call, elements);
  for (int s = 0; s < n; ++s) {
    const Step step = gatherStep(me, n, s);
    if (step.sendTo >= 0) exchange(t, step.sendTo, held, step.recvFrom, arriving, capacity);
    gemmRows(call, gathered + step.compute * chunkBytes, call.m,
             static_cast<uint8_t*>(call.c) + step.compute * call.m * call.n *
                                                 dtypeSize(static_cast<cclzDataType_t>(call.dtype)));
    if (step.sendTo >= 0) {
      land(call, arriving, gathered + step.recvChunk * chunkBytes);
      std::swap(held, arriving);  // forwarded unchanged at the next step
    }
  }
}

void matmulReduceScatterHost(Transport& t, const OverlapCall& call) {
  checkCall(t, call);
  if (reducesTwoLevel(call)) return matmulReduceScatterTwoLevelHost(t, call);
  const int n = t.size(), me = t.rank();
  const uint64_t es = dtypeSize(static_cast<cclzDataType_t>(call.dtype)), outElements = call.m * call.n;
  const uint64_t capacity = frameCapacity(call, outElements);
  std::vector<uint8_t> partial(outElements * es);
  std::vector<Wire> partials(n);  // partials[r]: rank r's partial of this rank's rows
  Wire sent;
  for (int s = 0; s < n; ++s) {
    const Step step = reduceScatterStep(me, n, s);
    gemmRows(call, static_cast<const uint8_t*>(call.a) + step.compute * call.m * call.k * es,
             call.m, partial.data());
    if (step.sendTo < 0) {  // the last step: this rank's own rows
      toWire(call, partial.data(), outElements, partials[me]);
      break;
    }
    toWire(call, partial.data(), outElements, sent);
    exchange(t, step.sendTo, sent, step.recvFrom, partials[step.recvFrom], capacity);
  }
  // The n partials in fp32, in the order the device path adds them (reduceOrder), with the
  // collectives' own element operations, so the bytes are those of their reduce-scatter.
  std::vector<float> sum(outElements, 0.0f);
  std::vector<uint8_t> decoded;
  for (int i = 0; i < n; ++i)
    accumulate(sum, fromWire(call, partials[reduceOrder(me, n, i)], outElements, decoded),
               call.dtype);
  store(sum, divisorOf(t, call), call.dtype, call.c);
}

}  // namespace cclz::overlap
