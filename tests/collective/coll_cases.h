// What the multi-rank tests share (loopback threads and MPI processes): the cases, every rank's
// seeded inputs (any rank can rebuild any other's), and the check of one rank's output against a
// reference computed here from those inputs: exact (bytes) for the none and lossless codecs,
// within a bound derived from the quantization step for qgrad, against float64 sums.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cclz/cclz.h"

namespace cclz::test {

enum class Coll { AllGather, ReduceScatter, AllReduce, AllToAll, SendRecv };
const char* collLabel(Coll op);

struct CodecChoice {
  const char* label;
  cclzCodecType_t codec;
  int bits;  // qgrad
  bool lossy;
  cclzCodecConfig_t config() const;
};
const std::vector<CodecChoice>& codecChoices();
// The choice of codecChoices() with this label (throws when there is none).
const CodecChoice& codecNamed(const std::string& label);

struct CollCase {
  Coll op;
  int dtype;
  CodecChoice codec;
  uint64_t count;  // as the C API takes it (per rank for AG/RS/A2A)
  cclzRedOp_t redOp;
  std::string name() const;
};

// The cases for n ranks: every op x dtype x codec the codec takes, counts that do not divide
// evenly (all-reduce) or span several pipeline pieces.
std::vector<CollCase> allCases();

// What the adaptive tests repeat past their trial calls (cclzCommConfig_t.adaptive): a lossless
// all-gather, a lossy all-reduce (outputs identical across ranks on either path), a send/recv ring.
std::vector<CollCase> adaptiveCases();

// Pipeline piece the tests run with (CCLZ_PIECE_BYTES), a multiple of every qgrad block so that
// quantization blocks start at fixed offsets of each chunk: 1024 elements of fp32.
constexpr uint64_t kTestPieceBytes = 4096;

uint64_t sendElems(const CollCase& c, int n);
uint64_t recvElems(const CollCase& c, int n);
// The send buffer of `rank` (seeded by the case and the rank, never zeros).
std::vector<uint8_t> makeInput(const CollCase& c, int n, int rank);

// Send/recv in a ring: rank r sends to next(r) and receives from prev(r); even ranks send first.
inline int ringNext(int r, int n) { return (r + 1) % n; }
inline int ringPrev(int r, int n) { return (r + n - 1) % n; }

// Checks `out` (recvElems bytes of the dtype) of rank `me`. Returns "" when it is right, else
// what is wrong (first bad element, values). *nmse receives the normalized mean squared error
// against the float64 reference where the op computes values (NAN otherwise).
// networkRounding: the reduction of plain data was the network's own (the codec none over NCCL
// runs ncclReduceScatter/ncclAllReduce, over MPI MPI_Reduce_scatter_block/MPI_Allreduce), which
// rounds to the dtype after every step in an order of its choosing: its sums are checked within
// 2(n + 1) roundings instead of byte for byte.
std::string checkOutput(const CollCase& c, int n, int me, const std::vector<uint8_t>& out,
                        double* nmse = nullptr, bool networkRounding = false);
// Whether an NCCL or MPI communicator runs case c through the network's own reduction.
inline bool networkReduces(const CollCase& c) {
  return c.codec.codec == cclzCodecNone &&
         (c.op == Coll::ReduceScatter || c.op == Coll::AllReduce);
}

}  // namespace cclz::test
