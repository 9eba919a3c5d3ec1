#include "transport/mpi/mpi_transport.h"

#ifdef CCLZ_HAVE_MPI

#include <algorithm>
#include <climits>
#include <string>

#include "common/error.h"

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
}

MpiTransport::~MpiTransport() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
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
