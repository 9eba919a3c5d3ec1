#!/usr/bin/env bash
# fp8 encode, round 11: whole segments compiled apart per grid (straight code), against the tree
# before it (4909686, from .devrun/old.tar), built side by side on one GPU: the new tree's fp8 GPU
# tests (frames byte for byte against the CPU reference), cclz-perf on both, alternated, then
# Nsight Compute on the new encode.
# Device tool, carry [".deps", ".data", ".devrun"]; made with: git archive -o .devrun/old.tar 4909686
#   bash bench/results/fp8-encode-whole-segments-h200/run.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
sum=$OUT/summary.txt; : >"$sum"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$sum"
t0=$SECONDS
rm -rf /tmp/old && mkdir -p /tmp/old && tar -xf .devrun/old.tar -C /tmp/old
cfg() { cmake -S "$1" -B "$2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" "${@:3}"; }
( cfg . build-device >/tmp/new.log 2>&1 && ninja -C build-device -j10 cclz-perf codec_gpu_tests >>/tmp/new.log 2>&1; echo "new build: $?" >>"$sum" ) &
( cfg /tmp/old /tmp/old/build -DCCLZ_BUILD_TESTS=OFF >/tmp/old.log 2>&1 && ninja -C /tmp/old/build -j6 cclz-perf >>/tmp/old.log 2>&1; echo "old build: $?" >>"$sum" ) &
wait
echo "builds: $((SECONDS - t0)) s" >>"$sum"
cat /tmp/new.log /tmp/old.log | grep -E "error|FAILED" | head -20 >>"$sum"
build-device/tests/codec/codec_gpu_tests --gtest_filter='*Fp8*' --gtest_brief=1 >"$OUT/tests.log" 2>&1
echo "fp8 gpu tests (new): exit $? -- $(grep -E 'PASSED|FAILED' "$OUT/tests.log" | head -5 | tr '\n' ' ')" >>"$sum"
echo "tests: $((SECONDS - t0)) s" >>"$sum"
: >"$OUT/bench.log"
run() {  # run TAG NAME ARGS
  local tag=$1 name=$2; shift 2
  local perf=build-device/tools/cclz-perf/cclz-perf
  [ "$tag" = old ] && perf=/tmp/old/build/tools/cclz-perf/cclz-perf
  echo "== $tag/$name: cclz-perf $*" >>"$OUT/bench.log"
  $perf "$@" --json "$OUT/j_${tag}_$name.json" >>"$OUT/bench.log" 2>&1
  echo "$tag $name: exit $?" >>"$sum"
}
g=(--op codec --codec fp8 --device gpu -b 4M -e 256M -f 4 -n 20 -w 5)
for rep in 1 2; do
  for tag in old new; do run $tag row1024_bf16_r$rep "${g[@]}" --fp8-row-elems 1024 -d bf16; done
done
for tag in old new; do
  run $tag auto_bf16 "${g[@]}" -d bf16
  run $tag row4096_bf16 "${g[@]}" --fp8-row-elems 4096 -d bf16
  run $tag row768_bf16 "${g[@]}" --fp8-row-elems 768 -d bf16
  run $tag row1024_fp16 "${g[@]}" --fp8-row-elems 1024 -d fp16
  run $tag e5m2_row1024_bf16 "${g[@]}" --fp8-format e5m2 --fp8-row-elems 1024 -d bf16
  run $tag tensors --op codec --codec fp8 --fp8-row-elems 768 --device gpu --input .data/index.json -n 20 -w 5
done
echo "bench: $((SECONDS - t0)) s" >>"$sum"
grep -E "^== |^ +[0-9]+ " "$OUT/bench.log" | head -80 >>"$sum"
(cd "$OUT" && tar -czf bench-json.tgz j_*.json && rm -f j_*.json)
OUT=/tmp/prof bash scripts/dev/profile.sh 256M --codec fp8 --fp8-row-elems 1024 -d bf16 >"$OUT/profile.txt" 2>&1
(cd /tmp/prof && tar -czf "$OUT/profile.tgz" ncu_encodeKernel.csv ncu_encodeKernel.details)
echo "profile: $((SECONDS - t0)) s" >>"$sum"
cat "$sum"
