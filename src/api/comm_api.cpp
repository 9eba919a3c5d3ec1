// The communicator and collective entry points of the C API (cclz.h, "Communicators",
// "Collectives"): argument checks at the boundary, then src/collective.
#include <cstring>
#include <functional>
#include <memory>
#include <string>

#include "api/feedback.h"
#include "api/guard.h"
#include "collective/collectives.h"
#include "collective/communicator.h"
#include "collective/descriptor.h"
#include "collective/pipeline.h"
#include "common/error.h"
#include "overlap/overlap_call.h"

#ifdef CCLZ_HAVE_MPI
#include "transport/mpi/mpi_transport.h"
#endif
#ifdef CCLZ_HAVE_NCCL
#include "transport/nccl/nccl_transport.h"
#endif

namespace cclz {
namespace {

Communicator& implOf(cclzComm_t comm) {
  CCLZ_REQUIRE(comm && comm->impl, cclzInvalidArgument, "comm is NULL");
  return *comm->impl;
}

// guarded(), and the message also kept by the communicator for cclzGetLastError(comm).
template <typename Body>
cclzResult_t guardedComm(const char* function, cclzComm_t comm, Body&& body) noexcept {
  const cclzResult_t result = guarded(function, body);
  if (result != cclzSuccess && comm && comm->impl) {
    try {
      comm->impl->setLastError(cclzGetLastError(nullptr));
    } catch (...) {
    }
  }
  return result;
}

// The settings are checked before make() creates a transport: a bad config then costs no NCCL
// or MPI communicator (whose creation is collective).
cclzResult_t makeComm(const char* function, cclzComm_t* comm, const cclzCommConfig_t* config,
                      const std::function<std::unique_ptr<Transport>()>& make) {
  return guarded(function, [&] {
    CCLZ_REQUIRE(comm, cclzInvalidArgument, "comm is NULL");
    *comm = nullptr;
    CommSettings settings = CommSettings::fromEnvironment();
    settings.apply(config);
    auto handle = std::make_unique<cclzComm>();
    handle->impl = std::make_unique<Communicator>(make(), settings);
    *comm = handle.release();
  });
}

cclzResult_t collective(const char* function, cclzComm_t comm, CollArgs args,
                        cclzFeedback_t feedback) {
  return guardedComm(function, comm, [&] {
    Communicator& c = implOf(comm);
    if (feedback) {
      args.residual = feedback->residual;
      args.residualCount = feedback->count;
      args.residualMemory = feedback->memory;
      args.step = &feedback->step;  // marks the call as one with feedback, also at count 0
      args.residualZero = &feedback->residualZero;
    }
    runCollective(c, args);
  });
}

}  // namespace
}  // namespace cclz

using namespace cclz;

