#include "overlap/host_overlap.h"

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

// Exchanges one step's chunks: `out` to sendTo while `in` comes from recvFrom.
void exchange(Transport& t, const Step& step, const Wire& out, Wire& in, uint64_t capacity) {
  in.bytes.resize(capacity);
  uint64_t received = capacity;
  t.groupStart(nullptr);
  t.send(out.bytes.data(), out.used, step.sendTo);
  t.recv(in.bytes.data(), capacity, step.recvFrom, t.learnsReceivedSize() ? &received : nullptr);
  t.groupEnd();
  in.used = received;
}

void gemmRows(const OverlapCall& call, const void* a, uint64_t rows, void* c) {
  GemmArgs g;
  g.a = a, g.b = call.b, g.c = c, g.m = rows, g.n = call.n, g.k = call.k;
  g.transB = call.transB, g.dtype = call.dtype;
  g.lda = call.k, g.ldb = call.transB ? call.k : call.n, g.ldc = call.n;
  gemmHost(g);
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
  // This rank's chunk: onto the wire once, and into the gathered matrix as every rank sees it.
  Wire held, arriving;
  toWire(call, call.a, elements, held);
  auto land = [&](const Wire& w, int chunk) {
    uint8_t* rows = gathered + chunk * chunkBytes;
    if (!call.codec) {
      CCLZ_REQUIRE(w.used == chunkBytes, cclzInvalidUsage, "a peer's chunk has another size");
      std::memcpy(rows, w.bytes.data(), chunkBytes);
      return;
    }
    const uint32_t err =
        call.codec->decodeHost(call.config, w.bytes.data(), w.used, call.dtype, elements, rows);
    CCLZ_REQUIRE(err == kFrameOk, cclzCorruptFrame,
                 std::string("a chunk's frame was rejected: ") + frameErrorText(err));
  };
  land(held, me);
  const uint64_t capacity = frameCapacity(call, elements);
  for (int s = 0; s < n; ++s) {
    const Step step = gatherStep(me, n, s);
    if (step.sendTo >= 0) exchange(t, step, held, arriving, capacity);
    gemmRows(call, gathered + step.compute * chunkBytes, call.m,
             static_cast<uint8_t*>(call.c) + step.compute * call.m * call.n *
                                                 dtypeSize(static_cast<cclzDataType_t>(call.dtype)));
    if (step.sendTo >= 0) {
      land(arriving, step.recvChunk);
      std::swap(held, arriving);  // forwarded unchanged at the next step
    }
  }
}

void matmulReduceScatterHost(Transport& t, const OverlapCall& call) {
  checkCall(t, call);
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
    exchange(t, step, sent, partials[step.recvFrom], capacity);
  }
  // The n partials in fp32, in the order the device path adds them (reduceOrder).
  std::vector<float> sum(outElements, 0.0f);
  std::vector<uint8_t> decoded(outElements * es);
  for (int i = 0; i < n; ++i) {
    const Wire& w = partials[reduceOrder(me, n, i)];
    const uint8_t* values = w.bytes.data();
    if (call.codec) {
      const uint32_t err = call.codec->decodeHost(call.config, w.bytes.data(), w.used, call.dtype,
                                                  outElements, decoded.data());
      CCLZ_REQUIRE(err == kFrameOk, cclzCorruptFrame,
                   std::string("a partial's frame was rejected: ") + frameErrorText(err));
      values = decoded.data();
    } else {
      CCLZ_REQUIRE(w.used == outElements * es, cclzInvalidUsage,
                   "a peer's partial has another size");
    }
    for (uint64_t i = 0; i < outElements; ++i)
      reduce::accumulateElement(sum.data(), i, values, call.dtype);
  }
  // The collectives' own element operations, so the bytes are those of their reduce-scatter.
  const float divisor = call.redOp == cclzAvg ? static_cast<float>(n) : 1.0f;
  for (uint64_t i = 0; i < outElements; ++i)
    reduce::storeElement(sum.data(), i, divisor, call.dtype, call.c);
}

}  // namespace cclz::overlap
