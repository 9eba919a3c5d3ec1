#!/usr/bin/env bash
# Session 6, one H200, second call: the lossless whole-chunk decode path after the load fix
# (tests with the path and, if they fail, without it), then the lossless v2 and fp8 benchmarks.
set -u
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
B=build-device
P=$B/tools/cclz-perf/cclz-perf
for mode in whole general; do
  env=(); [ $mode = general ] && env=(CCLZ_LOSSLESS_DECODE=general)
  env "${env[@]}" ctest --test-dir $B -L gpu -R "Lossless|Fp8Gpu" -j8 --output-on-failure > $OUT/tests_$mode.log 2>&1
  echo "gpu tests ($mode): exit $? -- $(grep -E 'tests passed|tests failed' $OUT/tests_$mode.log)"
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" $OUT/tests_$mode.log | head -8
done
{
echo "== lossless bf16 v2 (whole path)"; $P --op codec --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 --json $OUT/l_bf16.json
echo "== lossless bf16 v2 (general path)"; CCLZ_LOSSLESS_DECODE=general $P --op codec --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 --json $OUT/l_bf16_general.json
echo "== lossless fp32 v2"; $P --op codec --device gpu -d fp32 -b 4M -e 256M -f 4 -n 20 -w 5 --json $OUT/l_fp32.json
echo "== lossless fp16 v2"; $P --op codec --device gpu -d fp16 -b 256M -e 256M -n 20 -w 5
echo "== lossless tensors v2"; $P --op codec --device gpu --input .data/index.json -n 10 -w 3 | grep summary
echo "== fp8 e4m3 row1024"; $P --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 --json $OUT/f_e4m3.json
echo "== fp8 int8 row1024"; $P --op codec --codec fp8 --fp8-format int8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
} > $OUT/bench.log 2>&1
grep -E '^==|^ +[0-9]|summary' $OUT/bench.log | cut -c1-150
echo "total: $(( $(date +%s) - start )) s"
