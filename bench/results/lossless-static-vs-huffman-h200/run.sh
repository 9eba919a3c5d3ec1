#!/usr/bin/env bash
# : build, all tests (GPU ones included), then the lossless v1/v2 and fp8
# benchmarks after the helpers' kernel changes.
set -u
cd "$(dirname "$0")/.."
bash scripts/dev/device.sh build tests > /tmp/dev.out 2>&1; echo "device.sh build tests: exit $?"
cp $OUT/summary.txt /tmp/summary.tests; cat /tmp/summary.tests
P=build-device/tools/cclz-perf/cclz-perf
{
for v in 1 2; do
  echo "== lossless bf16 v$v"; $P --op codec --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 --format-version $v
  echo "== lossless fp32 v$v"; $P --op codec --device gpu -d fp32 -b 256M -e 256M -n 20 -w 5 --format-version $v
done
echo "== lossless tensors v2"; $P --op codec --device gpu --input .data/index.json -n 10 -w 3 --format-version 2 | grep summary
echo "== fp8 e4m3 row1024"; $P --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
echo "== fp8 int8 row1024"; $P --op codec --codec fp8 --fp8-format int8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
echo "== fp8 e4m3 auto"; $P --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
echo "== fp8 e4m3 tensors auto"; $P --op codec --codec fp8 --device gpu --input .data/index.json -n 10 -w 3 | grep summary
} > $OUT/bench.log 2>&1
grep -E '^==|^ +[0-9]|summary' $OUT/bench.log | cut -c1-175