extern "C" {

cclzResult_t cclzGetUniqueId(cclzUniqueId* uniqueId) {
  return guarded(__func__, [&] {
    CCLZ_REQUIRE(uniqueId, cclzInvalidArgument, "uniqueId is NULL");
#ifdef CCLZ_HAVE_NCCL
    static_assert(sizeof(cclzUniqueId) == sizeof(ncclUniqueId), "same size as NCCL's id");
    ncclUniqueId id;
    CCLZ_NCCL_CHECK(ncclGetUniqueId(&id));
    std::memcpy(uniqueId, &id, sizeof id);
#else
    CCLZ_FAIL(cclzNotSupported, "this build of cclz has no NCCL transport");
#endif
  });
}

cclzResult_t cclzCommInitRank(cclzComm_t* comm, int nranks, cclzUniqueId uniqueId, int rank) {
  return cclzCommInitRankConfig(comm, nranks, uniqueId, rank, nullptr);
}

cclzResult_t cclzCommInitRankConfig(cclzComm_t* comm, int nranks, cclzUniqueId uniqueId, int rank,
                                    const cclzCommConfig_t* config) {
  return makeComm(__func__, comm, config, [&]() -> std::unique_ptr<Transport> {
    CCLZ_REQUIRE(nranks >= 1 && rank >= 0 && rank < nranks, cclzInvalidArgument,
                 "rank " + std::to_string(rank) + " of " + std::to_string(nranks));
#ifdef CCLZ_HAVE_NCCL
    ncclUniqueId id;
    std::memcpy(&id, &uniqueId, sizeof id);
    ncclComm_t nccl = nullptr;
    ncclConfig_t ncclConfig = ncclConfigFromEnvironment();
    CCLZ_NCCL_CHECK(ncclCommInitRankConfig(&nccl, nranks, id, rank, &ncclConfig));
    try {
      return std::make_unique<NcclTransport>(nccl, true);
    } catch (...) {
      ncclCommDestroy(nccl);
      throw;
    }
#else
    (void)uniqueId;
    CCLZ_FAIL(cclzNotSupported, "this build of cclz has no NCCL transport");
#endif
  });
}

cclzResult_t cclzCommInitFromNccl(cclzComm_t* comm, void* ncclComm) {
  return cclzCommInitFromNcclConfig(comm, ncclComm, nullptr);
}

cclzResult_t cclzCommInitFromNcclConfig(cclzComm_t* comm, void* ncclComm,
                                        const cclzCommConfig_t* config) {
  return makeComm(__func__, comm, config, [&]() -> std::unique_ptr<Transport> {
    CCLZ_REQUIRE(ncclComm, cclzInvalidArgument, "ncclComm is NULL");
#ifdef CCLZ_HAVE_NCCL
    return std::make_unique<NcclTransport>(static_cast<ncclComm_t>(ncclComm), false);
#else
    CCLZ_FAIL(cclzNotSupported, "this build of cclz has no NCCL transport");
#endif
  });
}

cclzResult_t cclzCommInitFromMpi(cclzComm_t* comm, const void* mpiComm) {
  return cclzCommInitFromMpiConfig(comm, mpiComm, nullptr);
}

cclzResult_t cclzCommInitFromMpiConfig(cclzComm_t* comm, const void* mpiComm,
                                       const cclzCommConfig_t* config) {
  return makeComm(__func__, comm, config, [&]() -> std::unique_ptr<Transport> {
    CCLZ_REQUIRE(mpiComm, cclzInvalidArgument, "mpiComm is NULL (pass the address of an MPI_Comm)");
    // Refused before MPI_Comm_dup (the Communicator would refuse it after).
    CCLZ_REQUIRE(!config || config->asyncCalls == 0, cclzInvalidUsage,
                 "asyncCalls = 1 is for device (NCCL) communicators; a host (MPI) "
                 "communicator's calls return complete");
#ifdef CCLZ_HAVE_MPI
    return std::make_unique<MpiTransport>(*static_cast<const MPI_Comm*>(mpiComm));
#else
    CCLZ_FAIL(cclzNotSupported, "this build of cclz has no MPI transport");
#endif
  });
}

cclzResult_t cclzCommDestroy(cclzComm_t comm) {
  return guarded(__func__, [&] {
    if (!comm) return;
    std::unique_ptr<cclzComm> owned(comm);
  });
}

cclzResult_t cclzCommAbort(cclzComm_t comm) {
  return guarded(__func__, [&] {
    if (!comm) return;
    std::unique_ptr<cclzComm> owned(comm);
    if (comm->impl) comm->impl->abort();
  });
}

cclzResult_t cclzCommStreamWait(cclzComm_t comm, cclzStream_t stream) {
  return guardedComm(__func__, comm, [&] { implOf(comm).streamWait(stream); });
}

cclzResult_t cclzCommGetAsyncError(cclzComm_t comm, cclzResult_t* asyncError) {
  return guardedComm(__func__, comm, [&] {
    Communicator& c = implOf(comm);
    CCLZ_REQUIRE(asyncError, cclzInvalidArgument, "asyncError is NULL");
    std::string message;
    *asyncError = c.asyncError(&message);
    if (*asyncError != cclzSuccess) c.setLastError("asynchronous error: " + message);
  });
}

cclzResult_t cclzCommCount(cclzComm_t comm, int* count) {
  return guardedComm(__func__, comm, [&] {
    Communicator& c = implOf(comm);
    CCLZ_REQUIRE(count, cclzInvalidArgument, "count is NULL");
    *count = c.transport().size();
  });
}

cclzResult_t cclzCommGetPieceBytes(cclzComm_t comm, size_t chunkBytes, size_t* pieceBytes) {
  return guardedComm(__func__, comm, [&] {
    Communicator& c = implOf(comm);
    CCLZ_REQUIRE(pieceBytes, cclzInvalidArgument, "pieceBytes is NULL");
    *pieceBytes = pieceBytesFor(c.settings().pieceBytes, chunkBytes, c.transport().size());
  });
}

cclzResult_t cclzCommGetLastPath(cclzComm_t comm, cclzPath_t* path, int* decided) {
  return guardedComm(__func__, comm, [&] {
    Communicator& c = implOf(comm);
    if (path)
      *path = static_cast<cclzPath_t>((c.lastPath() == Path::Plain ? cclzPathPlain : 0) |
                                      (c.lastSerial() ? cclzPathSerial : 0));
    if (decided) *decided = c.lastDecided() ? 1 : 0;
  });
}

cclzResult_t cclzCommUserRank(cclzComm_t comm, int* rank) {
  return guardedComm(__func__, comm, [&] {
    Communicator& c = implOf(comm);
    CCLZ_REQUIRE(rank, cclzInvalidArgument, "rank is NULL");
    *rank = c.transport().rank();
  });
}

cclzResult_t cclzAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           cclzDataType_t dtype, cclzComm_t comm, const cclzCodecConfig_t* codec,
                           cclzStream_t stream) {
  CollArgs a;
  a.op = CollOp::AllGather, a.send = sendbuff, a.recv = recvbuff, a.count = sendcount;
  a.dtype = dtype, a.codec = codec, a.stream = stream;
  return collective(__func__, comm, a, nullptr);
}

