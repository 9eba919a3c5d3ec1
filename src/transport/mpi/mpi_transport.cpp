#include "transport/mpi/mpi_transport.h"

#ifdef CCLZ_HAVE_MPI

#include <algorithm>
#include <climits>
#include <string>

#include "common/dtype.h"
#include "common/error.h"
#include "common/float_bits.h"
#include "common/float_rn.h"

namespace cclz {
namespace {

constexpr int kTag = 0x6c7a;  // every cclz message; order between two ranks does the matching

std::string mpiText(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(length));
}

#define CCLZ_MPI_CHECK(call)                                                            \
  do {                                                                                  \
    const int rc_ = (call);                                                             \
    if (rc_ != MPI_SUCCESS) CCLZ_FAIL(cclzSystemError, #call " failed: " + mpiText(rc_)); \
  } while (0)

// MPI's user-defined sums of 16-bit floats: inout[i] = in[i] + inout[i] in fp32, rounded to the
// dtype to nearest even (NaN stays NaN). Commutative, as the float addition is.
template <int Dtype>
void sum16(void* in, void* inout, int* len, MPI_Datatype*) {
  for (int i = 0; i < *len; ++i) {
    const float sum = addRn(loadAsFloat(in, Dtype, i), loadAsFloat(inout, Dtype, i));
    storeFromFloat(inout, Dtype, i, sum);
  }
}

// Divides count elements of dtype at data by n, in place, each rounded once.
void divideInPlace(void* data, uint64_t count, int dtype, int n) {
  const float d = static_cast<float>(n);
  for (uint64_t i = 0; i < count; ++i)
    storeFromFloat(data, dtype, i, divRn(loadAsFloat(data, dtype, i), d));
}

bool overlaps(const void* a, uint64_t aBytes, const void* b, uint64_t bBytes) {
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  return x < y + bBytes && y < x + aBytes;
}

}  // namespace

MpiTransport::MpiTransport(MPI_Comm comm) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  CCLZ_REQUIRE(initialized && !finalized, cclzInvalidUsage,
               "MPI is not initialized (call MPI_Init before creating a cclz communicator)");
  CCLZ_REQUIRE(comm != MPI_COMM_NULL, cclzInvalidArgument, "the MPI communicator is MPI_COMM_NULL");
  CCLZ_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
  // Errors come back as codes and become cclz errors, rather than aborting the job.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  CCLZ_MPI_CHECK(MPI_Op_create(&sum16<cclzBfloat16>, 1, &bf16Sum_));
  CCLZ_MPI_CHECK(MPI_Op_create(&sum16<cclzFloat16>, 1, &fp16Sum_));
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  if (bf16Sum_ != MPI_OP_NULL) MPI_Op_free(&bf16Sum_);
  if (fp16Sum_ != MPI_OP_NULL) MPI_Op_free(&fp16Sum_);
}

void MpiTransport::checkPeer(int peer) const {
  CCLZ_REQUIRE(peer >= 0 && peer < size_, cclzInvalidArgument,
               "peer " + std::to_string(peer) + " is not a rank of the communicator");
}

// MPI counts are ints; the collectives cut messages into pieces far below that.
int MpiTransport::messageCount(uint64_t bytes) const {
  CCLZ_REQUIRE(bytes <= static_cast<uint64_t>(INT_MAX), cclzInvalidArgument,
               "a message of " + std::to_string(bytes) + " bytes exceeds MPI's int count");
  return static_cast<int>(bytes);
}

void MpiTransport::groupStart(cclzStream_t) {
  CCLZ_REQUIRE(comm_ != MPI_COMM_NULL, cclzInvalidUsage, "the communicator was aborted");
  CCLZ_REQUIRE(!inGroup_, cclzInternalError, "MPI groups do not nest");
  inGroup_ = true;
  requests_.clear();
  receivedBytes_.clear();
}

void MpiTransport::send(const void* buf, uint64_t bytes, int peer) {
  checkPeer(peer);
  CCLZ_REQUIRE(inGroup_, cclzInternalError, "send outside a group");
  MPI_Request request;
  CCLZ_MPI_CHECK(MPI_Isend(buf, messageCount(bytes), MPI_BYTE, peer, kTag, comm_, &request));
  requests_.push_back(request);
  receivedBytes_.push_back(nullptr);
}

void MpiTransport::recv(void* buf, uint64_t capacity, int peer, uint64_t* receivedBytes) {
  checkPeer(peer);
  CCLZ_REQUIRE(inGroup_, cclzInternalError, "recv outside a group");
  MPI_Request request;
  const int count = messageCount(std::min<uint64_t>(capacity, INT_MAX));
  CCLZ_MPI_CHECK(MPI_Irecv(buf, count, MPI_BYTE, peer, kTag, comm_, &request));
  requests_.push_back(request);
  receivedBytes_.push_back(receivedBytes);
}

