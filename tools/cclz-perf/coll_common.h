// What the collective ops of cclz-perf share (op_collective.cpp, coll_plain.cpp,
// coll_reference.cpp): the op, the shape of one size of the sweep, and the rank's setup.
#pragma once

#ifdef CCLZ_HAVE_MPI

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cclz/cclz.h"
#include "coll_check.h"
#include "options.h"

namespace perf::coll {

enum class Kind { AllGather, ReduceScatter, AllReduce, AllToAll, SendRecv };
Kind kindOf(const std::string& op);

// One size of the sweep, nccl-tests' way: `bytes` is the size column (all-gather: the output;
// reduce-scatter and all-to-all: the input; all-reduce, sendrecv: the message), count the API's.
struct Shape {
  Kind kind;
  int ranks = 1, rank = 0;
  size_t elemBytes = 2;
  uint64_t count = 0;  // the API's count argument
  uint64_t sendElems = 0, recvElems = 0;
  uint64_t bytes = 0;
  double busFactor = 1;  // busbw = algbw * busFactor (nccl-tests, PERFORMANCE.md)
  int peer = -1;         // sendrecv: the partner (rank ^ 1), -1 when this rank has none
};
Shape shapeFor(Kind kind, uint64_t sizeBytes, cclzDataType_t dtype, int ranks, int rank);

// The plain collective on the same buffers (host memory and MPI, or device memory and NCCL).
struct Plain {
  virtual ~Plain() = default;
  virtual const char* name() const = 0;
  virtual void run(const Shape& s, cclzDataType_t dtype, const void* send, void* recv) = 0;
};
std::unique_ptr<Plain> makePlainMpi();
#ifdef CCLZ_HAVE_NCCL
// A plain NCCL communicator of its own (unique id broadcast over MPI), queued on stream.
std::unique_ptr<Plain> makePlainNccl(void* stream);
#endif

// Seeded N(0,1) rounded to the dtype (splitmix64 and Box-Muller: cheap at 256 MiB a rank).
std::vector<uint8_t> gaussian(uint64_t elems, cclzDataType_t dtype, uint64_t seed);

// The rank's device: --device gpu (or, without the flag, a GPU where cclz has NCCL and one is
// visible): GPU rank % count made current and a stream of its own; else the CPU (host buffers,
// MPI). text describes it for the table's header.
struct RankDevice {
  bool gpu = false;
  void* stream = nullptr;  // cudaStream_t; NULL on the CPU
  std::string text;
  std::shared_ptr<void> owned;  // keeps the stream
};
RankDevice rankDevice(const std::string& deviceFlag, int rank);

// The expected output of this rank, from every rank's input (exchanged over MPI): exact bytes,
// and per element the float64 value and the sum of the contributions' magnitudes (coll_check.h).
Reference makeReference(const Shape& s, cclzDataType_t dtype, cclzRedOp_t op,
                        const std::vector<uint8_t>& input);

}  // namespace perf::coll

#endif  // CCLZ_HAVE_MPI
