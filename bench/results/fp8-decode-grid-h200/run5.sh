#!/usr/bin/env bash
# the fp8 plain decode on a resident grid (decodeGrid), against
# the full grid (CCLZ_EXP_FP8_BPS=0) in the same run: E4M3 rows of 1024 and from the data, INT8,
# bf16/fp16/fp32 outputs; then every fp8 GPU test.
set -u
cd "$(dirname "$0")/../../.."
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
bash scripts/dev/device.sh build > /tmp/build.out 2>&1 || { tail -30 /tmp/build.out; exit 1; }
echo "build: $(el) s"
B=build-device; mkdir -p /tmp/j
P=$B/tools/cclz-perf/cclz-perf
run() {  # label, dtype, extra args, env...
  local label=$1 d=$2 extra=$3; shift 3
  env "$@" timeout 60 $P --op codec --codec fp8 $extra --device gpu -d $d -b 4M -e 256M -f 4 -n 30 -w 5 \
    --json /tmp/j/$label.json > /tmp/j/$label.txt 2>&1 || echo "$label failed"
  echo "$label $(grep -E '^ +[0-9]' /tmp/j/$label.txt | awk '{printf "%s: enc %s dec %s acc %s copy %s | ", $1, $7, $9, $12, $10}')"
}
for round in 1 2; do
  run bf16-r1024-resident$round bf16 "--fp8-row-elems 1024" X=0
  run bf16-r1024-full$round bf16 "--fp8-row-elems 1024" CCLZ_EXP_FP8_BPS=0
done
run bf16-auto-resident bf16 "" X=0
run bf16-auto-full bf16 "" CCLZ_EXP_FP8_BPS=0
run int8-resident bf16 "--fp8-format int8" X=0
run int8-full bf16 "--fp8-format int8" CCLZ_EXP_FP8_BPS=0
run fp16-resident fp16 "--fp8-row-elems 1024" X=0
run fp16-full fp16 "--fp8-row-elems 1024" CCLZ_EXP_FP8_BPS=0
run fp32-resident fp32 "--fp8-row-elems 1024" X=0
run fp32-full fp32 "--fp8-row-elems 1024" CCLZ_EXP_FP8_BPS=0
timeout 240 $B/tests/codec/codec_gpu_tests --gtest_brief=1 --gtest_filter='*Fp8*' > /tmp/j/tests.log 2>&1
echo "fp8 GPU tests: exit $? ($(el) s) $(grep -E 'PASSED|FAILED' /tmp/j/tests.log | head -2 | tr '\n' ' ')"
grep -E "Failure|FAILED  \]" /tmp/j/tests.log | head -5
tar czf $OUT/json.tgz -C /tmp j
echo "total: $(el) s"
