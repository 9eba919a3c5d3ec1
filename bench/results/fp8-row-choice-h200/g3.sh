#!/usr/bin/env bash
# the fp8 statistics kernel without 64-bit shared atomics (its
# decisions checked by the fp8 GPU tests, frames byte for byte), the lossless suite on the new
# default (4 warps per staged chunk), the fp8 benchmarks, ncu's duration of the sampling kernels.
set -u
cd "$(dirname "$0")/../../.."
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
t() {  # t NAME LIMIT ctest-args...
  local name=$1 limit=$2; shift 2
  timeout $limit ctest --test-dir $B -L gpu -j16 --output-on-failure --timeout 150 "$@" > /tmp/t_$name.log 2>&1
  echo "tests $name: exit $? -- $(grep -E 'tests passed|tests failed' /tmp/t_$name.log) [$(grep -c ' Passed ' /tmp/t_$name.log) passed lines] ($(el) s)" | tee -a $OUT/gpu_tests.txt
  grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" /tmp/t_$name.log | head -8 | tee -a $OUT/gpu_tests.txt
  grep -B2 -A25 -E "\(Failed\)|Failure" /tmp/t_$name.log | head -120 >> $OUT/gpu_failures.txt
}
t fp8 100 -R "Fp8"
{
echo "== fp8 e4m3 auto rows"; $P --op codec --codec fp8 --device gpu -d bf16 -b 1M -e 256M -f 4 -n 20 -w 5 --json /tmp/fp8_auto.json
echo "== fp8 e4m3 rows 1024"; $P --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 1M -e 256M -f 4 -n 20 -w 5 --json /tmp/fp8_1024.json
} > $OUT/bench.log 2>&1
python3 -c "
import json; rows=[]
for n in ['auto','1024']: rows += [dict(r, run='fp8 rows '+n) for r in json.load(open('/tmp/fp8_%s.json'%n))]
json.dump(rows, open('$OUT/bench.json','w'), indent=1)"
grep -E '^==|^ +[0-9]' $OUT/bench.log | cut -c1-150
timeout 60 ncu --metrics gpu__time_duration.sum --csv --print-units base $P --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 4M -n 2 -w 0 -c 0 2>&1 | \
  grep -E '^"[0-9]' | awk -F'","' '{print substr($5,1,50), $NF}' | sed 's/"//g' | head -12 | tee $OUT/ncu.txt
echo "benches done ($(el) s)"
t lossless_default 330 -R "^All/LosslessGpu"
echo "total: $(el) s"
