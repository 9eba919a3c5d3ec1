#!/usr/bin/env bash
# the pipeline's piece size over the socket transport (4, 16,
# 32 MiB at 256 MiB messages), and the fp8 collectives over NVLink with nccl-tests' timing.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
sock=(-x NCCL_P2P_DISABLE=1 -x NCCL_SHM_DISABLE=1 -x NCCL_IB_DISABLE=1 -x NCCL_SOCKET_IFNAME=lo -x NCCL_P2P_NET_CHUNKSIZE=524288)
run() {  # run NET PIECE NAME ARGS...
  local net=$1 piece=$2 name=$3; shift 3
  local extra=(); [ "$net" = socket ] && extra=("${sock[@]}")
  echo "== $net piece $piece $name: CCLZ_PIECE_BYTES=$piece cclz-perf $* --batch" >> $OUT/bench.log
  timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE "${extra[@]}" \
    -x CCLZ_PIECE_BYTES=$piece $P "$@" --device gpu --batch >> $OUT/bench.log 2>&1
  echo "$net $piece $name: exit $? ($(( $(date +%s) - start )) s)"
}
for piece in 16M 32M 4M; do
  run socket $piece allgather_fp8 --op allgather --codec fp8 -b 256M -e 256M -n 11 -w 2
  run socket $piece reducescatter_fp8 --op reducescatter --codec fp8 -b 256M -e 256M -n 11 -w 2
  run socket $piece allreduce_qgrad4 --op allreduce --codec qgrad --bits 4 -b 256M -e 256M -n 11 -w 2
done
run socket 16M allgather_lossless --op allgather --codec lossless -b 256M -e 256M -n 11 -w 2
for op in allgather reducescatter; do
  run nvlink 4M ${op}_fp8 --op $op --codec fp8 -b 16M -e 256M -f 4 -n 20 -w 5
  run nvlink 4M ${op}_none --op $op --codec none -b 16M -e 256M -f 4 -n 20 -w 5
done
grep -E '^==|^ +[0-9]' $OUT/bench.log | cut -c1-200
echo "total: $(( $(date +%s) - start )) s"
