#!/usr/bin/env bash
# : main with the request-based async calls merged. Build; the async tests
# (first GPU run) and the NCCL collective tests on 2 ranks; then the socket sweep with nccl-tests'
# timing (--batch) at 16 and 256 MiB, each compressed row beside plain NCCL.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
ctest --test-dir $B -L async -R 2ranks --output-on-failure --timeout 60 > $OUT/async.log 2>&1
echo "async tests: exit $? -- $(grep -E 'tests passed|tests failed' $OUT/async.log) ($(( $(date +%s) - start )) s)"
grep -E "Failed|Timeout|Passed" $OUT/async.log | head
if grep -q Timeout $OUT/async.log; then
  CCLZ_TRACE=1 timeout 30 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE -x CCLZ_TRACE \
    $B/tests/collective/nccl_async_tests --gtest_brief=1 > $OUT/async_trace.log 2>&1
  echo "traced async run: exit $?"
fi
timeout 200 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
  $B/tests/collective/nccl_tests --gtest_brief=1 > $OUT/nccl_tests.log 2>&1
echo "nccl_tests 2 ranks: exit $? ($(( $(date +%s) - start )) s)"
grep -E "PASSED|FAILED|tests ran" $OUT/nccl_tests.log | head -5
sock=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_IB_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo -x NCCL_P2P_NET_CHUNKSIZE=524288)
run() {  # run NAME ARGS...
  local name=$1; shift
  echo "== socket $name: cclz-perf $* --batch -b 16M -e 256M -f 16 -n 11 -w 2" >> $OUT/bench.log
  timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE "${sock[@]}" \
    $P "$@" --device gpu --batch -b 16M -e 256M -f 16 -n 11 -w 2 >> $OUT/bench.log 2>&1
  echo "$name: exit $? ($(( $(date +%s) - start )) s)"
}
run allgather_fp8 --op allgather --codec fp8
run reducescatter_fp8 --op reducescatter --codec fp8
run allgather_lossless --op allgather --codec lossless
run allreduce_qgrad4 --op allreduce --codec qgrad --bits 4
run allgather_none --op allgather --codec none
run reducescatter_none --op reducescatter --codec none
grep -E '^==|^ +[0-9]' $OUT/bench.log | cut -c1-200
echo "total: $(( $(date +%s) - start )) s"
