#!/usr/bin/env bash
# ncu of the kept kernels at 256 MiB (bf16): the general window
# decoder with the raw planes prefetched, and the general encoder in two rounds.
set -u
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
t0=$SECONDS
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
  -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >"$OUT/build.log" 2>&1 &&
  ninja -C build-device -j16 cclz-perf >>"$OUT/build.log" 2>&1
echo "build: exit $? after $((SECONDS - t0)) s"
P=build-device/tools/cclz-perf/cclz-perf
prof() {  # name, kernel regex
  ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section SourceCounters --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum \
    -k "regex:$2" -c 1 -o "$OUT/$1" -f \
    $P --op codec --device gpu --codec lossless -d bf16 -b 256M -e 256M -n 1 -w 0 -c 0 >"$OUT/$1.ncu.log" 2>&1
  ncu --import "$OUT/$1.ncu-rep" --page source --csv --print-source sass > /tmp/p.csv
  ncu --import "$OUT/$1.ncu-rep" --page details > "$OUT/$1.details"
  rm -f "$OUT/$1.ncu-rep"; gzip -c /tmp/p.csv > "$OUT/$1.csv.gz"
  echo "== $1: $((SECONDS - t0)) s"
  grep -E "Duration|L1/TEX Cache Throughput|DRAM Throughput|Issue Slots Busy|pipe_|wavefronts|inst_executed.sum" "$OUT/$1.details"
  python3 scripts/dev/ncu_stalls.py /tmp/p.csv 4 2>/dev/null | head -24
}
prof dec '^decodeGeneralWindowKernel$'
prof enc '^encodeKernel$'
