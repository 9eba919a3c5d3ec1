#!/usr/bin/env bash
# Session 6, one H200, last call: main as it stands (the lossless decoder back to session 5's,
# fp8 round 2 without the accumulator prefetch): every GPU test, then the codec benchmarks.
set -u
cd "$(dirname "$0")/.."
start=$(date +%s)
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
ctest --test-dir $B -L gpu -LE async_unsafe -j8 --output-on-failure > /tmp/gpu.log 2>&1
echo "gpu tests: exit $? -- $(grep -E 'tests passed|tests failed' /tmp/gpu.log)"
grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" /tmp/gpu.log | head -8
grep -E "tests passed|tests failed|Failed|Timeout" /tmp/gpu.log > $OUT/gpu_tests.txt
{
echo "== lossless bf16 v2"; $P --op codec --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 --json $OUT/lossless_bf16.json
echo "== lossless fp32 v2"; $P --op codec --device gpu -d fp32 -b 256M -e 256M -n 20 -w 5 --json $OUT/lossless_fp32.json
echo "== fp8 e4m3 row1024"; $P --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 --json $OUT/fp8_e4m3.json
echo "== fp8 int8 row1024"; $P --op codec --codec fp8 --fp8-format int8 --fp8-row-elems 1024 --device gpu -d bf16 -b 256M -e 256M -n 20 -w 5 --json $OUT/fp8_int8.json
echo "== fp8 e4m3 auto rows"; $P --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 --json $OUT/fp8_e4m3_auto.json
} > $OUT/bench.log 2>&1
grep -E '^==|^ +[0-9]|summary' $OUT/bench.log | cut -c1-150
echo "total: $(( $(date +%s) - start )) s"
