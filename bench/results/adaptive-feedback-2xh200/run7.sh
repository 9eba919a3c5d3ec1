#!/usr/bin/env bash
# the plain trials of feedback calls timed without the addition of the
# residual (run6 settled the 16 MiB kinds on the codec). The NCCL adaptive tests, then the qgrad int4 all-reduce and reduce-scatter
# with error feedback over NVLink, adaptive on (plain calls take the residual along) and off (the
# codec path), beside NCCL.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE)
timeout 100 "${M[@]}" $B/tests/collective/nccl_tests --gtest_filter='NcclAdaptive*' > $OUT/nccl_adaptive.log 2>&1
echo "nccl_tests NcclAdaptive: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_adaptive.log | head -4 | tr '\n' ' ')"
mkdir -p /tmp/pj
run() {  # run NAME ARGS...
  local name=$1; shift
  echo "== nvlink $name: cclz-perf $* --device gpu --batch" >> $OUT/perf.log
  timeout 90 "${M[@]}" $P "$@" --device gpu --batch --json /tmp/pj/$name.json >> $OUT/perf.log 2>&1
  echo "$name: exit $? ($(el) s)"
}
for op in allreduce reducescatter; do
  for a in on off; do
    run ${op}_qgrad4_feedback_adaptive_$a --op $op --codec qgrad --bits 4 --feedback 1 -d fp32 -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive $a
  done
done
python3 - /tmp/pj $OUT/bench.json <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    try: rows += [dict(r, file=os.path.basename(f)) for r in json.load(open(f))]
    except Exception: pass
json.dump(rows, open(sys.argv[2], "w"), indent=1)
for r in rows:
    print("%-44s %10d B cclz %8.1f us nccl %8.1f us x%.2f %-10s wrong %s" % (r["file"][:-5], r["bytes"],
          r["time_us"], r.get("baseline_time_us", 0), r.get("speedup", 0), r.get("path"), r.get("wrong")))
PY
echo "total: $(el) s"
