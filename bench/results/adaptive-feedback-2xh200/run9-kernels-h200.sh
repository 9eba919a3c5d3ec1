#!/usr/bin/env bash
# : the device engine's element kernels against the host (new GPU test).
set -u
cd "$(dirname "$0")/../../.."
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
timeout 120 build-device/tests/collective/reduce_kernels_gpu_tests > $OUT/reduce_kernels.log 2>&1
echo "reduce_kernels_gpu_tests: exit $? $(grep -E 'PASSED|FAILED|SKIPPED' $OUT/reduce_kernels.log | head -3 | tr '\n' ' ')"
