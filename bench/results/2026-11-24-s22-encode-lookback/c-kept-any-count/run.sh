#!/usr/bin/env bash
# Session 22, fifth device call: the look-back as kept (4 warps per chunk: before the code, two levels from 256 chunks); GPU tests on every encode path; the mutation check.
set -u
OUT=${OUT:-/tmp/cclz-out}
cat .data/layer1_act.bin .data/layer6_act.bin .data/layer1_wgrad.bin .data/layer6_wgrad.bin > /tmp/one.bin
for i in $(seq 8); do cat /tmp/one.bin; done | head -c $((256 * 1048576)) > /tmp/real256.bin
bash scripts/ab-codec.sh .devrun/old.tar.gz '*Lossless*' .devrun/s22e.configs > /dev/null
T=build-device/tests/codec/codec_gpu_tests
{ echo "== general"; CCLZ_LOSSLESS_PATH=general $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== staged, 1 warp per chunk"; CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=1 $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== staged, 2 warps per chunk"; CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=2 $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== staged, 4 warps per chunk"; CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=4 $T --gtest_filter='Lossless*:*/LosslessGpu.*' --gtest_brief=1 2>&1 | tail -1
  echo "== staged, pdl off"; CCLZ_PDL=0 CCLZ_LOSSLESS_PATH=staged $T --gtest_filter='LosslessGpuV2*:LosslessGpuRealTensors.*:All/LosslessGpu.*_n16777216_*' --gtest_brief=1 2>&1 | tail -1
  for s in 1M 4M 16M 64M; do echo "== bf16 $s, staged 4 warps, check on, 200 calls"
    CCLZ_LOSSLESS_PATH=staged CCLZ_LOSSLESS_ENCODE_WARPS=4 build-device/tools/cclz-perf/cclz-perf --op codec --codec lossless --device gpu -d bf16 -b $s -e $s -n 200 -w 1 -c 1 --batch 2>&1 | grep -v "^#" | tail -1; done
  echo "== real tensors, index, check on"
  build-device/tools/cclz-perf/cclz-perf --op codec --codec lossless --device gpu --input .data/index.json -n 3 -w 1 -c 1 2>&1 | grep -v "^#" | tail -20
} > "$OUT/tests-more.log" 2>&1
# The mutation check: the same test on a tree whose sums count one chunk too many must fail.
rm -rf /tmp/mut && mkdir -p /tmp/mut && tar -xzf .devrun/mut.tar.gz -C /tmp/mut
( cmake -S /tmp/mut -B /tmp/mut/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" > /tmp/mut.log 2>&1 &&
  ninja -C /tmp/mut/build -j16 codec_gpu_tests >> /tmp/mut.log 2>&1 ) || { echo "mutant build failed"; tail -5 /tmp/mut.log; }
{ echo "== mutant (sums one chunk too many): the new test must fail"
  /tmp/mut/build/tests/codec/codec_gpu_tests --gtest_filter='LosslessGpuScratch.ManyChunksAtOnce*' --gtest_brief=1 2>&1 | grep -E "Failure|call|PASSED|FAILED" | head -6
} >> "$OUT/tests-more.log" 2>&1
head -5 "$OUT/summary.txt"; grep "gpu tests" "$OUT/summary.txt"; cat "$OUT/tests-more.log"
grep -E "^== |^ +[0-9]+ |^  [a-z]" "$OUT/bench.log" | awk '/^==/{split($2,a,"/"); tag=a[1]; name=a[2]; next} {o=($1 ~ /^[0-9]+$/) ? 0 : 1; printf "%-14s %-8s %10s enc %8s dec %8s\n", name, tag, $(1+o), $(7+o), $(9+o)}'
