#!/usr/bin/env bash
# Session 11, 2x H200, fifth call: the deferred mismatch tests, three times over, after the test
# accepts that a mismatched call which queues more than NCCL's queue holds fails with the
# check's error (run4: the qgrad all-reduce's 768 operations blocked in NCCL until the abort).
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE)
timeout 200 "${M[@]}" -x CCLZ_TRACE=1 $B/tests/collective/nccl_tests --gtest_repeat=3 \
  --gtest_filter='NcclDeferredCheck*:NcclErrors*' > /tmp/d.log 2>&1
echo "deferred checks x3: exit $? ($(el) s) $(grep -cE 'OK \]' /tmp/d.log) ok-lines $(grep -c 'FAILED  \]' /tmp/d.log) failed-lines"
grep -E "ncclCommAbort|deferred check failed|Failure|Expected|Which is|OK \]|FAILED|Repeating" /tmp/d.log | cut -c1-220 > $OUT/deferred.log
echo "total: $(el) s"
