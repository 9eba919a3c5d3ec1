#include "overlap/schedule.h"

namespace cclz::overlap {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

Step gatherStep(int me, int n, int s) {
  Step step;
  step.compute = mod(me - s, n);
  if (s < n - 1) {
    step.sendTo = mod(me + 1, n), step.sendChunk = step.compute;
    step.recvFrom = mod(me - 1, n), step.recvChunk = mod(me - s - 1, n);
  }
  return step;
}

Step reduceScatterStep(int me, int n, int s) {
  Step step;
  step.compute = mod(me + s + 1, n);
  if (s < n - 1) {
    step.sendTo = step.compute, step.sendChunk = step.compute;
    step.recvFrom = mod(me - s - 1, n), step.recvChunk = me;
  }
  return step;
}

int reduceOrder(int me, int n, int i) {
  return i == n - 1 ? me : reduceScatterStep(me, n, i).recvFrom;
}

}  // namespace cclz::overlap