void MpiTransport::groupEnd() {
  CCLZ_REQUIRE(inGroup_, cclzInternalError, "groupEnd without groupStart");
  inGroup_ = false;
  std::vector<MPI_Status> statuses(requests_.size());
  const int rc = MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), statuses.data());
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (rc == MPI_ERR_IN_STATUS && statuses[i].MPI_ERROR != MPI_SUCCESS)
      CCLZ_FAIL(cclzSystemError, (receivedBytes_[i] ? "a receive failed: " : "a send failed: ") +
                                     mpiText(statuses[i].MPI_ERROR));
  }
  CCLZ_REQUIRE(rc == MPI_SUCCESS, cclzSystemError, "MPI_Waitall failed: " + mpiText(rc));
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (!receivedBytes_[i]) continue;
    int count = 0;
    MPI_Get_count(&statuses[i], MPI_BYTE, &count);
    *receivedBytes_[i] = static_cast<uint64_t>(count);
  }
}

void MpiTransport::allGather(const void* send, void* recv, uint64_t bytes, cclzStream_t) {
  CCLZ_REQUIRE(comm_ != MPI_COMM_NULL, cclzInvalidUsage, "the communicator was aborted");
  CCLZ_REQUIRE(!inGroup_, cclzInternalError, "allGather inside a group");
  const int count = messageCount(bytes);
  CCLZ_MPI_CHECK(MPI_Allgather(send, count, MPI_BYTE, recv, count, MPI_BYTE, comm_));
}

bool MpiTransport::sumOf(int dtype, MPI_Datatype* type, MPI_Op* op) const {
  if (dtype == cclzFloat32) {
    *type = MPI_FLOAT, *op = MPI_SUM;
  } else if (dtype == cclzBfloat16 || dtype == cclzFloat16) {
    *type = MPI_UINT16_T, *op = dtype == cclzBfloat16 ? bf16Sum_ : fp16Sum_;
  } else {
    return false;
  }
  return true;
}

bool MpiTransport::reduceScatter(const void* send, void* recv, uint64_t count, int dtype,
                                 bool average, cclzStream_t) {
  MPI_Datatype type;
  MPI_Op op;
  const uint64_t bytes = count * dtypeSize(static_cast<cclzDataType_t>(dtype));
  // MPI's in-place reduce-scatter keeps the result at the buffer's start, NCCL's (and cclz's) at
  // the rank's own chunk: overlapping buffers take the pipeline.
  if (!sumOf(dtype, &type, &op) || count > static_cast<uint64_t>(INT_MAX) ||
      overlaps(send, bytes * size_, recv, bytes))
    return false;
  CCLZ_REQUIRE(comm_ != MPI_COMM_NULL, cclzInvalidUsage, "the communicator was aborted");
  CCLZ_REQUIRE(!inGroup_, cclzInternalError, "reduceScatter inside a group");
  if (count == 0) return true;
  CCLZ_MPI_CHECK(
      MPI_Reduce_scatter_block(send, recv, static_cast<int>(count), type, op, comm_));
  if (average) divideInPlace(recv, count, dtype, size_);
  return true;
}

bool MpiTransport::allReduce(const void* send, void* recv, uint64_t count, int dtype, bool average,
                             cclzStream_t) {
  MPI_Datatype type;
  MPI_Op op;
  const uint64_t bytes = count * dtypeSize(static_cast<cclzDataType_t>(dtype));
  const bool inPlace = send == recv;
  if (!sumOf(dtype, &type, &op) || count > static_cast<uint64_t>(INT_MAX) ||
      (!inPlace && overlaps(send, bytes, recv, bytes)))
    return false;
  CCLZ_REQUIRE(comm_ != MPI_COMM_NULL, cclzInvalidUsage, "the communicator was aborted");
  CCLZ_REQUIRE(!inGroup_, cclzInternalError, "allReduce inside a group");
  if (count == 0) return true;
  CCLZ_MPI_CHECK(MPI_Allreduce(inPlace ? MPI_IN_PLACE : send, recv, static_cast<int>(count), type,
                               op, comm_));
  if (average) divideInPlace(recv, count, dtype, size_);
  return true;
}

uint64_t MpiTransport::maxMessageBytes() const { return static_cast<uint64_t>(INT_MAX); }

// MPI has no abort of one communicator short of MPI_Abort (the whole job). The calls of this
// transport complete before they return, so nothing is in flight: the duplicate is released and
// the transport refuses further use.
void MpiTransport::abort() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
  comm_ = MPI_COMM_NULL;
}

}  // namespace cclz

#endif  // CCLZ_HAVE_MPI
