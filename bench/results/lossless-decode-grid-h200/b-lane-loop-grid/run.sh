#!/usr/bin/env bash
# the general lane-loop decoder's grid (fp32) at 24, 32 and 40 blocks per SM against 16, GPU tests.
set -u
OUT=${OUT:-/tmp/cclz-out}
bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Lossless*' .devrun/s21d.configs l32=.devrun/l32.tar.gz l40=.devrun/l40.tar.gz > /dev/null
T=build-device/tests/codec/codec_gpu_tests
{ echo "== general"; CCLZ_LOSSLESS_PATH=general $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== general, lane loop"; CCLZ_LOSSLESS_PATH=general CCLZ_LOSSLESS_WINDOW=off $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== fp32 256 MiB, check on"
  build-device/tools/cclz-perf/cclz-perf --op codec --codec lossless --device gpu -d fp32 -b 256M -e 256M -n 3 -w 1 -c 1 2>&1 | grep -v "^#" | tail -1
} > "$OUT/tests-more.log" 2>&1
head -5 "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"; cat "$OUT/tests-more.log"
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-14s %-8s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
