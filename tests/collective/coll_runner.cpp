#include "coll_runner.h"

#include "support/data.h"

namespace cclz::test {

cclzResult_t runCase(cclzComm_t comm, const CollCase& c, int n, int me,
                     std::vector<uint8_t>* out) {
  const std::vector<uint8_t> in = makeInput(c, n, me);
  const size_t es = elementSize(c.dtype);
  out->assign(recvElems(c, n) * es, 0xA5);
  const cclzCodecConfig_t config = c.codec.config();
  const auto dtype = static_cast<cclzDataType_t>(c.dtype);
  switch (c.op) {
    case Coll::AllGather:
      return cclzAllGather(in.data(), out->data(), c.count, dtype, comm, &config, nullptr);
    case Coll::ReduceScatter:
      return cclzReduceScatter(in.data(), out->data(), c.count, dtype, c.redOp, comm, &config,
                               nullptr);
    case Coll::AllReduce:
      return cclzAllReduce(in.data(), out->data(), c.count, dtype, c.redOp, comm, &config,
                           nullptr);
    case Coll::AllToAll:
      return cclzAllToAll(in.data(), out->data(), c.count, dtype, comm, &config, nullptr);
    case Coll::SendRecv: {
      if (n < 2) return cclzSuccess;
      const int next = ringNext(me, n), prev = ringPrev(me, n);
      cclzResult_t r = cclzSuccess;
      if (me % 2 == 0) {
        r = cclzSend(in.data(), c.count, dtype, next, comm, &config, nullptr);
        if (r == cclzSuccess) r = cclzRecv(out->data(), c.count, dtype, prev, comm, &config, nullptr);
      } else {
        r = cclzRecv(out->data(), c.count, dtype, prev, comm, &config, nullptr);
        if (r == cclzSuccess) r = cclzSend(in.data(), c.count, dtype, next, comm, &config, nullptr);
      }
      return r;
    }
  }
  return cclzInternalError;
}

}  // namespace cclz::test
