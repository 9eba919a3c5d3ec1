#!/usr/bin/env bash
# A/B of auto's warps per chunk, then the fixed-warps tests.
set -u
OUT=${OUT:-/tmp/cclz-out}
bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Lossless*' bench/results/lossless-encode-warps-h200/configs
T=build-device/tests/codec/codec_gpu_tests
F='All/LosslessGpu.*_default_*:LosslessGpuV2*:LosslessGpuRealTensors.*-*_n16777216_*'
{ for w in 1 2 4; do echo "== warps $w"; CCLZ_LOSSLESS_ENCODE_WARPS=$w $T --gtest_filter="$F" --gtest_brief=1 2>&1 | tail -2; done
  for w in 2 4; do echo "== warps $w staged 16M"; CCLZ_LOSSLESS_ENCODE_WARPS=$w CCLZ_LOSSLESS_PATH=staged $T --gtest_filter='All/LosslessGpu.*_n16777216_default_*' --gtest_brief=1 2>&1 | tail -2; done
  echo "== pdl off"; CCLZ_PDL=0 $T --gtest_filter='LosslessGpuScratch.*:*16M*:All/LosslessGpu.*_n16777216_*' --gtest_brief=1 2>&1 | tail -2
} > "$OUT/tests-more.log" 2>&1
cat "$OUT/tests-more.log"
