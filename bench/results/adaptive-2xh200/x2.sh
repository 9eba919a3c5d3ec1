#!/usr/bin/env bash
# adaptive calls. Build; the whole NCCL suite on 2 ranks (the
# plan's path choice touched every call); then device.sh's adapt stage (NcclAdaptive, then
# adaptive on/off side by side over NVLink and the socket transport).
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
cp $OUT/summary.txt /tmp/sum_build; cp $OUT/device.log /tmp/log_build
echo "build: $(el) s"
B=build-device
timeout 150 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
  $B/tests/collective/nccl_tests --gtest_brief=1 > $OUT/nccl_tests.log 2>&1
echo "nccl_tests 2 ranks: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_tests.log | head -4 | tr '\n' ' ')"
grep -E "FAILED|Failure" -A5 $OUT/nccl_tests.log | head -20
timeout 380 bash scripts/dev/device.sh adapt > /tmp/adapt.out 2>&1
echo "adapt stage: exit $? ($(el) s)"
cat /tmp/sum_build $OUT/summary.txt > /tmp/sum_all; cp /tmp/sum_all $OUT/summary.txt
cat /tmp/log_build >> $OUT/device.log
cat $OUT/summary.txt
python3 - $OUT/bench.json <<'PY'
import json, sys
for b in json.load(open(sys.argv[1])):
    for r in b.get("rows", []):
        print("%-32s %9d B cclz %9.1f us nccl %9.1f us x%.2f %-10s wrong %s" % (b["name"][:32], r["bytes"],
              r["time_us"], r.get("baseline_time_us", 0), r.get("speedup", 0), r.get("path"), r.get("wrong")))
PY
echo "total: $(el) s"
