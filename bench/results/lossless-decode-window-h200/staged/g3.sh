#!/usr/bin/env bash
# main with the lossless window loop and the fp8 sampling rewrite
# merged. Build; the GPU tests of both (fp8 three times, then once without PDL); the benchmarks;
# then the whole lossless GPU suite with what time is left.
set -u
cd "$(dirname "$0")/../../.."
start=$(date +%s)
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
t() {  # t NAME ctest-args...: a test batch, its summary and failures
  local name=$1; shift
  timeout 150 ctest --test-dir $B -L gpu -j16 --output-on-failure --timeout 60 "$@" > /tmp/t_$name.log 2>&1
  echo "tests $name: exit $? -- $(grep -E 'tests passed|tests failed' /tmp/t_$name.log) ($(( $(date +%s) - start )) s)" | tee -a $OUT/gpu_tests.txt
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" /tmp/t_$name.log | head -8 | tee -a $OUT/gpu_tests.txt
  grep -B2 -A25 -E "\(Failed\)|Failure" /tmp/t_$name.log | head -120 >> $OUT/gpu_failures.txt
}
t window -R "^(LosslessGpuV2|LosslessGpuRealTensors|lane\.)"
t fp8 -R "Fp8" --repeat until-fail:3
export CCLZ_FP8_PDL=0; t fp8_nopdl -R "Fp8"; unset CCLZ_FP8_PDL
{
for w in on off; do
  echo "== lossless bf16 window $w"; CCLZ_LOSSLESS_WINDOW=$w $P --op codec --device gpu -d bf16 -b 1M -e 256M -f 4 -n 20 -w 5
done
echo "== lossless fp32 window on"; $P --op codec --device gpu -d fp32 -b 1M -e 16M -f 4 -n 20 -w 5
echo "== fp8 e4m3 auto rows"; $P --op codec --codec fp8 --device gpu -d bf16 -b 1M -e 256M -f 4 -n 20 -w 5
echo "== fp8 e4m3 auto rows, no PDL"; CCLZ_FP8_PDL=0 $P --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
echo "== fp8 e4m3 rows 1024"; $P --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 1M -e 256M -f 4 -n 20 -w 5
echo "== fp8 int8 auto rows"; $P --op codec --codec fp8 --fp8-format int8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
} > $OUT/bench.log 2>&1
grep -E '^==|^ +[0-9]' $OUT/bench.log | cut -c1-150
echo "benches done ($(( $(date +%s) - start )) s)"
{
for args in "--codec lossless -d bf16 -b 4M -e 4M" "--codec fp8 -d bf16 -b 4M -e 4M"; do
  echo "== ncu: $args"
  timeout 60 ncu --metrics gpu__time_duration.sum --csv --print-units base $P --op codec --device gpu $args -n 2 -w 0 -c 0 2>&1 | \
    grep -E '^"[0-9]' | awk -F'","' '{print substr($5,1,50), $NF}' | sed 's/"//g' | head -20
done
} > $OUT/ncu.txt 2>&1
cat $OUT/ncu.txt
t lossless_all -R "^All/LosslessGpu"
echo "total: $(( $(date +%s) - start )) s"
