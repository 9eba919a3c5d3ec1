#!/usr/bin/env bash
# Session 20, seventh device call: the general encoder's hot path in rounds, then its tests on
# the general kernels, then ncu of the new general encoder at 256 MiB.
set -u
OUT=${OUT:-/tmp/cclz-out}
cat .data/layer1_act.bin .data/layer6_act.bin .data/layer1_wgrad.bin .data/layer6_wgrad.bin > /tmp/one.bin
for i in $(seq 8); do cat /tmp/one.bin; done | head -c $((256 * 1048576)) > /tmp/real256.bin
bash scripts/ab-codec.sh .devrun/old.tar.gz 'LosslessGpuV2*:LosslessGpuRealTensors.*' bench/results/2026-11-24-s20-encode-rounds/a-rounds/configs r2=.devrun/r2.tar.gz > /dev/null
T=build-device/tests/codec/codec_gpu_tests
{ echo "== general"; CCLZ_LOSSLESS_PATH=general $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== staged, 1 warp per chunk (encodeChunk's rounds)"; CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=1 $T --gtest_filter='LosslessGpuV2*:All/LosslessGpu.*default*' --gtest_brief=1 2>&1 | tail -1
} > "$OUT/tests-more.log" 2>&1
head -6 "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"; cat "$OUT/tests-more.log"
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-14s %-8s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SourceCounters \
  --metrics smsp__inst_executed.sum,sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active \
  -k 'regex:^encodeKernel$' -c 1 -o "$OUT/enc-rounds" -f \
  build-device/tools/cclz-perf/cclz-perf --op codec --device gpu --codec lossless -d bf16 -b 256M -e 256M -n 1 -w 0 -c 0 > "$OUT/ncu.log" 2>&1
ncu --import "$OUT/enc-rounds.ncu-rep" --page source --csv --print-source sass > /tmp/p.csv
ncu --import "$OUT/enc-rounds.ncu-rep" --page details > "$OUT/enc-rounds.details"; rm -f "$OUT/enc-rounds.ncu-rep"
grep -E "Duration|Issue Slots|pipe_alu|inst_executed.sum" "$OUT/enc-rounds.details"; python3 scripts/ncu_stalls.py /tmp/p.csv 4 | head -14
gzip -c /tmp/p.csv > "$OUT/enc-rounds.csv.gz"
