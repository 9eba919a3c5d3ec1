#!/usr/bin/env bash
# the piece size over NVLink (fp8 all-gather and reduce-scatter),
# and one traced 256 MiB fp8 all-gather (host clock of every step).
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
B=build-device; P=$B/tools/cclz-perf/cclz-perf
run() {  # run PIECE NAME ARGS...
  local piece=$1 name=$2; shift 2
  echo "== nvlink piece $piece $name: CCLZ_PIECE_BYTES=$piece cclz-perf $* --batch" >> $OUT/bench.log
  timeout 100 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
    -x CCLZ_PIECE_BYTES=$piece $P "$@" --device gpu --batch >> $OUT/bench.log 2>&1
  echo "$piece $name: exit $? ($(( $(date +%s) - start )) s)"
}
for piece in 16M 64M; do
  for op in allgather reducescatter; do
    run $piece ${op}_fp8 --op $op --codec fp8 -b 64M -e 256M -f 4 -n 20 -w 5
  done
done
run 64M allreduce_qgrad4 --op allreduce --codec qgrad --bits 4 -b 64M -e 256M -f 4 -n 20 -w 5
run 64M allgather_lossless --op allgather --codec lossless -b 64M -e 256M -f 4 -n 20 -w 5
timeout 60 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE -x CCLZ_TRACE=1 \
  $P --op allgather --codec fp8 --device gpu -b 256M -e 256M -n 2 -w 1 -c 0 > $OUT/trace.log 2>&1
echo "trace: exit $?"
grep -E '^==|^ +[0-9]' $OUT/bench.log | cut -c1-200
echo "total: $(( $(date +%s) - start )) s"
