#!/usr/bin/env bash
# Session 10, 2x H200, second call: why the deferred check of a codec mismatch (lossless on one
# rank, none on the other) never arrived, traced; and where the deferred plain path's ~20 us per
# call go (cclz-perf, codec none, 64K-1M, deferred / first / every call; nsys if present).
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s); mkdir -p /tmp/pj
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE)
timeout 100 "${M[@]}" -x CCLZ_TRACE=1 $B/tests/collective/nccl_tests --gtest_filter='NcclErrors.Deferred*' > $OUT/deferred_trace.log 2>&1
echo "deferred test traced: exit $? ($(el) s)"
for mode in first deferred 1; do
  echo "== CCLZ_CHECK_CALLS=$mode" >> $OUT/perf.log
  timeout 40 "${M[@]}" -x CCLZ_CHECK_CALLS=$mode $P --op allgather --codec none --device gpu -b 64K -e 1M -f 16 -n 20 -w 5 --batch --adaptive off >> $OUT/perf.log 2>&1
  echo "perf $mode: exit $? ($(el) s)"
done
echo "== traced deferred calls" >> $OUT/perf.log
timeout 30 "${M[@]}" -x CCLZ_TRACE=1 $P --op allgather --codec none --device gpu -b 64K -e 64K -n 3 -w 1 -c 0 --adaptive off > /tmp/tr.log 2>&1
grep -v "^#" /tmp/tr.log | tail -60 >> $OUT/perf.log
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"
if [ -n "$NSYS" ]; then
  timeout 90 "${M[@]}" $NSYS profile -t cuda,nvtx -o /tmp/nsys_%q{OMPI_COMM_WORLD_RANK} --force-overwrite true \
    $P --op allgather --codec none --device gpu -b 64K -e 64K -n 20 -w 5 --batch --adaptive off > /tmp/nsys.out 2>&1
  echo "nsys run: exit $?"
  timeout 60 $NSYS stats --report cuda_gpu_trace --format csv -o /tmp/gt /tmp/nsys_0.nsys-rep > /dev/null 2>&1
  timeout 60 $NSYS stats --report cuda_api_trace --format csv -o /tmp/at /tmp/nsys_0.nsys-rep > /dev/null 2>&1
  ls /tmp/gt* /tmp/at* 2>/dev/null
  tail -150 /tmp/gt*.csv > $OUT/gpu_trace_tail.csv 2>/dev/null
  tail -300 /tmp/at*.csv > $OUT/api_trace_tail.csv 2>/dev/null
fi
grep -v "^#   " $OUT/perf.log | grep -E "^ +[0-9]|==" 
grep -E "deferred|differs|abort|FAILED|OK \]" $OUT/deferred_trace.log | head -40
echo "total: $(el) s"
