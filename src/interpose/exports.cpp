// The NCCL functions libcclz_nccl.so defines (libcclz_nccl.map lists them): the collectives and
// point-to-point calls, which go through cclz or to NCCL (dispatch.h), and the calls whose
// bookkeeping that needs: groups (their depth per thread) and the communicators' split, destroy
// and abort (which communicators are cclz's, and the companions' lifetime). Everything else of
// NCCL's API is not defined here, so the program reaches NCCL directly.
#include <nccl.h>

#include "cclz/cclz.h"
#include "companion.h"
#include "dispatch.h"
#include "registry.h"

#define CCLZ_NCCL_EXPORT extern "C" __attribute__((visibility("default")))

using namespace cclz::interpose;

namespace {

cclzDataType_t dtypeOf(ncclDataType_t t) { return static_cast<cclzDataType_t>(t); }
cclzRedOp_t redOpOf(ncclRedOp_t op) { return static_cast<cclzRedOp_t>(op); }
cclzStream_t streamOf(cudaStream_t s) { return reinterpret_cast<cclzStream_t>(s); }

}  // namespace

CCLZ_NCCL_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                            ncclDataType_t datatype, ncclComm_t comm,
                                            cudaStream_t stream) {
  const Call call{Op::AllGather, datatype, sendcount};
  return interpose(
      __func__, call, comm, stream, -1,
      [&] {
        return forward(__func__, real().allGather, sendbuff, recvbuff, sendcount, datatype, comm,
                       stream);
      },
      [&](const CclzApi& api, cclzComm_t c) {
        return api.allGather(sendbuff, recvbuff, sendcount, dtypeOf(datatype), c, lossless(),
                             streamOf(stream));
      });
}

CCLZ_NCCL_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                           ncclDataType_t datatype, ncclComm_t comm,
                                           cudaStream_t stream) {
  int ranks = 0;
  if (!real().commCount || real().commCount(comm, &ranks) != ncclSuccess) ranks = 0;
  const Call call{Op::AllToAll, datatype, count, -1, sendbuff, recvbuff, ranks};
  return interpose(
      __func__, call, comm, stream, -1,
      [&] {
        return forward(__func__, real().allToAll, sendbuff, recvbuff, count, datatype, comm,
                       stream);
      },
      [&](const CclzApi& api, cclzComm_t c) {
        return api.allToAll(sendbuff, recvbuff, count, dtypeOf(datatype), c, lossless(),
                            streamOf(stream));
      });
}

CCLZ_NCCL_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, ncclRedOp_t op,
                                            ncclComm_t comm, cudaStream_t stream) {
  const Call call{Op::AllReduce, datatype, count, op};
  return interpose(
      __func__, call, comm, stream, -1,
      [&] {
        return forward(__func__, real().allReduce, sendbuff, recvbuff, count, datatype, op, comm,
                       stream);
      },
      [&](const CclzApi& api, cclzComm_t c) {
        return api.allReduce(sendbuff, recvbuff, count, dtypeOf(datatype), redOpOf(op), c,
                             lossless(), streamOf(stream));
      });
}

CCLZ_NCCL_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff,
                                                size_t recvcount, ncclDataType_t datatype,
                                                ncclRedOp_t op, ncclComm_t comm,
                                                cudaStream_t stream) {
  const Call call{Op::ReduceScatter, datatype, recvcount, op};
  return interpose(
      __func__, call, comm, stream, -1,
      [&] {
        return forward(__func__, real().reduceScatter, sendbuff, recvbuff, recvcount, datatype, op,
                       comm, stream);
      },
      [&](const CclzApi& api, cclzComm_t c) {
        return api.reduceScatter(sendbuff, recvbuff, recvcount, dtypeOf(datatype), redOpOf(op), c,
                                 lossless(), streamOf(stream));
      });
}

