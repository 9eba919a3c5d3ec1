#!/usr/bin/env bash
# trial branch = main + nccl-windows + qgrad-reducestep.
# Build; qgrad's GPU tests (the fused reduce steps); the NCCL tests on 2 ranks with the default
# settings; then device.sh's ncclwin stage (NCCL tests with windows + zero CTAs, then NVLink
# sweeps default vs windows side by side); last, the fp8 all-gather timeline both ways.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
cp $OUT/summary.txt /tmp/sum_build; cp $OUT/device.log /tmp/log_build
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
timeout 150 ctest --test-dir $B -L gpu -j8 --output-on-failure --timeout 100 -R "Qgrad" > $OUT/gpu_tests.log 2>&1
echo "gpu tests (Qgrad): exit $? $(grep -E 'tests passed|tests failed' $OUT/gpu_tests.log) ($(el) s)"
grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" $OUT/gpu_tests.log | head
timeout 200 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
  $B/tests/collective/nccl_tests --gtest_brief=1 > $OUT/nccl_tests.log 2>&1
echo "nccl_tests 2 ranks default: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_tests.log | head -4 | tr '\n' ' ')"
timeout 330 bash scripts/dev/device.sh ncclwin > /tmp/ncclwin.out 2>&1
echo "ncclwin stage: exit $? ($(el) s)"
cat /tmp/sum_build $OUT/summary.txt > /tmp/sum_all; cp /tmp/sum_all $OUT/summary.txt
cat /tmp/log_build >> $OUT/device.log
for setting in default windows; do
  extra=(); [ $setting = windows ] && extra=(-x CCLZ_NCCL_WINDOWS=1 -x CCLZ_NCCL_CTA_POLICY=zero)
  echo "== fp8 all-gather 256M timeline, $setting" >> $OUT/timeline.log
  timeout 60 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE -x CCLZ_TIMELINE=1 \
    "${extra[@]}" $P --op allgather --codec fp8 -b 256M -e 256M --device gpu -n 2 -w 1 > /tmp/tl.log 2>&1
  first=$(grep -m1 -o 'cclz-timeline pid [0-9]*' /tmp/tl.log | awk '{print $3}')
  grep -E "^ +[0-9]" /tmp/tl.log >> $OUT/timeline.log
  grep "cclz-timeline pid $first " /tmp/tl.log | sed 's/cclz-timeline pid [0-9]* //' | tail -14 >> $OUT/timeline.log
done
cat $OUT/summary.txt
python3 - $OUT/bench.json <<'PY'
import json, sys
for b in json.load(open(sys.argv[1])):
    for r in b.get("rows", []):
        print("%-34s %5d MiB cclz %8.0f us nccl %8.0f us x%.2f wrong %s" % (b["name"][:34], r["bytes"] >> 20,
              r["time_us"], r.get("baseline_time_us", 0), r.get("speedup", 0), r.get("wrong")))
PY
tail -30 $OUT/timeline.log
echo "total: $(el) s"
