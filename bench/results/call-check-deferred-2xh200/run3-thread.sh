#!/usr/bin/env bash
# the checking thread does every control exchange. Build; the
# NCCL error tests traced (a deferred mismatch of each kind must become the async error without a
# hang); the rest of the NCCL suite and the async suites; then codec none over NVLink under each
# CCLZ_CHECK_CALLS mode back to back (--batch), and adaptive calls under the default, beside NCCL.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s); mkdir -p /tmp/pj
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE)
timeout 100 "${M[@]}" -x CCLZ_TRACE=1 $B/tests/collective/nccl_tests --gtest_filter='NcclErrors*' > /tmp/errors_trace.log 2>&1
echo "nccl_tests NcclErrors (traced): exit $? ($(el) s) $(grep -E 'PASSED|FAILED' /tmp/errors_trace.log | head -4 | tr '\n' ' ')"
grep -vE "nccl (data|control):|engine: (area|waiting|frame)|data part|check (deferred|answered)|count [0-9]+: check" /tmp/errors_trace.log > $OUT/nccl_errors.log
timeout 240 "${M[@]}" $B/tests/collective/nccl_tests --gtest_brief=1 --gtest_filter='-NcclErrors*' > $OUT/nccl_tests.log 2>&1
echo "nccl_tests rest: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_tests.log | head -4 | tr '\n' ' ')"
timeout 60 "${M[@]}" $B/tests/collective/nccl_tests --async-calls --gtest_brief=1 --gtest_filter='NcclErrors*:NcclCollective*allgather*' > $OUT/nccl_async_tests.log 2>&1
echo "nccl_tests --async-calls (errors, all-gathers): exit $? ($(el) s)"
timeout 60 "${M[@]}" $B/tests/collective/nccl_async_tests --gtest_brief=1 >> $OUT/nccl_async_tests.log 2>&1
echo "nccl_async_tests: exit $? ($(el) s)"
run() {  # run NAME ENV ARGS...
  local name=$1 env=$2; shift 2
  echo "== nvlink $name: $env cclz-perf $* --device gpu --batch" >> $OUT/perf.log
  timeout 60 "${M[@]}" -x $env $P "$@" --device gpu --batch --json /tmp/pj/$name.json >> $OUT/perf.log 2>&1
  echo "$name: exit $? ($(el) s)"
}
for mode in deferred first 1; do
  for op in allgather allreduce; do
    run ${op}_none_check_$mode CCLZ_CHECK_CALLS=$mode --op $op --codec none -b 64K -e 256M -f 16 -n 20 -w 5 --adaptive off
  done
done
run allgather_fp8_adaptive CCLZ_CHECK_CALLS=deferred --op allgather --codec fp8 -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive on
run reducescatter_fp8_adaptive CCLZ_CHECK_CALLS=deferred --op reducescatter --codec fp8 -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive on
run allgather_lossless_adaptive CCLZ_CHECK_CALLS=deferred --op allgather --codec lossless -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive on
python3 - /tmp/pj $OUT/bench.json <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    try: rows += [dict(r, file=os.path.basename(f)) for r in json.load(open(f))]
    except Exception: pass
json.dump(rows, open(sys.argv[2], "w"), indent=1)
for r in rows:
    print("%-30s %10d B cclz %8.1f us nccl %8.1f us x%.2f %-10s wrong %s" % (r["file"][:-5], r["bytes"],
          r["time_us"], r.get("baseline_time_us", 0), r.get("speedup", 0), r.get("path"), r.get("wrong")))
PY
grep -E "deferred check failed|aborted|Failure|FAILED|OK \]" $OUT/nccl_errors.log | cut -c1-220 | head -30
echo "total: $(el) s"
