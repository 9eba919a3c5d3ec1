#!/usr/bin/env bash
# Session 11, 2x H200, fourth call: the qgrad all-reduce against plain data under deferred
# checks blocked its caller for 2 s (the check's abort then waited its bound). Full trace of that
# test alone, then the reduce-scatter case, to see where the call blocks.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE)
for t in PlainDataAgainstQgradAllReduce CountOnFp8ReduceScatter; do
  timeout 60 "${M[@]}" -x CCLZ_TRACE=1 -x NCCL_DEBUG=WARN $B/tests/collective/nccl_tests \
    --gtest_filter="NcclDeferredCheck.$t" > $OUT/$t.log 2>&1
  echo "$t: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/$t.log | head -2 | tr '\n' ' ')"
done
echo "total: $(el) s"
