#!/usr/bin/env bash
# the kept prefetches and the next block, round 3, then the general kernels' tests.
set -u
OUT=${OUT:-/tmp/cclz-out}
cat .data/layer1_act.bin .data/layer6_act.bin .data/layer1_wgrad.bin .data/layer6_wgrad.bin > /tmp/one.bin
for i in $(seq 8); do cat /tmp/one.bin; done | head -c $((256 * 1048576)) > /tmp/real256.bin
bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Lossless*' bench/results/lossless-decode-prefetch-h200/c-kept/configs \
  nextblock=.devrun/nextblock.tar.gz > /dev/null
T=build-device/tests/codec/codec_gpu_tests
{ echo "== general (window loop for bf16, fp16)"; CCLZ_LOSSLESS_PATH=general $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== general.lane (window off)"; CCLZ_LOSSLESS_PATH=general CCLZ_LOSSLESS_WINDOW=off $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== general, pdl off"; CCLZ_PDL=0 CCLZ_LOSSLESS_PATH=general $T --gtest_filter='LosslessGpuV2*:LosslessGpuRealTensors.*:All/LosslessGpu.*_n16777216_*' --gtest_brief=1 2>&1 | tail -1
  echo "== real tensors, tiled to 256 MiB, auto, check on"
  build-device/tools/cclz-perf/cclz-perf --op codec --codec lossless --device gpu -d bf16 --input /tmp/real256.bin -n 5 -w 1 -c 1 2>&1 | grep -v "^#" | tail -1
} > "$OUT/tests-more.log" 2>&1
head -14 "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"; cat "$OUT/tests-more.log"
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-14s %-14s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
