#!/usr/bin/env bash
# Session 5, 2x H200, second call: build; the NCCL tests on 2 ranks (sync, the async suite, the
# async behaviour test), each under a timeout; lossless all-gather sync vs CCLZ_ASYNC=1 over
# NVLink; an nsys trace of the codec none all-gather with the check on every call.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
J=/tmp/j; mkdir -p $J
if [ ! -f build-device/build.ninja ]; then
  bash scripts/device.sh build >/tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
else
  ninja -C build-device >/tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
fi
echo "build ok"
P=build-device/tools/cclz-perf/cclz-perf
M="mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE"
T=build-device/tests/collective
{
for t in "nccl_async_tests" "nccl_tests"; do
  for async in 1 0; do
    [ $t = nccl_async_tests ] && [ $async = 0 ] && continue
    echo "== $t CCLZ_ASYNC=$async"
    timeout 120 $M -x CCLZ_ASYNC=$async $T/$t --gtest_brief=1 2>&1 | tail -25
    echo "exit ${PIPESTATUS[0]}"
  done
done
} > $OUT/nccl.log 2>&1
grep -E '^==|^exit|PASSED|FAILED' $OUT/nccl.log
{
for async in 0 1; do
  echo "== nvlink allgather lossless, CCLZ_ASYNC=$async"
  timeout 70 $M -x CCLZ_ASYNC=$async $P --op allgather --codec lossless --device gpu -b 64K -e 256M -f 16 -n 10 -w 3 --json $J/lossless_ag_async$async.json
done
} > $OUT/bench.log 2>&1
grep -E '^==|^ +[0-9]' $OUT/bench.log | cut -c1-160
if command -v nsys >/dev/null; then
  $M -x CCLZ_CHECK_CALLS=1 nsys profile -t cuda,nvtx,osrt -o /tmp/j/none_%q{OMPI_COMM_WORLD_RANK} \
    $P --op allgather --codec none --device gpu -b 16M -e 16M -n 5 -w 2 >/dev/null 2>&1
  nsys stats -r cuda_gpu_trace -f csv -o /tmp/j/gpu0 /tmp/j/none_0.nsys-rep >/dev/null 2>&1
  nsys stats -r cuda_api_trace -f csv -o /tmp/j/api0 /tmp/j/none_0.nsys-rep >/dev/null 2>&1
  ls /tmp/j
else
  echo "no nsys"
fi
tar czf $OUT/j.tgz -C /tmp j
