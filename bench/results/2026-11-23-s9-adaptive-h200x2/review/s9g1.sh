#!/usr/bin/env bash
# Session 9, one H200: the fused reduce-step tests after they moved into support/reduce_steps.h.
set -u
cd "$(dirname "$0")/../../../.."
bash scripts/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
timeout 200 ctest --test-dir build-device -L gpu --output-on-failure --timeout 150 -R "GpuReduce" > $OUT/gpu_tests.log 2>&1
echo "exit $?"; tail -8 $OUT/gpu_tests.log
