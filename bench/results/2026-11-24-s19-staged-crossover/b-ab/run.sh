#!/usr/bin/env bash
# Session 19, fourth device call: A/B of auto's new limits, then fp16's own crossover.
set -u
OUT=${OUT:-/tmp/cclz-out}
bash scripts/ab-codec.sh .devrun/old.tar.gz '*Lossless*' bench/results/2026-11-24-s19-staged-crossover/b-ab/configs
P=build-device/tools/cclz-perf/cclz-perf
for path in general staged; do echo "== fp16 --batch, CCLZ_LOSSLESS_PATH=$path"
  CCLZ_LOSSLESS_PATH=$path $P --op codec --codec lossless --device gpu -d fp16 -b 8M -e 64M -f 2 -n 20 -w 5 --batch
done > "$OUT/fp16-crossover.log" 2>&1
grep -E "^==|^ +[0-9]" "$OUT/fp16-crossover.log"
