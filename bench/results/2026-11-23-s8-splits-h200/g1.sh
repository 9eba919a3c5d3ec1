#!/usr/bin/env bash
# Session 8, one H200, call 1: devtest8 = main + lossless-enc-split + fp8-rowsplit. Build; the GPU
# tests of both branches (and main's fp8 change: warpFirstBinReaching); the side-by-side benchmarks.
set -u
cd "$(dirname "$0")/../../.."
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
t() {  # t NAME LIMIT ctest-args...: a test batch, its summary and failures
  local name=$1 limit=$2; shift 2
  timeout $limit ctest --test-dir $B -L gpu -j16 --output-on-failure --timeout 60 "$@" > /tmp/t_$name.log 2>&1
  echo "tests $name: exit $? -- $(grep -E 'tests passed|tests failed' /tmp/t_$name.log) ($(el) s)" | tee -a $OUT/gpu_tests.txt
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" /tmp/t_$name.log | head -8 | tee -a $OUT/gpu_tests.txt
  grep -B2 -A25 -E "\(Failed\)|Failure" /tmp/t_$name.log | head -120 >> $OUT/gpu_failures.txt
}
t fp8 120 -R "Fp8"
t lsplit 120 -R "^split[24]\."
{
for w in 1 2 4; do
  echo "== lossless bf16 encode warps $w"; CCLZ_LOSSLESS_ENCODE_WARPS=$w $P --op codec --device gpu -d bf16 -b 1M -e 256M -f 4 -n 20 -w 5
done
echo "== lossless fp32 encode warps 4"; CCLZ_LOSSLESS_ENCODE_WARPS=4 $P --op codec --device gpu -d fp32 -b 1M -e 16M -f 4 -n 20 -w 5
for s in off auto 2 4; do
  echo "== fp8 rows 1024 split $s"; CCLZ_FP8_SPLIT=$s $P --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 1M -e 256M -f 4 -n 20 -w 5
done
for s in off auto; do
  echo "== fp8 auto rows split $s"; CCLZ_FP8_SPLIT=$s $P --op codec --codec fp8 --device gpu -d bf16 -b 1M -e 256M -f 4 -n 20 -w 5
done
} > $OUT/bench.log 2>&1
grep -E '^==|^ +[0-9]' $OUT/bench.log | cut -c1-150
echo "benches done ($(el) s)"
{
for args in "--codec fp8 -d bf16 -b 4M -e 4M" "--codec lossless -d bf16 -b 4M -e 4M"; do
  echo "== ncu: $args"
  timeout 60 ncu --metrics gpu__time_duration.sum --csv --print-units base $P --op codec --device gpu $args -n 2 -w 0 -c 0 2>&1 | \
    grep -E '^"[0-9]' | awk -F'","' '{print substr($5,1,50), $NF}' | sed 's/"//g' | head -20
done
} > $OUT/ncu.txt 2>&1
cat $OUT/ncu.txt
echo "total: $(el) s"
