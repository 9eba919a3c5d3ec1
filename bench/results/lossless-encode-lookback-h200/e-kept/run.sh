#!/usr/bin/env bash
# a kernel each for the look-back's placements; GPU tests (auto, and 4 warps per chunk).
set -u
OUT=${OUT:-/tmp/cclz-out}
bash scripts/dev/ab-codec.sh .devrun/old.tar.gz '*Lossless*' .devrun/s22g.configs > /dev/null
T=build-device/tests/codec/codec_gpu_tests
{ echo "== staged, 4 warps per chunk"; CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=4 $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
} > "$OUT/tests-more.log" 2>&1
head -5 "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"; cat "$OUT/tests-more.log"
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-14s %-8s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
