// The reference of the collective ops: every rank's input exchanged over MPI (host memory), the
// expected output computed here independently of the library.
#ifdef CCLZ_HAVE_MPI

#include <cmath>
#include <cstring>

#include "coll_common.h"
#include "data.h"
#include "error.h"

namespace perf::coll {
namespace {

int mpiCount(uint64_t bytes) {
  if (bytes > 0x7FFFFFFFull) fail("-c: {} bytes per rank is beyond one MPI message; use -c 0", bytes);
  return static_cast<int>(bytes);
}

float asFloat(cclzDataType_t dtype, const uint8_t* p) {
  return static_cast<float>(elementValue(dtype, p));
}

void storeRounded(cclzDataType_t dtype, uint8_t* p, float v) {
  if (dtype == cclzFloat32) {
    std::memcpy(p, &v, 4);
    return;
  }
  const uint32_t bits = dtype == cclzBfloat16 ? roundToFormat(v, 8, 7) : roundToFormat(v, 5, 10);
  const uint16_t h = static_cast<uint16_t>(bits);
  std::memcpy(p, &h, 2);
}

}  // namespace

Reference makeReference(const Shape& s, cclzDataType_t dtype, cclzRedOp_t op,
                        const std::vector<uint8_t>& input) {
  const size_t es = s.elemBytes;
  const int n = s.ranks;
  Reference ref;
  ref.exact.resize(s.recvElems * es);
  std::vector<uint8_t> parts;  // what the reference is made of, per kind
  switch (s.kind) {
    case Kind::AllGather:
      MPI_Allgather(input.data(), mpiCount(input.size()), MPI_BYTE, ref.exact.data(),
                    mpiCount(input.size()), MPI_BYTE, MPI_COMM_WORLD);
      break;
    case Kind::AllToAll:
      MPI_Alltoall(input.data(), mpiCount(s.count * es), MPI_BYTE, ref.exact.data(),
                   mpiCount(s.count * es), MPI_BYTE, MPI_COMM_WORLD);
      break;
    case Kind::SendRecv:
      if (s.peer >= 0)
        MPI_Sendrecv(input.data(), mpiCount(input.size()), MPI_BYTE, s.peer, 7, ref.exact.data(),
                     mpiCount(ref.exact.size()), MPI_BYTE, s.peer, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
      else
        ref.exact = input;  // no partner: the output is never written; compare with nothing
      break;
    case Kind::ReduceScatter:  // parts[r] = rank r's block for this rank
      parts.resize(s.count * n * es);
      MPI_Alltoall(input.data(), mpiCount(s.count * es), MPI_BYTE, parts.data(),
                   mpiCount(s.count * es), MPI_BYTE, MPI_COMM_WORLD);
      break;
    case Kind::AllReduce:  // parts[r] = rank r's input
      parts.resize(s.count * n * es);
      MPI_Allgather(input.data(), mpiCount(input.size()), MPI_BYTE, parts.data(),
                    mpiCount(input.size()), MPI_BYTE, MPI_COMM_WORLD);
      break;
  }
  ref.value.resize(s.recvElems);
  ref.magnitude.resize(s.recvElems);
  const bool reduces = s.kind == Kind::ReduceScatter || s.kind == Kind::AllReduce;
  if (!reduces) {
    for (uint64_t i = 0; i < s.recvElems; ++i) {
      ref.value[i] = asFloat(dtype, &ref.exact[i * es]);
      ref.magnitude[i] = std::fabs(static_cast<float>(ref.value[i]));
    }
    return ref;
  }
  const float divisor = op == cclzAvg ? static_cast<float>(n) : 1.0f;
  for (uint64_t i = 0; i < s.recvElems; ++i) {
    float acc = 0, mag = 0;
    double exact = 0;
    for (int r = 0; r < n; ++r) {
      const float x = asFloat(dtype, &parts[(r * s.count + i) * es]);
      acc += x;  // in rank order, as cclz.h specifies
      exact += x;
      mag += std::fabs(x);
    }
    storeRounded(dtype, &ref.exact[i * es], acc / divisor);
    ref.value[i] = exact / divisor;
    ref.magnitude[i] = mag / divisor;
  }
  return ref;
}

double networkTolerance(cclzDataType_t dtype, int ranks) {
  const double unit = dtype == cclzBfloat16 ? 0x1p-8 : dtype == cclzFloat16 ? 0x1p-11 : 0x1p-24;
  return 2.0 * (ranks + 1) * unit;
}

Check check(const Reference& ref, cclzDataType_t dtype, bool lossy,
            const std::vector<uint8_t>& output, double tolerance) {
  Check c;
  const size_t es = dtypeSize(dtype);
  const uint64_t n = ref.value.size();
  double err = 0, power = 0, maxErr = 0, maxRef = 0;
  for (uint64_t i = 0; i < n; ++i) {
    const double got = elementValue(dtype, &output[i * es]);
    if (!lossy && tolerance > 0) {
      if (!(std::fabs(got - ref.value[i]) <= tolerance * ref.magnitude[i])) ++c.wrong;
    } else if (!lossy && std::memcmp(&output[i * es], &ref.exact[i * es], es) != 0) {
      ++c.wrong;
    }
    if (lossy && !std::isfinite(got)) ++c.wrong;
    const double e = got - ref.value[i];
    if (std::isfinite(e)) {
      err += e * e;
      maxErr = std::max(maxErr, std::fabs(e));
    }
    power += ref.value[i] * ref.value[i];
    maxRef = std::max(maxRef, std::fabs(ref.value[i]));
  }
  c.nmse = power > 0 ? err / power : 0;
  c.maxRelErr = maxRef > 0 ? maxErr / maxRef : 0;
  return c;
}

}  // namespace perf::coll

#endif  // CCLZ_HAVE_MPI