CCLZ_NCCL_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                       int peer, ncclComm_t comm, cudaStream_t stream) {
  const Call call{Op::Send, datatype, count};
  return interpose(
      __func__, call, comm, stream, peer,
      [&] { return forward(__func__, real().send, sendbuff, count, datatype, peer, comm, stream); },
      [&](const CclzApi& api, cclzComm_t c) {
        return api.send(sendbuff, count, dtypeOf(datatype), peer, c, lossless(), streamOf(stream));
      });
}

CCLZ_NCCL_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype,
                                       int peer, ncclComm_t comm, cudaStream_t stream) {
  const Call call{Op::Recv, datatype, count};
  return interpose(
      __func__, call, comm, stream, peer,
      [&] { return forward(__func__, real().recv, recvbuff, count, datatype, peer, comm, stream); },
      [&](const CclzApi& api, cclzComm_t c) {
        return api.recv(recvbuff, count, dtypeOf(datatype), peer, c, lossless(), streamOf(stream));
      });
}

// cclz has no broadcast: both forms go to NCCL, counted (route() never sends one to cclz).
CCLZ_NCCL_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                            ncclDataType_t datatype, int root, ncclComm_t comm,
                                            cudaStream_t stream) {
  const Call call{Op::Broadcast, datatype, count};
  return interpose(
      __func__, call, comm, stream, -1,
      [&] {
        return forward(__func__, real().broadcast, sendbuff, recvbuff, count, datatype, root, comm,
                       stream);
      },
      [](const CclzApi&, cclzComm_t) { return cclzInternalError; });
}

CCLZ_NCCL_EXPORT ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root,
                                        ncclComm_t comm, cudaStream_t stream) {
  const Call call{Op::Broadcast, datatype, count};
  return interpose(
      __func__, call, comm, stream, -1,
      [&] { return forward(__func__, real().bcast, buff, count, datatype, root, comm, stream); },
      [](const CclzApi&, cclzComm_t) { return cclzInternalError; });
}

// Groups nest per thread, in NCCL and here. NCCL ends a group in ncclGroupEnd (and
// ncclGroupSimulateEnd) whatever it returns, so the depth drops whatever it returns.
CCLZ_NCCL_EXPORT ncclResult_t ncclGroupStart() {
  const ncclResult_t r = forward(__func__, real().groupStart);
  if (r == ncclSuccess) ++groupDepth();
  return r;
}

CCLZ_NCCL_EXPORT ncclResult_t ncclGroupEnd() {
  const ncclResult_t r = forward(__func__, real().groupEnd);
  if (groupDepth() > 0) --groupDepth();
  return r;
}

CCLZ_NCCL_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  const ncclResult_t r = forward(__func__, real().groupSimulateEnd, simInfo);
  if (groupDepth() > 0) --groupDepth();
  return r;
}

// A communicator split off one of cclz's is cclz's too, so that whatever cclz splits off the
// communicator this library made for it is known as cclz's.
CCLZ_NCCL_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                                            ncclComm_t* newcomm, ncclConfig_t* config) {
  const ncclResult_t r = forward(__func__, real().commSplit, comm, color, key, newcomm, config);
  if ((r == ncclSuccess || r == ncclInProgress) && newcomm && *newcomm &&
      Registry::get().isInternal(comm))
    Registry::get().addInternal(*newcomm);
  return r;
}

// A user's communicator takes its companion with it. The handle leaves the registry before NCCL
// frees it, since a later communicator may get the same address.
CCLZ_NCCL_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (std::shared_ptr<Companion> companion = Registry::get().take(comm)) companion->destroy();
  Registry::get().removeInternal(comm);
  return forward(__func__, real().commDestroy, comm);
}

// The user's communicator first: if its companion is still being made (a split waiting for
// peers), aborting the user's communicator is what ends that wait.
CCLZ_NCCL_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  std::shared_ptr<Companion> companion = Registry::get().take(comm);
  Registry::get().removeInternal(comm);
  const ncclResult_t r = forward(__func__, real().commAbort, comm);
  if (companion) companion->abort();
  return r;
}
