#!/usr/bin/env bash
# Session 25, third device call: the read-modify-write probe under each cache hint
# (.devrun/probe/accprobe2.cu), and which part of L2 is busy: the probe's kernels and the old
# accumulate kernel at 64 MiB (ncu, breakdown of lts__throughput).
set -u
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
rm -rf /tmp/t-old && mkdir -p /tmp/t-old && tar -xzf .devrun/old.tar.gz -C /tmp/t-old
( cmake -S /tmp/t-old -B /tmp/t-old/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a -DCCLZ_BUILD_TESTS=OFF \
    -DCCLZ_DEPS_DIR="$PWD/.deps" >/tmp/cfg-old.log 2>&1 && ninja -C /tmp/t-old/build cclz-perf >>/tmp/cfg-old.log 2>&1; echo "old build: $?" ) &
nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -o /tmp/accprobe2 .devrun/probe/accprobe2.cu && /tmp/accprobe2
M=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,breakdown:lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sector_hit_rate.pct,dram__bytes_read.sum,dram__bytes_write.sum
prof() { # name, ncu filter args..., then -- program
  local name=$1; shift
  ncu --clock-control none --kernel-name-base mangled --metrics $M "$@" > "$OUT/ncu-$name.log" 2>&1
  echo "== $name"; grep -E "^\s+(gpu__|dram__|lts__)" "$OUT/ncu-$name.log" | sed 's/  */ /g' | head -60
}
prof default -k regex:acc16ILi0E --launch-skip 0 --launch-count 1 /tmp/accprobe2
prof outOfPlace -k regex:acc16ILi0E --launch-skip 45 --launch-count 1 /tmp/accprobe2
prof copy -k regex:copyKernel --launch-skip 0 --launch-count 1 /tmp/accprobe2
wait
prof oldkernel -k regex:decodeKernelILi9ELi1E -c 1 /tmp/t-old/build/tools/cclz-perf/cclz-perf --op codec --codec fp8 --device gpu -d bf16 --fp8-row-elems 1024 -b 64M -e 64M -n 1 -w 0 -c 0