cclzResult_t cclzReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               cclzDataType_t dtype, cclzRedOp_t op, cclzComm_t comm,
                               const cclzCodecConfig_t* codec, cclzStream_t stream) {
  return cclzReduceScatterFeedback(sendbuff, recvbuff, recvcount, dtype, op, comm, codec, nullptr,
                                   stream);
}

cclzResult_t cclzReduceScatterFeedback(const void* sendbuff, void* recvbuff, size_t recvcount,
                                       cclzDataType_t dtype, cclzRedOp_t op, cclzComm_t comm,
                                       const cclzCodecConfig_t* codec, cclzFeedback_t feedback,
                                       cclzStream_t stream) {
  CollArgs a;
  a.op = CollOp::ReduceScatter, a.send = sendbuff, a.recv = recvbuff, a.count = recvcount;
  a.dtype = dtype, a.redOp = op, a.codec = codec, a.stream = stream;
  return collective(feedback ? "cclzReduceScatterFeedback" : "cclzReduceScatter", comm, a,
                    feedback);
}

cclzResult_t cclzAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           cclzDataType_t dtype, cclzRedOp_t op, cclzComm_t comm,
                           const cclzCodecConfig_t* codec, cclzStream_t stream) {
  return cclzAllReduceFeedback(sendbuff, recvbuff, count, dtype, op, comm, codec, nullptr, stream);
}

cclzResult_t cclzAllReduceFeedback(const void* sendbuff, void* recvbuff, size_t count,
                                   cclzDataType_t dtype, cclzRedOp_t op, cclzComm_t comm,
                                   const cclzCodecConfig_t* codec, cclzFeedback_t feedback,
                                   cclzStream_t stream) {
  CollArgs a;
  a.op = CollOp::AllReduce, a.send = sendbuff, a.recv = recvbuff, a.count = count;
  a.dtype = dtype, a.redOp = op, a.codec = codec, a.stream = stream;
  return collective(feedback ? "cclzAllReduceFeedback" : "cclzAllReduce", comm, a, feedback);
}

cclzResult_t cclzAllGatherMatmul(const void* a, const void* b, const void* bias, void* c,
                                 void* gathered, size_t m, size_t n, size_t k, int transB,
                                 cclzDataType_t dtype, cclzComm_t comm,
                                 const cclzCodecConfig_t* codec, cclzStream_t stream) {
  return guardedComm(__func__, comm, [&] {
    overlap::OverlapCall call;
    call.a = a, call.b = b, call.bias = bias, call.c = c, call.gathered = gathered;
    call.m = m, call.n = n, call.k = k, call.transB = transB != 0, call.dtype = dtype;
    overlap::runOverlapCall(implOf(comm), CollOp::AllGatherMatmul, call, codec, stream);
  });
}

cclzResult_t cclzMatmulReduceScatter(const void* a, const void* b, void* c, size_t m, size_t n,
                                     size_t k, int transB, cclzDataType_t dtype, cclzRedOp_t op,
                                     cclzComm_t comm, const cclzCodecConfig_t* codec,
                                     cclzStream_t stream) {
  return guardedComm(__func__, comm, [&] {
    overlap::OverlapCall call;
    call.a = a, call.b = b, call.c = c;
    call.m = m, call.n = n, call.k = k, call.transB = transB != 0, call.dtype = dtype;
    call.redOp = op;
    overlap::runOverlapCall(implOf(comm), CollOp::MatmulReduceScatter, call, codec, stream);
  });
}

cclzResult_t cclzAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                          cclzDataType_t dtype, cclzComm_t comm, const cclzCodecConfig_t* codec,
                          cclzStream_t stream) {
  CollArgs a;
  a.op = CollOp::AllToAll, a.send = sendbuff, a.recv = recvbuff, a.count = count;
  a.dtype = dtype, a.codec = codec, a.stream = stream;
  return collective(__func__, comm, a, nullptr);
}

cclzResult_t cclzSend(const void* sendbuff, size_t count, cclzDataType_t dtype, int peer,
                      cclzComm_t comm, const cclzCodecConfig_t* codec, cclzStream_t stream) {
  CollArgs a;
  a.op = CollOp::Send, a.send = sendbuff, a.count = count, a.dtype = dtype, a.peer = peer;
  a.codec = codec, a.stream = stream;
  return collective(__func__, comm, a, nullptr);
}

cclzResult_t cclzRecv(void* recvbuff, size_t count, cclzDataType_t dtype, int peer,
                      cclzComm_t comm, const cclzCodecConfig_t* codec, cclzStream_t stream) {
  CollArgs a;
  a.op = CollOp::Recv, a.recv = recvbuff, a.count = count, a.dtype = dtype, a.peer = peer;
  a.codec = codec, a.stream = stream;
  return collective(__func__, comm, a, nullptr);
}

}  // extern "C"
