#include "coll_runner.h"

#include "support/data.h"

namespace cclz::test {

cclzResult_t callCase(cclzComm_t comm, const CollCase& c, int n, int me, const void* send,
                      void* recv, cclzStream_t stream) {
  const cclzCodecConfig_t config = c.codec.config();
  const auto dtype = static_cast<cclzDataType_t>(c.dtype);
  switch (c.op) {
    case Coll::AllGather:
      return cclzAllGather(send, recv, c.count, dtype, comm, &config, stream);
    case Coll::ReduceScatter:
      return cclzReduceScatter(send, recv, c.count, dtype, c.redOp, comm, &config, stream);
    case Coll::AllReduce:
      return cclzAllReduce(send, recv, c.count, dtype, c.redOp, comm, &config, stream);
    case Coll::AllToAll:
      return cclzAllToAll(send, recv, c.count, dtype, comm, &config, stream);
    case Coll::SendRecv: {
      if (n < 2) return cclzSuccess;
      const int next = ringNext(me, n), prev = ringPrev(me, n);
      cclzResult_t r = cclzSuccess;
      if (me % 2 == 0) {
        r = cclzSend(send, c.count, dtype, next, comm, &config, stream);
        if (r == cclzSuccess) r = cclzRecv(recv, c.count, dtype, prev, comm, &config, stream);
      } else {
        r = cclzRecv(recv, c.count, dtype, prev, comm, &config, stream);
        if (r == cclzSuccess) r = cclzSend(send, c.count, dtype, next, comm, &config, stream);
      }
      return r;
    }
  }
  return cclzInternalError;
}

cclzResult_t runCase(cclzComm_t comm, const CollCase& c, int n, int me,
                     std::vector<uint8_t>* out) {
  const std::vector<uint8_t> in = makeInput(c, n, me);
  out->assign(recvElems(c, n) * elementSize(c.dtype), 0xA5);
  return callCase(comm, c, n, me, in.data(), out->data(), nullptr);
}

}  // namespace cclz::test
