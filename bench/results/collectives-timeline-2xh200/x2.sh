#!/usr/bin/env bash
# : the move stream's priority (CCLZ_MOVE_PRIORITY=normal|high) over NVLink, side
# by side in one run, each compressed row beside plain NCCL (--batch); the socket transport with
# the default (high); the NCCL tests on 2 ranks first.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s); mkdir -p /tmp/pj
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
timeout 200 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
  $B/tests/collective/nccl_tests --gtest_brief=1 > $OUT/nccl_tests.log 2>&1
echo "nccl_tests 2 ranks: exit $? ($(( $(date +%s) - start )) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_tests.log | head -4 | tr '\n' ' ')"
sock=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_IB_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo -x NCCL_P2P_NET_CHUNKSIZE=524288)
run() {  # run NET PRIORITY NAME ARGS...
  local net=$1 prio=$2 name=$3; shift 3
  local extra=(); [ "$net" = socket ] && extra=("${sock[@]}")
  echo "== $net $prio $name: CCLZ_MOVE_PRIORITY=$prio cclz-perf $* --device gpu --batch" >> $OUT/bench.log
  timeout 150 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
    -x CCLZ_MOVE_PRIORITY=$prio "${extra[@]}" \
    $P "$@" --device gpu --batch --json /tmp/pj/${net}_${prio}_$name.json >> $OUT/bench.log 2>&1
  echo "$net $prio $name: exit $? ($(( $(date +%s) - start )) s)"
}
for prio in normal high; do
  run nvlink $prio allgather_fp8 --op allgather --codec fp8 -b 16M -e 256M -f 4 -n 20 -w 5
  run nvlink $prio reducescatter_fp8 --op reducescatter --codec fp8 -b 16M -e 256M -f 4 -n 20 -w 5
  run nvlink $prio allreduce_qgrad4 --op allreduce --codec qgrad --bits 4 -b 16M -e 256M -f 4 -n 20 -w 5
  run nvlink $prio allgather_lossless --op allgather --codec lossless -b 16M -e 256M -f 4 -n 20 -w 5
done
for prio in normal high; do
  run socket $prio allgather_fp8 --op allgather --codec fp8 -b 16M -e 256M -f 4 -n 11 -w 2
  run socket $prio reducescatter_fp8 --op reducescatter --codec fp8 -b 16M -e 256M -f 4 -n 11 -w 2
done
python3 - /tmp/pj $OUT/bench.json <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*_*.json")):
    try: rows += [dict(r, file=os.path.basename(f)) for r in json.load(open(f))]
    except Exception: pass
json.dump(rows, open(sys.argv[2], "w"), indent=1)
for r in rows:
    print("%-40s %5d MiB piece %3d MiB  cclz %8.0f us  nccl %8.0f us  x%.2f wrong %s" % (
        r["file"][:-5], r["bytes"] >> 20, r.get("piece_bytes", 0) >> 20, r["time_us"],
        r.get("baseline_time_us", 0), r.get("speedup", 0), r.get("wrong")))
PY
echo "total: $(( $(date +%s) - start )) s"
