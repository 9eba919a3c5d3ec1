#!/usr/bin/env bash
# the transport now aborts both NCCL communicators at once.
# The three deferred mismatch tests that hung (now enabled) and the new one with later calls,
# five times over, traced; then the whole NCCL suite and the async suites on 2 ranks.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE)
timeout 150 "${M[@]}" -x CCLZ_TRACE=1 $B/tests/collective/nccl_tests --gtest_repeat=5 \
  --gtest_filter='NcclDeferredCheck*:NcclErrors*' > /tmp/d.log 2>&1
echo "deferred checks x5: exit $? ($(el) s) $(grep -cE '^.{0,12}\[  PASSED  \]' /tmp/d.log) passed-lines $(grep -c 'FAILED  \]' /tmp/d.log) failed-lines"
grep -E "ncclCommAbort|deferred check failed|Failure|Expected|Which is|OK \]|FAILED|Repeating" /tmp/d.log | cut -c1-220 > $OUT/deferred.log
timeout 300 "${M[@]}" $B/tests/collective/nccl_tests --gtest_brief=1 > $OUT/nccl_tests.log 2>&1
echo "nccl_tests (2 ranks): exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_tests.log | head -3 | tr '\n' ' ')"
timeout 240 ctest --test-dir $B -L async -R 2ranks --output-on-failure > $OUT/async.log 2>&1
echo "async suites (2 ranks): exit $? ($(el) s) $(grep -E 'tests passed|tests failed' $OUT/async.log)"
echo "total: $(el) s"
