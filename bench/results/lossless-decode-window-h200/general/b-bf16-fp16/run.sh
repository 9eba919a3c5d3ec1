#!/usr/bin/env bash
# A/B, then the general kernels' tests with the window on and off.
set -u
OUT=${OUT:-/tmp/cclz-out}
bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Lossless*' bench/results/lossless-decode-window-h200/general/b-bf16-fp16/configs
T=build-device/tests/codec/codec_gpu_tests
{ echo "== general (window loop for bf16, fp16)"; CCLZ_LOSSLESS_PATH=general $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== general.lane (window off)"; CCLZ_LOSSLESS_PATH=general CCLZ_LOSSLESS_WINDOW=off $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== general, pdl off"; CCLZ_PDL=0 CCLZ_LOSSLESS_PATH=general $T --gtest_filter='LosslessGpuV2*:LosslessGpuRealTensors.*:All/LosslessGpu.*_n16777216_*' --gtest_brief=1 2>&1 | tail -1
  echo "== real tensors, tiled to 256 MiB, general path, check on"
  cat .data/layer1_act.bin .data/layer6_act.bin .data/layer1_wgrad.bin .data/layer6_wgrad.bin > /tmp/one.bin
  for i in $(seq 8); do cat /tmp/one.bin; done | head -c $((256 * 1048576)) > /tmp/real256.bin
  build-device/tools/cclz-perf/cclz-perf --op codec --codec lossless --device gpu -d bf16 --input /tmp/real256.bin -n 5 -w 1 -c 1 2>&1 | grep -v "^#" | tail -1
} > "$OUT/tests-more.log" 2>&1
cat "$OUT/tests-more.log"
