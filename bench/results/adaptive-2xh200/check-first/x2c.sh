#!/usr/bin/env bash
# adaptive calls over NVLink with the call check on the first
# call of each kind only (CCLZ_CHECK_CALLS=first): what the plain path costs without the
# per-call check, beside plain NCCL; adaptive off with the same setting beside it.
set -u
cd "$(dirname "$0")/../../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s); mkdir -p /tmp/pj
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
run() {  # run NAME ARGS...
  local name=$1; shift
  echo "== nvlink $name: CCLZ_CHECK_CALLS=first cclz-perf $* --device gpu --batch" >> $OUT/bench.log
  timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
    -x CCLZ_CHECK_CALLS=first $P "$@" --device gpu --batch --json /tmp/pj/$name.json >> $OUT/bench.log 2>&1
  echo "$name: exit $? ($(el) s)"
}
for mode in on off; do
  run allgather_fp8_$mode --op allgather --codec fp8 -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive $mode
  run reducescatter_fp8_$mode --op reducescatter --codec fp8 -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive $mode
  run allgather_lossless_$mode --op allgather --codec lossless -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive $mode
  run allreduce_qgrad4_$mode --op allreduce --codec qgrad --bits 4 -b 64K -e 256M -f 16 -n 10 -w 3 --adaptive $mode
done
python3 - /tmp/pj $OUT/bench.json <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*.json")):
    try: rows += [dict(r, file=os.path.basename(f)) for r in json.load(open(f))]
    except Exception: pass
json.dump(rows, open(sys.argv[2], "w"), indent=1)
for r in rows:
    print("%-26s %9d B cclz %8.1f us nccl %8.1f us x%.2f %-10s wrong %s" % (r["file"][:-5], r["bytes"],
          r["time_us"], r.get("baseline_time_us", 0), r.get("speedup", 0), r.get("path"), r.get("wrong")))
PY
echo "total: $(el) s"
