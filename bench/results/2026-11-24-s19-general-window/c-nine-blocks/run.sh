#!/usr/bin/env bash
# Session 19, tenth device call: A/B, the general kernels' tests, the occupancy ncu reports.
set -u
OUT=${OUT:-/tmp/cclz-out}
bash scripts/ab-codec.sh .devrun/old.tar.gz '*Lossless*' bench/results/2026-11-24-s19-general-window/c-nine-blocks/configs
T=build-device/tests/codec/codec_gpu_tests
{ echo "== general (window loop for bf16, fp16)"; CCLZ_LOSSLESS_PATH=general $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== occupancy"; ncu --section Occupancy -k regex:decodeGeneralWindow -c 1 build-device/tools/cclz-perf/cclz-perf --op codec --device gpu --codec lossless -d bf16 -b 256M -e 256M -n 1 -w 0 -c 0 2>&1 | grep -E "Block Limit|Achieved Occupancy|Theoretical Occupancy"
} > "$OUT/tests-more.log" 2>&1
cat "$OUT/tests-more.log"
