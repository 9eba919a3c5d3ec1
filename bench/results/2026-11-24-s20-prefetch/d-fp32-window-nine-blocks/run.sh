#!/usr/bin/env bash
# Session 20, sixth device call: fp32 on the general window loop (new), 9 window blocks (nine).
set -u
OUT=${OUT:-/tmp/cclz-out}
bash scripts/ab-codec.sh .devrun/old.tar.gz 'All/LosslessGpu.*fp32*:LosslessGpuV2*' bench/results/2026-11-24-s20-prefetch/d-fp32-window-nine-blocks/configs \
  nine=.devrun/nine.tar.gz > /dev/null
T=build-device/tests/codec/codec_gpu_tests
{ echo "== general (window loop for every dtype)"; CCLZ_LOSSLESS_PATH=general $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
} > "$OUT/tests-more.log" 2>&1
head -8 "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"; cat "$OUT/tests-more.log"
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-14s %-8s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
