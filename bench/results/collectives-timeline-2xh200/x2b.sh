#!/usr/bin/env bash
# the GPU timeline of single calls over NVLink (CCLZ_TIMELINE=1:
# each stage's begin and end on the GPU, per call) for the four compressed collectives.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(( $(date +%s) - start )) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
tl() {  # tl NAME [ENV=V...] -- ARGS...: one timed run with the timeline on, rank 0's lines kept
  local name=$1; shift; local envs=()
  while [ "$1" != "--" ]; do envs+=(-x "$1"); shift; done; shift
  echo "== $name: ${envs[*]} cclz-perf $* --device gpu -n 2 -w 1" >> $OUT/timeline.log
  timeout 120 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
    -x CCLZ_TIMELINE=1 "${envs[@]}" $P "$@" --device gpu -n 2 -w 1 > /tmp/tl.log 2>&1
  echo "$name: exit $? ($(( $(date +%s) - start )) s)"
  first=$(grep -m1 -o 'cclz-timeline pid [0-9]*' /tmp/tl.log | awk '{print $3}')
  grep -E "^ +[0-9]" /tmp/tl.log >> $OUT/timeline.log
  grep "cclz-timeline pid $first " /tmp/tl.log | sed 's/cclz-timeline pid [0-9]* //' >> $OUT/timeline.log
}
tl fp8_ag_256M -- --op allgather --codec fp8 -b 256M -e 256M
tl fp8_ag_256M_normal CCLZ_MOVE_PRIORITY=normal -- --op allgather --codec fp8 -b 256M -e 256M
tl fp8_ag_16M -- --op allgather --codec fp8 -b 16M -e 16M
tl fp8_rs_256M -- --op reducescatter --codec fp8 -b 256M -e 256M
tl qgrad_ar_256M -- --op allreduce --codec qgrad --bits 4 -b 256M -e 256M
tl lossless_ag_256M -- --op allgather --codec lossless -b 256M -e 256M
tl none_ag_256M -- --op allgather --codec none -b 256M -e 256M
tl fp8_ag_256M_8Mpieces CCLZ_PIECE_BYTES=8M -- --op allgather --codec fp8 -b 256M -e 256M
wc -l $OUT/timeline.log
echo "total: $(( $(date +%s) - start )) s"
