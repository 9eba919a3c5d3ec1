#!/usr/bin/env bash
# Session 5, 2x H200: build; fp8 auto-row cost after the shape-kernel fix; codec none over NVLink
# with the call check on every call vs first only; lossless all-gather sync vs CCLZ_ASYNC=1; then
# the NCCL tests on 2 ranks (sync, async suite, async behaviour).
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
J=/tmp/j; mkdir -p $J
bash scripts/device.sh build >/tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
P=build-device/tools/cclz-perf/cclz-perf
M="mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE"
{
echo "== fp8 auto vs row1024"
$P --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 --json $J/fp8_auto.json
$P --op codec --codec fp8 --fp8-format int8 --device gpu -d bf16 -b 4M -e 256M -f 16 -n 20 -w 5 --json $J/fp8_int8_auto.json
$P --op codec --codec fp8 --device gpu --input .data/index.json -n 20 -w 5 --json $J/fp8_tensors_auto.json | tail -2
for chk in 1 first; do
  for op in allgather allreduce; do
    echo "== nvlink $op none, CCLZ_CHECK_CALLS=$chk"
    $M -x CCLZ_CHECK_CALLS=$chk $P --op $op --codec none --device gpu -b 64K -e 256M -f 16 -n 20 -w 5 --json $J/none_${op}_chk$chk.json
  done
done
for async in 0 1; do
  echo "== nvlink allgather lossless, CCLZ_ASYNC=$async"
  $M -x CCLZ_ASYNC=$async $P --op allgather --codec lossless --device gpu -b 64K -e 256M -f 16 -n 10 -w 3 --json $J/lossless_ag_async$async.json
done
} > $OUT/bench.log 2>&1
grep -v '^#   ' $OUT/bench.log | grep -E '^==|^ +[0-9]|summary' | cut -c1-160
tar czf $OUT/json.tgz -C /tmp j
ctest --test-dir build-device -R 'nccl_.*2ranks' --timeout 280 --output-on-failure > $OUT/nccl.log 2>&1
echo "nccl ctest: exit $?"; grep -E 'Test +#|tests passed|tests failed|Total Test' $OUT/nccl.log
