#!/usr/bin/env bash
# A/B, then the tests the A/B's filter does not reach.
set -u
bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Lossless*' bench/results/lossless-encode-grid-slots-h200/configs
T=build-device/tests/codec/codec_gpu_tests
F='All/LosslessGpu.*_default_*:LosslessGpuV2*:LosslessGpuRealTensors.*-*_n16777216_*'
{ echo "== general path"; CCLZ_LOSSLESS_PATH=general $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -3
  for w in 1 2; do echo "== warps $w"; CCLZ_LOSSLESS_ENCODE_WARPS=$w $T --gtest_filter="$F" --gtest_brief=1 2>&1 | tail -3; done
  for w in 1 2 4; do echo "== warps $w staged 16M"; CCLZ_LOSSLESS_ENCODE_WARPS=$w CCLZ_LOSSLESS_PATH=staged $T --gtest_filter='All/LosslessGpu.*_n16777216_default_*' --gtest_brief=1 2>&1 | tail -3; done
  echo "== pdl off"; CCLZ_PDL=0 $T --gtest_filter='LosslessGpuScratch.*:*16M*:All/LosslessGpu.*_default_*' --gtest_brief=1 2>&1 | tail -3
} > "$OUT/tests-more.log" 2>&1
cat "$OUT/tests-more.log"
P=build-device/tools/cclz-perf/cclz-perf
{ for path in auto staged; do echo "== new, CCLZ_LOSSLESS_PATH=$path, bf16 encode 2M-32M --batch"
    CCLZ_LOSSLESS_PATH=$path $P --op codec --codec lossless --device gpu -d bf16 -b 2M -e 32M -f 2 -n 20 -w 5 --batch; done
} > "$OUT/crossover.log" 2>&1
grep -E "^==|^ +[0-9]" "$OUT/crossover.log"
