#!/usr/bin/env bash
# Session 10, 2x H200, fifth call (review): the engine's cancellable wait now yields between
# polls and applies under deferred checks only. Lossless NCCL cases and the enabled deferred
# test, then the lossless all-gather over NVLink (adaptive off, the codec path, which waits for
# frame sizes every piece) beside NCCL.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; P=$B/tools/cclz-perf/cclz-perf
M=(mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE)
timeout 120 "${M[@]}" $B/tests/collective/nccl_tests --gtest_brief=1 --gtest_filter='*lossless*:NcclErrors*:NcclDeferredCheck*' > $OUT/nccl_tests.log 2>&1
echo "nccl_tests lossless + checks: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' $OUT/nccl_tests.log | head -2 | tr '\n' ' ')"
timeout 60 "${M[@]}" $P --op allgather --codec lossless --device gpu -b 1M -e 256M -f 16 -n 10 -w 3 --batch --adaptive off > $OUT/perf.log 2>&1
echo "perf: exit $? ($(el) s)"
grep -E "^ +[0-9]" $OUT/perf.log
