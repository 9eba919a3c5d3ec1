#!/usr/bin/env bash
# which deferred mismatches the transport abort ends. Each
# NcclDeferredCheck case alone (traced, bounded), so that a hang shows which.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE)
for t in CountOnPlainData CountOnLosslessFrames RejectedArguments PlainDataAgainstLosslessFrames; do
  timeout 45 "${M[@]}" -x CCLZ_TRACE=1 $B/tests/collective/nccl_tests --gtest_filter="NcclDeferredCheck.$t" > /tmp/t.log 2>&1
  echo "$t: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' /tmp/t.log | head -2 | tr '\n' ' ')"
  echo "== $t" >> $OUT/deferred.log
  grep -E "deferred check failed|Failure|Expected|Which is|OK \]|FAILED" /tmp/t.log | cut -c1-200 >> $OUT/deferred.log
done
timeout 60 "${M[@]}" $B/tests/collective/nccl_tests --gtest_filter='NcclErrors*' > /tmp/e.log 2>&1
echo "NcclErrors: exit $? $(grep -E 'PASSED|FAILED' /tmp/e.log | head -2 | tr '\n' ' ')"
cat $OUT/deferred.log
echo "total: $(el) s"
