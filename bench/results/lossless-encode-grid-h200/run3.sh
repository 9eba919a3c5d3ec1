#!/usr/bin/env bash
# the lossless general decoder's grid (resident blocks from the
# occupancy calculator vs 16 per SM, CCLZ_EXP_DECODE_GRID), the encoder's resident grid, tests.
set -u
cd "$(dirname "$0")/../../.."
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; mkdir -p /tmp/j
P=$B/tools/cclz-perf/cclz-perf
run() {  # label, env...
  local label=$1; shift
  for d in bf16 fp16 fp32; do
    env "$@" timeout 60 $P --op codec --codec lossless --device gpu -d $d -b 4M -e 256M -f 4 -n 30 -w 5 \
      --json /tmp/j/$label-$d.json > /tmp/j/$label-$d.txt 2>&1 || echo "$label $d failed"
    echo "$label $d $(grep -E '^ +[0-9]' /tmp/j/$label-$d.txt | awk '{printf "%s: enc %s dec %s %s | ", $1, $7, $9, $11}')"
  done
}
run old CCLZ_EXP_DECODE_GRID=1
run new X=0
run old2 CCLZ_EXP_DECODE_GRID=1
run new2 X=0
F='All/LosslessGpu.*_default_*:All/LosslessGpu.*_v2c1024_*:LosslessGpuV2*:LosslessGpuRealTensors.*:LosslessGpuMismatch.*'
CCLZ_LOSSLESS_PATH=general timeout 150 $B/tests/codec/codec_gpu_tests --gtest_brief=1 --gtest_filter="$F" > /tmp/j/tests_general.log 2>&1
echo "general kernels: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' /tmp/j/tests_general.log | head -2 | tr '\n' ' ')"
timeout 150 $B/tests/codec/codec_gpu_tests --gtest_brief=1 --gtest_filter="$F" > /tmp/j/tests_auto.log 2>&1
echo "auto: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' /tmp/j/tests_auto.log | head -2 | tr '\n' ' ')"
tar czf $OUT/json.tgz -C /tmp j
echo "total: $(el) s"
