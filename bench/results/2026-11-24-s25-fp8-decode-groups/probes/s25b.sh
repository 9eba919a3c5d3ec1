#!/usr/bin/env bash
# Session 25, second device call: the roofline of decode-and-accumulate's traffic (simple kernels,
# .devrun/probe/accprobe.cu), then Nsight Compute on the accumulate kernel at 64 MiB, old and new.
set -u
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/accprobe .devrun/probe/accprobe.cu && /tmp/accprobe | tee "$OUT/probe.log"
cfg() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a -DCCLZ_BUILD_TESTS=OFF \
    -DCCLZ_DEPS_DIR="$PWD/.deps" >/tmp/cfg-$3.log 2>&1 && ninja -C "$2" cclz-perf >>/tmp/cfg-$3.log 2>&1; echo "$3 build: $?"; }
rm -rf /tmp/t-old && mkdir -p /tmp/t-old && tar -xzf .devrun/old.tar.gz -C /tmp/t-old
cfg /tmp/t-old /tmp/t-old/build old & cfg . build-prof new & wait
for t in old new; do
  perf=build-prof/tools/cclz-perf/cclz-perf; [ $t = old ] && perf=/tmp/t-old/build/tools/cclz-perf/cclz-perf
  for size in 64M 256M; do
    ncu --clock-control none --kernel-name-base mangled -k "regex:decodeKernelILi9ELi1E" -c 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
      --section LaunchStats --section SchedulerStats \
      --metrics dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,gpu__time_duration.sum,smsp__pcsamp_warps_issue_stalled_long_scoreboard,smsp__warps_active.avg.pct_of_peak_sustained_active \
      -o "$OUT/$t-$size" -f $perf --op codec --codec fp8 --device gpu -d bf16 --fp8-row-elems 1024 -b $size -e $size -n 1 -w 0 -c 0 > "$OUT/ncu-$t-$size.log" 2>&1
    ncu --import "$OUT/$t-$size.ncu-rep" --page details > "$OUT/$t-$size.details" 2>&1
    rm -f "$OUT/$t-$size.ncu-rep"
    echo "== $t $size"
    grep -E "Duration|DRAM Throughput|Memory Throughput|dram__bytes|lts__t_sector_hit|Achieved Occupancy|Achieved Active Warps|Issued Warp|Stall|Warp Cycles Per Issued|One or More|No Eligible|L2 Hit|Mem Busy|Max Bandwidth|Mem Pipes" "$OUT/$t-$size.details" | head -30
  done
done
