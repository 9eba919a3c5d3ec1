#!/usr/bin/env bash
# the lossless general encoder with the next chunk reserved
# early, L2 prefetches, and a resident grid (CCLZ_LOSSLESS_ENCODE_TUNE / _GRID), tests then A/B.
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
  for d in bf16 fp32; do
    env "$@" timeout 60 $P --op codec --codec lossless --device gpu -d $d -b 16M -e 256M -f 4 -n 30 -w 5 \
      --json /tmp/j/$label-$d.json > /tmp/p.txt 2>&1 || echo "$label $d failed"
    echo "$label $d $(grep -E '^ +[0-9]' /tmp/p.txt | awk '{printf "%s: enc %s dec %s %s | ", $1, $7, $9, $11}')"
  done
}
run base0 X=0
run t2 CCLZ_LOSSLESS_ENCODE_TUNE=2
run t2r CCLZ_LOSSLESS_ENCODE_TUNE=2 CCLZ_LOSSLESS_ENCODE_GRID=resident
run t3r CCLZ_LOSSLESS_ENCODE_TUNE=3 CCLZ_LOSSLESS_ENCODE_GRID=resident
run t6r CCLZ_LOSSLESS_ENCODE_TUNE=6 CCLZ_LOSSLESS_ENCODE_GRID=resident
run t7r CCLZ_LOSSLESS_ENCODE_TUNE=7 CCLZ_LOSSLESS_ENCODE_GRID=resident
run r0 CCLZ_LOSSLESS_ENCODE_GRID=resident
run base1 X=1
F='All/LosslessGpu.*_default_*:All/LosslessGpu.*n16777216*:LosslessGpuV2*:LosslessGpuRealTensors.*'
for t in 7 6; do
  CCLZ_LOSSLESS_PATH=general CCLZ_LOSSLESS_ENCODE_TUNE=$t CCLZ_LOSSLESS_ENCODE_GRID=resident timeout 120 \
    $B/tests/codec/codec_gpu_tests --gtest_brief=1 --gtest_filter="$F" > /tmp/t$t.log 2>&1
  echo "general kernels, tune $t resident: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' /tmp/t$t.log | head -2 | tr '\n' ' ')"
  grep -E "Failure|FAILED  \]" /tmp/t$t.log | head -5
done
tar czf $OUT/json.tgz -C /tmp j
echo "total: $(el) s"
