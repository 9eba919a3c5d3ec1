#!/usr/bin/env bash
# Session 25, fourth device call: half-sector stores against whole-sector stores
# (.devrun/probe/accprobe3.cu), timed, and the L2's write sectors of each under ncu.
set -u
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/accprobe3 .devrun/probe/accprobe3.cu && /tmp/accprobe3
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__ltcfabric2ltc_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__xbar2lts_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_requests_op_write.sum,dram__bytes_read.sum,dram__bytes_write.sum
for k in rmwLane rmwPair rmwCoal decLane decPair; do
  ncu --clock-control none --metrics $M -k regex:$k --launch-count 1 /tmp/accprobe3 > "$OUT/ncu-$k.log" 2>&1
  echo "== $k"; grep -E "^\s+(gpu__|dram__|lts__)" "$OUT/ncu-$k.log" | sed 's/  */ /g'
done
