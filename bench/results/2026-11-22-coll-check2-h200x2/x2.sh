#!/usr/bin/env bash
# Session 6, 2x H200: (1) what a small control exchange before each NCCL collective costs, in a
# standalone program (.devrun/checkcost.cpp: none / split communicator / same communicator /
# another communicator / MPI on the host); (2) cclz-perf's call check traced; (3) the
# completion-word mechanism alone (stream_ops_tests); (4) CCLZ_ASYNC traced under a timeout.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
t() { echo "[$(( $(date +%s) - start )) s] $*"; }
M="mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE"
mpicxx -O2 -std=c++17 .devrun/checkcost.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lnccl -lcudart -o /tmp/checkcost 2>&1 | tail -3
timeout 150 $M /tmp/checkcost > $OUT/checkcost.log 2>&1; t "checkcost: exit $?"
cat $OUT/checkcost.log | grep -v "^ *$" | head -80
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
t "build done"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
for mode in 1 first; do
  echo "== CCLZ_CHECK_CALLS=$mode, 16 MiB all-reduce, codec none" >> $OUT/trace_check.log
  timeout 60 $M -x CCLZ_CHECK_CALLS=$mode -x CCLZ_TRACE=1 $P --op allreduce --codec none --device gpu -b 16M -e 16M -n 5 -w 1 -c 0 >> $OUT/trace_check.log 2>&1
  t "trace check $mode: exit $?"
done
grep -E "^ +[0-9]" $OUT/trace_check.log | cut -c1-160
timeout 90 ctest --test-dir $B -R stream_ops --output-on-failure > $OUT/stream_ops.log 2>&1
t "stream_ops: exit $? -- $(grep -E 'tests passed|tests failed' $OUT/stream_ops.log)"
grep -E "Failure|FAILED|stream" $OUT/stream_ops.log | head -20
timeout 100 $M -x CCLZ_ASYNC=1 -x CCLZ_ASYNC_UNSAFE=1 -x CUDA_MODULE_LOADING=EAGER -x CCLZ_TRACE=1 \
  $B/tests/collective/nccl_async_tests --gtest_brief=1 > /tmp/async.log 2>&1
t "nccl_async_tests (eager): exit $?"
grep -vE "^\[cclz" /tmp/async.log | tail -20
head -c 300000 /tmp/async.log > $OUT/trace_async_head.log; tail -c 300000 /tmp/async.log > $OUT/trace_async_tail.log
timeout 100 $M -x CCLZ_ASYNC=1 -x CCLZ_ASYNC_UNSAFE=1 -x CUDA_MODULE_LOADING=EAGER -x CUDA_DEVICE_MAX_CONNECTIONS=32 \
  $B/tests/collective/nccl_async_tests --gtest_brief=1 > /tmp/async32.log 2>&1
t "nccl_async_tests (eager, 32 connections): exit $?"
tail -8 /tmp/async32.log
