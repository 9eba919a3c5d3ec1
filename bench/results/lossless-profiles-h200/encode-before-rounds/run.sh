#!/usr/bin/env bash
# the bf16 encode at 256 MiB under ncu, the general kernel (auto's
# choice there) and the staged one (2 warps per chunk), by pipe, memory and stall reason.
set -u
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
t0=$SECONDS
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
  -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >"$OUT/build.log" 2>&1 &&
  ninja -C build-device -j16 cclz-perf >>"$OUT/build.log" 2>&1
echo "build: exit $? after $((SECONDS - t0)) s"
P=build-device/tools/cclz-perf/cclz-perf
prof() {  # name, kernel regex, environment
  env $3 ncu --clock-control none --section SpeedOfLight --section Occupancy --section WarpStateStats \
    --section SourceCounters --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section LaunchStats \
    --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum \
    -k "regex:$2" -c 1 -o "$OUT/$1" -f \
    $P --op codec --device gpu --codec lossless -d bf16 -b 256M -e 256M -n 1 -w 0 -c 0 >"$OUT/$1.ncu.log" 2>&1
  ncu --import "$OUT/$1.ncu-rep" --page source --csv --print-source sass > "$OUT/$1.csv"
  ncu --import "$OUT/$1.ncu-rep" --page details > "$OUT/$1.details"
  rm -f "$OUT/$1.ncu-rep"; gzip -f "$OUT/$1.csv"
  echo "== $1 ($3): $((SECONDS - t0)) s"
  grep -E "Duration|Throughput|Achieved Occupancy|Registers Per|Issue Slots Busy|pipe_|wavefronts|sectors|requests|Shared Memory Config|Block Limit" "$OUT/$1.details" | head -40
  zcat "$OUT/$1.csv.gz" > /tmp/p.csv; python3 scripts/dev/ncu_stalls.py /tmp/p.csv 6; python3 scripts/dev/ncu_regions.py /tmp/p.csv 14
}
prof enc-general '^encodeKernel$' "CCLZ_LOSSLESS_PATH=general"
prof enc-staged '^encodeSplitKernel$' "CCLZ_LOSSLESS_PATH=staged"
