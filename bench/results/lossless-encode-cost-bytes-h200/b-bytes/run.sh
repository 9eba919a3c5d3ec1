#!/usr/bin/env bash
# the 8-bit cost pass (bytes) and with the four-code put (new), GPU tests on every path, A/B/C.
set -u
OUT=${OUT:-/tmp/cclz-out}
cat .data/layer1_act.bin .data/layer6_act.bin .data/layer1_wgrad.bin .data/layer6_wgrad.bin > /tmp/one.bin
for i in $(seq 8); do cat /tmp/one.bin; done | head -c $((256 * 1048576)) > /tmp/real256.bin
bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Lossless*' .devrun/s21b.configs bytes=.devrun/bytes.tar.gz > /dev/null
T=build-device/tests/codec/codec_gpu_tests
{ echo "== general"; CCLZ_LOSSLESS_PATH=general $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== staged, 1 warp per chunk"; CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=1 $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== staged, 2 warps per chunk"; CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=2 $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== general, pdl off"; CCLZ_PDL=0 CCLZ_LOSSLESS_PATH=general $T --gtest_filter='LosslessGpuV2*:LosslessGpuRealTensors.*:All/LosslessGpu.*_n16777216_*' --gtest_brief=1 2>&1 | tail -1
  echo "== real tensors, tiled to 256 MiB, auto, check on"
  build-device/tools/cclz-perf/cclz-perf --op codec --codec lossless --device gpu -d bf16 --input /tmp/real256.bin -n 5 -w 1 -c 1 2>&1 | grep -v "^#" | tail -1
  echo "== real tensors, index, check on"
  build-device/tools/cclz-perf/cclz-perf --op codec --codec lossless --device gpu --input .data/index.json -n 3 -w 1 -c 1 2>&1 | grep -v "^#" | tail -20
} > "$OUT/tests-more.log" 2>&1
OUT=$OUT/profile timeout 200 bash scripts/dev/profile.sh 256M --codec lossless -d bf16 > "$OUT/profile.txt" 2>&1
head -5 "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"; head -14 "$OUT/tests-more.log"
grep -E "^==|Duration|L1/TEX Cache|Issue Slots|pipe_(alu|lsu)" "$OUT/profile.txt" | head -20
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-14s %-8s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
