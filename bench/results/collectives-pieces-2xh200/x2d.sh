#!/usr/bin/env bash
# the per-call piece (default rule) over the socket transport and
# NVLink, --batch, each compressed row beside plain NCCL; the NCCL tests on 2 ranks first.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s); mkdir -p /tmp/pj
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
timeout 200 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
  $B/tests/collective/nccl_tests --gtest_brief=1 > /tmp/nccl_tests.log 2>&1
echo "nccl_tests 2 ranks: exit $? ($(( $(date +%s) - start )) s) $(grep -cE 'PASSED' /tmp/nccl_tests.log) PASSED lines"
sock=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_IB_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo -x NCCL_P2P_NET_CHUNKSIZE=524288)
run() {  # run NET NAME ARGS...
  local net=$1 name=$2; shift 2
  local extra=(); [ "$net" = socket ] && extra=("${sock[@]}")
  echo "== $net $name: cclz-perf $* --batch --json $name.json" >> $OUT/bench.log
  timeout 150 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE "${extra[@]}" \
    $P "$@" --device gpu --batch --json /tmp/pj/${net}_$name.json >> $OUT/bench.log 2>&1
  echo "$net $name: exit $? ($(( $(date +%s) - start )) s)"
}
run socket allgather_fp8 --op allgather --codec fp8 -b 16M -e 256M -f 4 -n 11 -w 2
run socket reducescatter_fp8 --op reducescatter --codec fp8 -b 16M -e 256M -f 4 -n 11 -w 2
run socket allreduce_qgrad4 --op allreduce --codec qgrad --bits 4 -b 16M -e 256M -f 4 -n 11 -w 2
run socket allgather_lossless --op allgather --codec lossless -b 16M -e 256M -f 4 -n 11 -w 2
run nvlink allgather_fp8 --op allgather --codec fp8 -b 16M -e 256M -f 4 -n 20 -w 5
run nvlink reducescatter_fp8 --op reducescatter --codec fp8 -b 16M -e 256M -f 4 -n 20 -w 5
run nvlink allreduce_qgrad4 --op allreduce --codec qgrad --bits 4 -b 16M -e 256M -f 4 -n 20 -w 5
run nvlink allgather_lossless --op allgather --codec lossless -b 16M -e 256M -f 4 -n 20 -w 5
python3 - /tmp/pj $OUT/bench.json <<'PY'
import glob, json, os, sys
rows = []
for f in sorted(glob.glob(sys.argv[1] + "/*_*.json")):
    try: rows += [dict(r, file=os.path.basename(f)) for r in json.load(open(f))]
    except Exception: pass
json.dump(rows, open(sys.argv[2], "w"), indent=1)
PY
grep -E '^==|^ +[0-9]' $OUT/bench.log | cut -c1-200
echo "total: $(( $(date +%s) - start )) s"
