#!/usr/bin/env bash
# Session 9, 2x H200, fourth call: the plain path reusing the validated plan (e722ed6). The whole
# NCCL suite on 2 ranks, then the adaptive fp8 all-gather and reduce-scatter over NVLink with the
# check on the first call only, 64 KiB to 16 MiB (the host overhead per call shows there).
set -u
cd "$(dirname "$0")/../../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s); mkdir -p /tmp/pj
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
timeout 150 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
  $B/tests/collective/nccl_tests --gtest_brief=1 > $OUT/nccl_tests.log 2>&1
echo "nccl_tests 2 ranks: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_tests.log | head -4 | tr '\n' ' ')"
for op in allgather reducescatter; do
  echo "== nvlink ${op}_fp8_on: CCLZ_CHECK_CALLS=first cclz-perf --op $op --codec fp8 -b 64K -e 16M -f 4 -n 20 -w 5 --adaptive on --device gpu --batch" >> $OUT/bench.log
  timeout 100 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE -x CCLZ_CHECK_CALLS=first \
    $P --op $op --codec fp8 -b 64K -e 16M -f 4 -n 20 -w 5 --adaptive on --device gpu --batch --json /tmp/pj/${op}_fp8_on.json >> $OUT/bench.log 2>&1
  echo "$op: exit $? ($(el) s)"
done
python3 - /tmp/pj $OUT/bench.json <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    rows += [dict(r, file=os.path.basename(f)) for r in json.load(open(f))]
json.dump(rows, open(sys.argv[2], "w"), indent=1)
for r in rows:
    print("%-22s %9d B cclz %8.1f us nccl %8.1f us x%.2f %-10s wrong %s" % (r["file"][:-5], r["bytes"],
          r["time_us"], r.get("baseline_time_us", 0), r.get("speedup", 0), r.get("path"), r.get("wrong")))
PY
echo "total: $(el) s"
