#!/usr/bin/env bash
# Session 20, first device call: the two-level table A/B, then the general kernels' tests.
set -u
OUT=${OUT:-/tmp/cclz-out}
bash scripts/ab-codec.sh .devrun/old.tar.gz '*Lossless*' bench/results/2026-11-24-s20-two-level-table/configs
T=build-device/tests/codec/codec_gpu_tests
{ echo "== general (window loop for bf16, fp16)"; CCLZ_LOSSLESS_PATH=general $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== staged, window loop"; CCLZ_LOSSLESS_PATH=staged $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== real tensors, tiled to 256 MiB, auto, check on"
  cat .data/layer1_act.bin .data/layer6_act.bin .data/layer1_wgrad.bin .data/layer6_wgrad.bin > /tmp/one.bin
  for i in $(seq 8); do cat /tmp/one.bin; done | head -c $((256 * 1048576)) > /tmp/real256.bin
  build-device/tools/cclz-perf/cclz-perf --op codec --codec lossless --device gpu -d bf16 --input /tmp/real256.bin -n 5 -w 1 -c 1 2>&1 | grep -v "^#" | tail -1
} > "$OUT/tests-more.log" 2>&1
cat "$OUT/tests-more.log"
