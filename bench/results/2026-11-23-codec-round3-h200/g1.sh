#!/usr/bin/env bash
# Session 7, one H200, first call: build main (fp8-encode3 merged, staged lossless kernels), every
# GPU test, then the lossless paths and the fp8 encode paths side by side.
set -u
cd "$(dirname "$0")/../../.."
start=$(date +%s)
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
ctest --test-dir $B -L gpu -LE async_unsafe -j12 --output-on-failure --timeout 120 > /tmp/gpu.log 2>&1
echo "gpu tests: exit $? -- $(grep -E 'tests passed|tests failed' /tmp/gpu.log) ($(( $(date +%s) - start )) s)"
grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" /tmp/gpu.log | head -12
grep -E "tests passed|tests failed|Failed|Timeout|Total Test time" /tmp/gpu.log > $OUT/gpu_tests.txt
grep -B5 -A30 -E "\(Failed\)" /tmp/gpu.log | head -300 > $OUT/gpu_failures.txt
{
for path in general staged auto; do
  echo "== lossless bf16 $path"; CCLZ_LOSSLESS_PATH=$path $P --op codec --device gpu -d bf16 -b 1M -e 256M -f 4 -n 20 -w 5 --json $OUT/lossless_bf16_$path.json
  echo "== lossless fp32 $path"; CCLZ_LOSSLESS_PATH=$path $P --op codec --device gpu -d fp32 -b 1M -e 256M -f 4 -n 20 -w 5 --json $OUT/lossless_fp32_$path.json
done
for enc in default async; do
  e=""; [ $enc = async ] && e=async
  echo "== fp8 e4m3 row1024 $enc"; CCLZ_FP8_ENCODE=$e $P --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 --json $OUT/fp8_e4m3_$enc.json
  echo "== fp8 e4m3 auto rows $enc"; CCLZ_FP8_ENCODE=$e $P --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5 --json $OUT/fp8_e4m3_auto_$enc.json
done
echo "== fp8 int8 row1024"; $P --op codec --codec fp8 --fp8-format int8 --fp8-row-elems 1024 --device gpu -d bf16 -b 256M -e 256M -n 20 -w 5 --json $OUT/fp8_int8.json
echo "== fp8 e4m3 row1024 fp32 in"; $P --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d fp32 -b 256M -e 256M -n 20 -w 5 --json $OUT/fp8_e4m3_fp32.json
} > $OUT/bench.log 2>&1
grep -E '^==|^ +[0-9]|summary' $OUT/bench.log | cut -c1-150
echo "total: $(( $(date +%s) - start )) s"
