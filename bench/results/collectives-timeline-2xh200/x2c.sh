#!/usr/bin/env bash
# the fused first and last steps of the reduce-scatter's sum
# (ReduceStep). Tests first (the fp8 codec's fused steps against the steps apart; the NCCL tests
# on 2 ranks: device results against the host path), then the sweeps with the timeline.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s); mkdir -p /tmp/pj
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
timeout 120 ctest --test-dir $B -L gpu -j8 --output-on-failure --timeout 100 -R "Fp8GpuReduce|Fp8Gpu\.|Fp8GpuTensors|Qgrad" > $OUT/gpu_tests.log 2>&1
echo "gpu tests: exit $? $(grep -E 'tests passed|tests failed' $OUT/gpu_tests.log) ($(el) s)"
grep -E "^\s+[0-9]+ - .*\(Failed|Timeout|Exception" $OUT/gpu_tests.log | head
timeout 200 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
  $B/tests/collective/nccl_tests --gtest_brief=1 > $OUT/nccl_tests.log 2>&1
echo "nccl_tests 2 ranks: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_tests.log | head -4 | tr '\n' ' ')"
sock=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_IB_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo -x NCCL_P2P_NET_CHUNKSIZE=524288)
run() {  # run NET NAME ARGS...
  local net=$1 name=$2; shift 2
  local extra=(); [ "$net" = socket ] && extra=("${sock[@]}")
  echo "== $net $name: cclz-perf $* --device gpu --batch" >> $OUT/bench.log
  timeout 150 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
    "${extra[@]}" $P "$@" --device gpu --batch --json /tmp/pj/${net}_$name.json >> $OUT/bench.log 2>&1
  echo "$net $name: exit $? ($(el) s)"
}
run nvlink reducescatter_fp8 --op reducescatter --codec fp8 -b 16M -e 256M -f 4 -n 20 -w 5
run nvlink allreduce_fp8 --op allreduce --codec fp8 -b 16M -e 256M -f 4 -n 20 -w 5
run nvlink allgather_fp8 --op allgather --codec fp8 -b 16M -e 256M -f 4 -n 20 -w 5
run socket reducescatter_fp8 --op reducescatter --codec fp8 -b 16M -e 256M -f 4 -n 11 -w 2
run socket allgather_fp8 --op allgather --codec fp8 -b 16M -e 256M -f 4 -n 11 -w 2
python3 - /tmp/pj $OUT/bench.json <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*_*.json")):
    try: rows += [dict(r, file=os.path.basename(f)) for r in json.load(open(f))]
    except Exception: pass
json.dump(rows, open(sys.argv[2], "w"), indent=1)
for r in rows:
    print("%-30s %5d MiB piece %3d MiB  cclz %8.0f us  nccl %8.0f us  x%.2f nmse %.2e wrong %s" % (
        r["file"][:-5], r["bytes"] >> 20, r.get("piece_bytes", 0) >> 20, r["time_us"],
        r.get("baseline_time_us", 0), r.get("speedup", 0), r.get("nmse") or 0, r.get("wrong")))
PY
echo "== fp8 reduce-scatter 256M timeline" >> $OUT/timeline.log
timeout 60 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE -x CCLZ_TIMELINE=1 \
  $P --op reducescatter --codec fp8 -b 256M -e 256M --device gpu -n 2 -w 1 > /tmp/tl.log 2>&1
first=$(grep -m1 -o 'cclz-timeline pid [0-9]*' /tmp/tl.log | awk '{print $3}')
grep -E "^ +[0-9]" /tmp/tl.log >> $OUT/timeline.log
grep "cclz-timeline pid $first " /tmp/tl.log | sed 's/cclz-timeline pid [0-9]* //' | tail -14 >> $OUT/timeline.log
tail -15 $OUT/timeline.log
echo "total: $(el) s"
