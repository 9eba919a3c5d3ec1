#!/usr/bin/env bash
# Profiles a codec's kernels with Nsight Compute on a GPU machine (carry .deps): speed of light,
# pipe utilization (compute workload analysis), memory throughput, occupancy, stall reasons (and
# the instructions that collect them), and instructions and stall samples per code region,
# for Gaussian data (default bf16, 256 MiB, the lossless codec).
#   bash scripts/dev/profile.sh [bytes [cclz-perf codec arguments...]]
#   e.g. bash scripts/dev/profile.sh 256M --codec fp8 -d bf16
# Reuses build-device/ when scripts/dev/device.sh built it, else builds build-profile/.
# Writes $OUT/ncu_{encode,decode}.{log,details,csv} and prints a summary of each kernel.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
OUT=${OUT:-/tmp/cclz-profile}
mkdir -p "$OUT"
bytes=${1:-256M}
shift || true
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--codec lossless -d bf16)
build="build-device"
if [ ! -f $build/build.ninja ]; then
  build="build-profile"
  cmake -S . -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_BUILD_TESTS=OFF -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
fi
ninja -C $build cclz-perf >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
# NOTE: every kernel whose name starts with encode (decode): the first one the call launches is
# the one auto (or CCLZ_LOSSLESS_PATH, CCLZ_LOSSLESS_ENCODE_WARPS, set by the caller) chose:
# encodeKernel or encodeSplitKernel, decodeKernel or decodeGeneralWindowKernel.
for k in encode decode; do
  ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section SourceCounters --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active \
    -k "regex:^$k" -c 1 -o "$OUT/$k" -f \
    $build/tools/cclz-perf/cclz-perf --op codec --device gpu "${args[@]}" -b "$bytes" -e "$bytes" \
    -n 1 -w 0 -c 0 >"$OUT/ncu_$k.log" 2>&1
  ncu --import "$OUT/$k.ncu-rep" --page details >"$OUT/ncu_$k.details" 2>&1
  ncu --import "$OUT/$k.ncu-rep" --page source --csv --print-source sass >"$OUT/ncu_$k.csv" 2>&1
  rm -f "$OUT/$k.ncu-rep"
  echo "== $k"
  sed -n 2p "$OUT/ncu_$k.details"  # the kernel profiled
  grep -E "Duration|Memory Throughput|DRAM Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Theoretical Occupancy|Issue Slots Busy|pipe_|Stall|warp cycles per issued" "$OUT/ncu_$k.details" | head -26
  python3 scripts/dev/ncu_stalls.py "$OUT/ncu_$k.csv" 4
  python3 scripts/dev/ncu_regions.py "$OUT/ncu_$k.csv" 14
done
