#!/usr/bin/env bash
# Profiles the lossless kernels with Nsight Compute on a GPU machine (carry .deps): stall samples
# and instructions per section of each kernel, for bf16 Gaussian data (default 256 MiB).
#   bash scripts/profile.sh [bytes]
# Writes $OUT/ncu_<kernel>.csv (per SASS instruction) and prints a summary per code region.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/cclz-profile}
mkdir -p "$OUT"
bytes=${1:-256M}
build=build-profile
cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_BUILD_TESTS=OFF \
  -DCCLZ_DEPS_DIR="$PWD/.deps" >"$OUT/build.log" 2>&1 && ninja -C $build cclz-perf >>"$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; exit 1; }
for k in encodeKernel decodeKernel; do
  ncu --clock-control none --section SourceCounters --section WarpStateStats --metrics smsp__inst_executed.sum \
    -k "regex:$k" -c 1 -o "$OUT/$k" -f \
    $build/tools/cclz-perf/cclz-perf --op codec --device gpu -d bf16 -b "$bytes" -e "$bytes" -n 1 -w 0 -c 0 \
    >"$OUT/ncu_$k.log" 2>&1
  ncu --import "$OUT/$k.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu_$k.csv" 2>&1
  rm -f "$OUT/$k.ncu-rep"
  echo "== $k"
  python3 scripts/ncu_regions.py "$OUT/ncu_$k.csv"
done
