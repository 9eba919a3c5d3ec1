#include "route.h"

#include <cstdint>

namespace cclz::interpose {
namespace {

size_t elementBytes(int dtype) {
  switch (dtype) {
    case cclzFloat16:
    case cclzBfloat16:
      return 2;
    case cclzFloat32:
      return 4;
    default:
      return 0;
  }
}

bool overlap(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

}  // namespace

bool isPointToPoint(Op op) { return op == Op::Send || op == Op::Recv; }
bool isReduction(Op op) { return op == Op::AllReduce || op == Op::ReduceScatter; }

Reason route(const Call& call, int groupDepth, const Settings& settings) {
  if (!settings.enabled) return Reason::Off;
  if (call.op == Op::Broadcast) return Reason::NoCclzOp;
  if (isReduction(call.op) &&
      (!settings.reduce || (call.redOp != cclzSum && call.redOp != cclzAvg)))
    return Reason::Reduction;
  const size_t bytes = elementBytes(call.dtype);
  if (bytes == 0) return Reason::Dtype;
  if (call.count == 0) return Reason::Empty;
  // Before the buffers: a call in a group is never cclz's, whatever else it is.
  if (groupDepth > 0) return Reason::Group;
  // NCCL's in-place forms of all-gather, reduce-scatter and all-reduce are cclz's too (cclz.h,
  // "Collectives"); an all-to-all in place is not.
  if (call.op == Op::AllToAll && call.ranks > 0 &&
      overlap(call.send, call.recv, call.count * static_cast<size_t>(call.ranks) * bytes))
    return Reason::InPlace;
  return Reason::None;
}

const char* opName(Op op) {
  switch (op) {
    case Op::AllGather:
      return "all-gather";
    case Op::Broadcast:
      return "broadcast";
    case Op::Send:
      return "send";
    case Op::Recv:
      return "recv";
    case Op::AllToAll:
      return "all-to-all";
    case Op::AllReduce:
      return "all-reduce";
    case Op::ReduceScatter:
      return "reduce-scatter";
    case Op::Count:
      break;
  }
  return "?";
}

const char* reasonName(Reason r) {
  switch (r) {
    case Reason::None:
      return "none";
    case Reason::Internal:
      return "internal";
    case Reason::Off:
      return "off";
    case Reason::NoCclzOp:
      return "no-cclz-op";
    case Reason::Reduction:
      return "reduction";
    case Reason::Dtype:
      return "dtype";
    case Reason::Empty:
      return "empty";
    case Reason::Group:
      return "group";
    case Reason::InPlace:
      return "in-place";
    case Reason::Peer:
      return "peer";
    case Reason::Capture:
      return "capture";
    case Reason::Cuda:
      return "cuda";
    case Reason::NoCompanion:
      return "no-companion";
    case Reason::Unavailable:
      return "unavailable";
    case Reason::Count:
      break;
  }
  return "?";
}

}  // namespace cclz::interpose
