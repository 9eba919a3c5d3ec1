#!/usr/bin/env bash
# the fp8 encode's and decode's grids capped at N blocks per SM
# (CCLZ_EXP_FP8_BPS; warps loop over rows / tiles) against gridFor's one row per warp.
set -u
cd "$(dirname "$0")/../../.."
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; mkdir -p /tmp/j
P=$B/tools/cclz-perf/cclz-perf
run() {  # label, rows, env...
  local label=$1 rows=$2; shift 2
  env "$@" timeout 60 $P --op codec --codec fp8 --fp8-row-elems $rows --device gpu -d bf16 -b 4M -e 256M -f 4 -n 30 -w 5 \
    --json /tmp/j/$label.json > /tmp/j/$label.txt 2>&1 || echo "$label failed"
  echo "$label $(grep -E '^ +[0-9]' /tmp/j/$label.txt | awk '{printf "%s: enc %s dec %s acc %s | ", $1, $7, $9, $12}')"
}
run r1024-grid 1024 X=0
run r1024-bps4 1024 CCLZ_EXP_FP8_BPS=4
run r1024-bps8 1024 CCLZ_EXP_FP8_BPS=8
run r1024-bps2 1024 CCLZ_EXP_FP8_BPS=2
run auto-grid 0 X=0
run auto-bps4 0 CCLZ_EXP_FP8_BPS=4
run r1024-grid2 1024 X=0
run r1024-bps4b 1024 CCLZ_EXP_FP8_BPS=4
CCLZ_EXP_FP8_BPS=4 timeout 150 $B/tests/codec/codec_gpu_tests --gtest_brief=1 \
  --gtest_filter='Sizes/Fp8Gpu.*:Fp8GpuTensors.*:Fp8GpuReduce.*:Fp8GpuShape.*' > /tmp/j/tests.log 2>&1
echo "fp8 GPU tests, 4 blocks per SM: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' /tmp/j/tests.log | head -2 | tr '\n' ' ')"
tar czf $OUT/json.tgz -C /tmp j
echo "total: $(el) s"
