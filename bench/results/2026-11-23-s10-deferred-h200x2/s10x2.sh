#!/usr/bin/env bash
# Session 10, 2x H200, first call: deferred call checks (CCLZ_CHECK_CALLS=deferred, the default)
# and plain data on the caller's stream. Build; the NCCL error tests first (a deferred mismatch
# must become the async error without a hang), then the rest of the NCCL suite under the default
# (every call past an op's first has a deferred check), the async suites; then device.sh's check
# stage (codec none, deferred / every call / first only) and adaptive calls over NVLink under the
# default check, beside plain NCCL.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s); mkdir -p /tmp/pj
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE)
timeout 120 "${M[@]}" $B/tests/collective/nccl_tests --gtest_filter='NcclErrors*' > $OUT/nccl_errors.log 2>&1
echo "nccl_tests NcclErrors: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_errors.log | head -4 | tr '\n' ' ')"
timeout 240 "${M[@]}" $B/tests/collective/nccl_tests --gtest_brief=1 --gtest_filter='-NcclErrors*' > $OUT/nccl_tests.log 2>&1
echo "nccl_tests rest: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_tests.log | head -4 | tr '\n' ' ')"
timeout 60 "${M[@]}" $B/tests/collective/nccl_tests --async-calls --gtest_filter='NcclErrors*' > $OUT/nccl_async_errors.log 2>&1
echo "nccl_tests --async-calls NcclErrors: exit $? ($(el) s)"
timeout 60 "${M[@]}" $B/tests/collective/nccl_async_tests --gtest_brief=1 > $OUT/nccl_async.log 2>&1
echo "nccl_async_tests: exit $? ($(el) s)"
timeout 200 bash scripts/device.sh check > /tmp/check.out 2>&1
echo "check stage: exit $? ($(el) s)"
run() {  # run NAME ARGS...
  local name=$1; shift
  echo "== nvlink $name: cclz-perf $* --device gpu --batch" >> $OUT/adapt.log
  timeout 100 "${M[@]}" $P "$@" --device gpu --batch --json /tmp/pj/$name.json >> $OUT/adapt.log 2>&1
  echo "$name: exit $? ($(el) s)"
}
run allgather_fp8_adaptive --op allgather --codec fp8 -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive on
run reducescatter_fp8_adaptive --op reducescatter --codec fp8 -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive on
run allgather_lossless_adaptive --op allgather --codec lossless -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive on
python3 - /tmp/pj $OUT/adapt.json <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    try: rows += [dict(r, file=os.path.basename(f)) for r in json.load(open(f))]
    except Exception: pass
json.dump(rows, open(sys.argv[2], "w"), indent=1)
for r in rows:
    print("%-28s %10d B cclz %8.1f us nccl %8.1f us x%.2f %-10s wrong %s" % (r["file"][:-5], r["bytes"],
          r["time_us"], r.get("baseline_time_us", 0), r.get("speedup", 0), r.get("path"), r.get("wrong")))
PY
python3 - $OUT/bench.json <<'PY'
import json, sys
for b in json.load(open(sys.argv[1])):
    for r in b.get("rows", []):
        print("%-34s %10d B cclz %8.1f us nccl %8.1f us x%.2f wrong %s" % (b["name"][:34], r["bytes"],
              r["time_us"], r.get("baseline_time_us", 0), r.get("speedup", 0), r.get("wrong")))
PY
grep -A3 "FAILED\|Failure" $OUT/nccl_errors.log | head -30
echo "total: $(el) s"
