#include "coll_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "support/data.h"

namespace cclz::test {
namespace {

bool reduces(Coll op) { return op == Coll::ReduceScatter || op == Coll::AllReduce; }

// The shard of rank r in an all-reduce of count elements (cclz.h: the first count % n ranks
// hold one more).
void shardOf(uint64_t count, int n, int r, uint64_t* offset, uint64_t* size) {
  const uint64_t base = count / n, extra = count % n, ur = static_cast<uint64_t>(r);
  *offset = ur * base + std::min(ur, extra);
  *size = base + (ur < extra ? 1 : 0);
}

void storeFloat(int dtype, std::vector<uint8_t>& out, uint64_t i, float v) {
  if (dtype == cclzFloat32) {
    std::memcpy(out.data() + 4 * i, &v, 4);
    return;
  }
  const uint16_t h = dtype == cclzBfloat16 ? floatToBf16(v) : floatToHalf(v);
  std::memcpy(out.data() + 2 * i, &h, 2);
}

// Relative rounding of the dtype: what storing a reduced value can add.
double dtypeEpsilon(int dtype) {
  return dtype == cclzBfloat16 ? std::ldexp(1.0, -8) : dtype == cclzFloat16 ? std::ldexp(1.0, -11)
                                                                            : std::ldexp(1.0, -24);
}

// The largest error of one quantized value x in a block whose largest magnitude is absmax.
// qgrad: half a step at nearest rounding; the bf16 scale rounds up by at most 2^-8; a full step
// covers both and stochastic rounding too. fp8 (E4M3): 3 mantissa bits give 2^-4 relative at
// nearest rounding, and values far below the block's scale fall into the subnormal codes, whose
// spacing is 2^-9 of the block's largest code; both bounds are doubled for the scales' rounding.
double quantStep(const CodecChoice& c, double absmax, double x = 0) {
  if (c.codec == cclzCodecFp8) return std::fabs(x) * std::ldexp(1.0, -3) + absmax * std::ldexp(1.0, -8);
  const int bits = c.bits ? c.bits : 4;
  const double qmax = bits == 8 ? 127 : bits == 4 ? 7 : 1;
  return absmax / qmax * (1 + std::ldexp(1.0, -7));
}

constexpr uint64_t kBlock = 64;  // qgrad's default block

// Beyond the per-element bound: the NMSE of seeded Gaussian data must look like quantization
// (qgrad on the real tensors: int8 ~1e-4, int4 ~1e-2..5e-2 per tensor; README.md, "What cclz
// is"), once there are enough elements for the mean to mean something.
std::string checkNmse(const CollCase& c, double err, double power, uint64_t elements) {
  if (elements < 512 || power <= 0) return {};
  const double nmse = err / power,
               limit = c.codec.codec == cclzCodecFp8 ? 0.01 : c.codec.bits == 8 ? 1e-3 : 0.1;
  if (nmse <= limit) return {};
  return c.name() + ": NMSE " + std::to_string(nmse) + " above " + std::to_string(limit);
}

// The largest |value| in the qgrad block holding element i of a chunk starting at chunkStart.
double blockAbsMax(int dtype, const std::vector<uint8_t>& data, uint64_t chunkStart,
                   uint64_t chunkEnd, uint64_t i) {
  const uint64_t first = chunkStart + (i - chunkStart) / kBlock * kBlock;
  const uint64_t last = std::min(chunkEnd, first + kBlock);
  double m = 0;
  for (uint64_t j = first; j < last; ++j)
    m = std::max(m, std::fabs(static_cast<double>(elementAsFloat(dtype, data, j))));
  return m;
}

std::string describeMismatch(const CollCase& c, uint64_t i, double got, double want,
                             double bound) {
  std::ostringstream s;
  s.precision(9);
  s << c.name() << ": element " << i << " is " << got << ", expected " << want;
  if (bound >= 0) s << " within " << bound;
  return s.str();
}

}  // namespace

const char* collLabel(Coll op) {
  switch (op) {
    case Coll::AllGather:
      return "allgather";
    case Coll::ReduceScatter:
      return "reducescatter";
    case Coll::AllReduce:
      return "allreduce";
    case Coll::AllToAll:
      return "alltoall";
    case Coll::SendRecv:
      return "sendrecv";
  }
  return "?";
}

cclzCodecConfig_t CodecChoice::config() const {
  cclzCodecConfig_t c = CCLZ_CODEC_CONFIG_INITIALIZER;
  c.codec = codec;
  c.bits = bits;
  return c;
}

const std::vector<CodecChoice>& codecChoices() {
  static const std::vector<CodecChoice> all = {
      {"none", cclzCodecNone, 0, false},
      {"lossless", cclzCodecLossless, 0, false},
      {"qgrad8", cclzCodecQgrad, 8, true},
      {"qgrad4", cclzCodecQgrad, 4, true},
      {"fp8", cclzCodecFp8, 0, true},
  };
  return all;
}

const CodecChoice& codecNamed(const std::string& label) {
  for (const CodecChoice& c : codecChoices())
    if (label == c.label) return c;
  throw std::invalid_argument("no codec choice named " + label);
}

std::vector<CollCase> adaptiveCases() {
  return {{Coll::AllGather, cclzBfloat16, codecNamed("lossless"), 20000, cclzSum},
          {Coll::AllReduce, cclzFloat32, codecNamed("fp8"), 5003, cclzAvg},
          {Coll::SendRecv, cclzFloat32, codecNamed("qgrad4"), 3000, cclzSum}};
}

std::string CollCase::name() const {
  std::ostringstream s;
  s << collLabel(op) << "_" << dtypeLabel(dtype) << "_" << codec.label << "_n" << count
    << (reduces(op) ? (redOp == cclzAvg ? "_avg" : "_sum") : "");
  return s.str();
}

std::vector<CollCase> allCases() {
  std::vector<CollCase> cases;
  const Coll ops[] = {Coll::AllGather, Coll::ReduceScatter, Coll::AllReduce, Coll::AllToAll,
                      Coll::SendRecv};
  // 1 and 7: tiny and odd; 1000: one piece; 2500: three pieces of 1024 fp32 (five of bf16).
  const uint64_t counts[] = {1, 7, 1000, 2500};
  for (Coll op : ops)
    for (int dtype : {cclzBfloat16, cclzFloat16, cclzFloat32})
      for (const CodecChoice& codec : codecChoices()) {
        if (codec.codec == cclzCodecQgrad && dtype == cclzFloat16) continue;  // qgrad: bf16, fp32
        for (uint64_t count : counts) {
          cases.push_back({op, dtype, codec, count, cclzSum});
          if (reduces(op) && count == 2500) cases.push_back({op, dtype, codec, count, cclzAvg});
        }
      }
  // The none codec moves any dtype where nothing is reduced.
  for (Coll op : {Coll::AllGather, Coll::AllToAll, Coll::SendRecv})
    cases.push_back({op, cclzInt32, codecChoices()[0], 777, cclzSum});
  return cases;
}

uint64_t sendElems(const CollCase& c, int n) {
  return c.op == Coll::ReduceScatter || c.op == Coll::AllToAll ? c.count * n : c.count;
}

uint64_t recvElems(const CollCase& c, int n) {
  return c.op == Coll::AllGather || c.op == Coll::AllToAll ? c.count * n : c.count;
}

std::vector<uint8_t> makeInput(const CollCase& c, int n, int rank) {
  const uint64_t seed = mixSeed(static_cast<uint64_t>(c.op), c.dtype, c.count, 1000 + rank);
  const bool floating = c.dtype == cclzBfloat16 || c.dtype == cclzFloat16 ||
                        c.dtype == cclzFloat32;
  return makeData(floating ? DataKind::kGauss1 : DataKind::kRandomBits, c.dtype, sendElems(c, n),
                  0, seed);
}

std::string checkOutput(const CollCase& c, int n, int me, const std::vector<uint8_t>& out,
                        double* nmse, bool networkRounding) {
  if (nmse) *nmse = NAN;
  const size_t es = elementSize(c.dtype);
  std::vector<std::vector<uint8_t>> in(n);
  for (int r = 0; r < n; ++r) in[r] = makeInput(c, n, r);
  if (out.size() != recvElems(c, n) * es) return c.name() + ": output has the wrong size";

  // Moves: every element is one element of some rank's input, through the codec.
  auto source = [&](uint64_t i, int* rank, uint64_t* index, uint64_t* chunkStart) {
    if (c.op == Coll::AllGather) {
      *rank = static_cast<int>(i / c.count), *index = i % c.count, *chunkStart = 0;
    } else if (c.op == Coll::AllToAll) {
      *rank = static_cast<int>(i / c.count), *index = me * c.count + i % c.count;
      *chunkStart = me * c.count;
    } else {  // send/recv: from the previous rank of the ring
      *rank = ringPrev(me, n), *index = i, *chunkStart = 0;
    }
  };
  if (!reduces(c.op)) {
    double err = 0, power = 0;
    for (uint64_t i = 0; i < recvElems(c, n); ++i) {
      int r = 0;
      uint64_t j = 0, start = 0;
      source(i, &r, &j, &start);
      if (!c.codec.lossy) {
        if (std::memcmp(out.data() + i * es, in[r].data() + j * es, es) != 0)
          return describeMismatch(c, i, elementAsFloat(c.dtype, out, i),
                                  elementAsFloat(c.dtype, in[r], j), -1);
        continue;
      }
      const double want = elementAsFloat(c.dtype, in[r], j);
      const double got = elementAsFloat(c.dtype, out, i);
      const double bound =
          quantStep(c.codec, blockAbsMax(c.dtype, in[r], start, start + c.count, j), want) +
          std::fabs(want) * dtypeEpsilon(c.dtype);
      if (!(std::fabs(got - want) <= bound)) return describeMismatch(c, i, got, want, bound);
      err += (got - want) * (got - want), power += want * want;
    }
    if (nmse && c.codec.lossy) *nmse = power > 0 ? err / power : 0;
    return c.codec.lossy ? checkNmse(c, err, power, recvElems(c, n)) : std::string();
  }

  // Reductions: element i of the output is element `base + i` of every rank's input.
  uint64_t base = 0, chunkStart = 0, chunkSize = c.count;
  if (c.op == Coll::ReduceScatter) base = chunkStart = me * c.count;
  const float divisor = c.redOp == cclzAvg ? static_cast<float>(n) : 1.0f;
  double err = 0, power = 0;
  for (uint64_t i = 0; i < recvElems(c, n); ++i) {
    const uint64_t j = base + i;
    if (c.op == Coll::AllReduce) {
      // Every element belongs to the shard of some rank: blocks start at the shard's start.
      for (int r = 0; r < n; ++r) {
        uint64_t off = 0, size = 0;
        shardOf(c.count, n, r, &off, &size);
        if (j >= off && j < off + size) chunkStart = off, chunkSize = size;
      }
    }
    if (!c.codec.lossy && networkRounding) {
      double want = 0, magnitude = 0;
      for (int r = 0; r < n; ++r) {
        const double x = elementAsFloat(c.dtype, in[r], j);
        want += x, magnitude += std::fabs(x);
      }
      want /= divisor, magnitude /= divisor;
      const double bound = 2.0 * (n + 1) * magnitude * dtypeEpsilon(c.dtype);
      const double got = elementAsFloat(c.dtype, out, i);
      if (!(std::fabs(got - want) <= bound)) return describeMismatch(c, i, got, want, bound);
      continue;
    }
    if (!c.codec.lossy) {
      // Exact: the fp32 sum in rank order, divided, rounded to the dtype (cclz.h).
      float acc = 0;
      for (int r = 0; r < n; ++r) acc += elementAsFloat(c.dtype, in[r], j);
      std::vector<uint8_t> want(es);
      storeFloat(c.dtype, want, 0, acc / divisor);
      if (std::memcmp(out.data() + i * es, want.data(), es) != 0)
        return describeMismatch(c, i, elementAsFloat(c.dtype, out, i),
                                elementAsFloat(c.dtype, want, 0), -1);
      continue;
    }
    double want = 0, bound = 0, magnitude = 0;
    for (int r = 0; r < n; ++r) {
      const double x = elementAsFloat(c.dtype, in[r], j);
      want += x;
      bound += quantStep(c.codec,
                         blockAbsMax(c.dtype, in[r], chunkStart, chunkStart + chunkSize, j), x);
      magnitude += std::fabs(x);
    }
    want /= divisor, bound /= divisor, magnitude /= divisor;
    if (c.op == Coll::AllReduce) {
      // The reduced shard is quantized once more; its block's largest value is at most the
      // largest sum of magnitudes in the block (plus the first quantization's error).
      double blockMax = 0;
      const uint64_t first = chunkStart + (j - chunkStart) / kBlock * kBlock;
      const uint64_t last = std::min(chunkStart + chunkSize, first + kBlock);
      for (uint64_t k = first; k < last; ++k) {
        double sum = 0;
        for (int r = 0; r < n; ++r) sum += std::fabs(elementAsFloat(c.dtype, in[r], k));
        blockMax = std::max(blockMax, sum / divisor);
      }
      bound += quantStep(c.codec, blockMax + bound, std::fabs(want) + bound);
    }
    bound += (magnitude + bound) * 2 * dtypeEpsilon(c.dtype);  // fp32 sum, rounding to dtype
    const double got = elementAsFloat(c.dtype, out, i);
    if (!(std::fabs(got - want) <= bound)) return describeMismatch(c, i, got, want, bound);
    err += (got - want) * (got - want), power += want * want;
  }
  if (nmse && c.codec.lossy) *nmse = power > 0 ? err / power : 0;
  return c.codec.lossy ? checkNmse(c, err, power, recvElems(c, n)) : std::string();
}

}  // namespace cclz::test
