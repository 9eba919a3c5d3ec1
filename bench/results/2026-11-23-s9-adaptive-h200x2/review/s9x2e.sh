#!/usr/bin/env bash
# Session 9, 2x H200, last call: the NCCL tests' new timeline case, with the whole suite on 2 ranks.
set -u
cd "$(dirname "$0")/../../../.."
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
timeout 150 mpirun --allow-run-as-root --oversubscribe --bind-to none -n 2 -x NCCL_NVLS_ENABLE=0 \
  build-device/tests/collective/nccl_tests --gtest_brief=1 > $OUT/nccl_tests.log 2>&1
echo "exit $?"; grep -E "PASSED|FAILED|Failure" -A6 $OUT/nccl_tests.log | head -30
