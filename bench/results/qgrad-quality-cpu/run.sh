#!/usr/bin/env bash
# Quality of the qgrad codec on the real tensors (CPU reference; the bytes are the GPU's too):
# NMSE and max relative error per tensor, and the wire ratio vs bf16 and vs fp32 (the bf16 tensors
# widened exactly to fp32), for int8, int4 and int2 at the default block of 64, nearest rounding.
#   bench/results/qgrad-quality-cpu/run.sh [build dir (default build)] 
set -euo pipefail
cd "$(dirname "$0")"
perf=${1:-../../../build}/tools/cclz-perf/cclz-perf
index=${CCLZ_SHARED_DATA:-../../../../shared/data/gpt-small-tensors}/index.json
: >quality.log
for bits in 8 4 2; do
  for dtype in bf16 fp32; do
    echo "== cclz-perf --op codec --codec qgrad --device cpu --input index.json -d $dtype --bits $bits -n 1 -w 0" >>quality.log
    "$perf" --op codec --codec qgrad --device cpu --input "$index" -d $dtype --bits $bits \
      -n 1 -w 0 --json "qgrad_int${bits}_${dtype}.json" >>quality.log
  done
done
python3 table.py >table.md
cat table.md
