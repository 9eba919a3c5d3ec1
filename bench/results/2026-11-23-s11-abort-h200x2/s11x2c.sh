#!/usr/bin/env bash
# Session 11, 2x H200, third call: the timeline's end after its last span (fix), the deferred
# mismatch tests on the other ops, three times over, then the whole NCCL suite and the async
# suites on 2 ranks.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE)
timeout 150 "${M[@]}" -x CCLZ_TRACE=1 $B/tests/collective/nccl_tests --gtest_repeat=3 \
  --gtest_filter='NcclDeferredCheck*:NcclTimeline*' > /tmp/d.log 2>&1
echo "deferred checks + timeline x3: exit $? ($(el) s) $(grep -cE 'OK \]' /tmp/d.log) ok-lines $(grep -c 'FAILED  \]' /tmp/d.log) failed-lines"
grep -E "ncclCommAbort|deferred check failed|Failure|Expected|Which is|OK \]|FAILED|Repeating" /tmp/d.log | cut -c1-220 > $OUT/deferred.log
timeout 300 "${M[@]}" $B/tests/collective/nccl_tests --gtest_brief=1 > $OUT/nccl_tests.log 2>&1
echo "nccl_tests (2 ranks): exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_tests.log | head -3 | tr '\n' ' ')"
timeout 240 ctest --test-dir $B -L async -R 2ranks --output-on-failure > /tmp/async.log 2>&1
echo "async suites (2 ranks): exit $? ($(el) s) $(grep -E 'tests passed|tests failed' /tmp/async.log)"
grep -E "tests passed|Failed|Passed|Failure|Expected|FAILED" /tmp/async.log > $OUT/async.log
echo "total: $(el) s"
