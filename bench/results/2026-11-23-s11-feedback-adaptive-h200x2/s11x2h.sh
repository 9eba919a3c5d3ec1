#!/usr/bin/env bash
# Session 11, 2x H200, last call: the NCCL adaptive and deferred-check tests at the final commit.
set -u
cd "$(dirname "$0")/../../.."
export NCCL_NVLS_ENABLE=0
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
timeout 150 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE \
  build-device/tests/collective/nccl_tests --gtest_brief=1 \
  --gtest_filter='NcclAdaptive*:NcclDeferredCheck*:NcclErrors*:NcclTimeline*' > $OUT/final.log 2>&1
echo "final: exit $? $(grep -E 'PASSED|FAILED' $OUT/final.log | head -4 | tr '\n' ' ')"
