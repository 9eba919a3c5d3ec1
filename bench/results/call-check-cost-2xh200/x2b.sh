#!/usr/bin/env bash
# the check back to back (checkcost), cclz-perf's check stage
# (every call vs first, no trace), and CCLZ_ASYNC with NCCL's connections made at init.
set -u
cd "$(dirname "$0")/.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
t() { echo "[$(( $(date +%s) - start )) s] $*"; }
M="mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE"
mpicxx -O2 -std=c++17 .devrun/checkcost.cpp -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lnccl -lcudart -o /tmp/checkcost 2>&1 | tail -3
timeout 150 $M /tmp/checkcost > $OUT/checkcost.log 2>&1; t "checkcost: exit $?"
grep back-to-back $OUT/checkcost.log
bash scripts/dev/device.sh build check > /tmp/check.out 2>&1; t "device.sh build check: exit $?"
grep -E "^==|^ +[0-9]" $OUT/bench.log | cut -c1-170
B=build-device
timeout 60 $M -x CCLZ_ASYNC=1 -x CCLZ_ASYNC_UNSAFE=1 -x CUDA_MODULE_LOADING=EAGER -x NCCL_RUNTIME_CONNECT=0 -x CCLZ_TRACE=1 \
  $B/tests/collective/nccl_async_tests --gtest_brief=1 > /tmp/async.log 2>&1
status=$?
t "nccl_async_tests (eager, NCCL_RUNTIME_CONNECT=0): exit $status"
grep -v "cclz-trace" /tmp/async.log | tail -12
tail -c 200000 /tmp/async.log > $OUT/trace_async_tail.log
if [ $status -eq 0 ]; then
  timeout 150 $M -x CCLZ_ASYNC=1 -x CCLZ_ASYNC_UNSAFE=1 -x CUDA_MODULE_LOADING=EAGER -x NCCL_RUNTIME_CONNECT=0 \
    $B/tests/collective/nccl_tests --gtest_brief=1 > $OUT/nccl_tests_async.log 2>&1
  t "nccl_tests with CCLZ_ASYNC=1: exit $?"; tail -6 $OUT/nccl_tests_async.log
fi
