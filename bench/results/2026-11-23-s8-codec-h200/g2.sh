#!/usr/bin/env bash
# Session 8, one H200, second call: every GPU test on main (the staged lossless encoder's new
# default of 4 warps, the fused reduce steps, the timeline), then Nsight Compute on the fp8
# row-choice kernels at 4 MiB (stall reasons and per-region samples).
set -u
cd "$(dirname "$0")/../../.."
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
timeout 420 ctest --test-dir $B -L gpu -j16 --timeout 120 > /tmp/t_all.log 2>&1
echo "gpu tests: exit $? -- $(grep -E 'tests passed|tests failed' /tmp/t_all.log) ($(el) s)" | tee $OUT/gpu_tests.txt
grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception|Not Run" /tmp/t_all.log | head -20 | tee -a $OUT/gpu_tests.txt
grep -B2 -A30 -E "\(Failed\)|Failure" /tmp/t_all.log | head -150 > $OUT/gpu_failures.txt
grep -c "Passed" /tmp/t_all.log >> $OUT/gpu_tests.txt
for k in shapeStatsKernel shapeSampleKernel; do
  timeout 90 ncu --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section SourceCounters -k "regex:$k" -c 1 -o /tmp/$k -f \
    $P --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 4M -n 1 -w 0 -c 0 > /tmp/ncu_$k.log 2>&1
  ncu --import /tmp/$k.ncu-rep --page details > $OUT/ncu_$k.details 2>&1
  ncu --import /tmp/$k.ncu-rep --page source --csv --print-source sass > /tmp/ncu_$k.csv 2>&1
  echo "== $k" >> $OUT/ncu_regions.txt
  python3 scripts/ncu_regions.py /tmp/ncu_$k.csv 20 >> $OUT/ncu_regions.txt 2>&1
  grep -E "Duration|Elapsed Cycles|Block Size|Grid Size|Achieved Occupancy|Stall|cycles per issued|Registers" $OUT/ncu_$k.details | head -20
done
echo "total: $(el) s"
