#!/usr/bin/env bash
# fp8 E4M3 grid-aligned scale candidates: build new (working tree) and old (HEAD before the change),
# run the fp8 GPU tests on the new build, then the fp8 codec benchmarks old and new interleaved.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/cclz-out}; mkdir -p "$OUT"
log=$OUT/device.log; sum=$OUT/summary.txt; : >"$log"; : >"$sum"
nvidia-smi --query-gpu=name,clocks.max.sm,driver_version --format=csv,noheader | tee -a "$sum"
mkdir -p /tmp/old && tar -xf .devrun/old.tar -C /tmp/old  # git archive -o .devrun/old.tar e1922c1
t0=$SECONDS
( cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >/tmp/new.log 2>&1 &&
  ninja -C build-device -j10 cclz-perf codec_gpu_tests >>/tmp/new.log 2>&1; echo "new build: $?" >>"$sum" ) &
( cmake -S /tmp/old -B /tmp/old/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCLZ_CUDA_ARCHS=90a \
    -DCCLZ_DEPS_DIR="$PWD/.deps" -DCCLZ_SHARED_DATA="$PWD/.data" >/tmp/old.log 2>&1 &&
  ninja -C /tmp/old/build -j6 cclz-perf >>/tmp/old.log 2>&1; echo "old build: $?" >>"$sum" ) &
wait
echo "builds: $((SECONDS - t0)) s" >>"$sum"
cat /tmp/new.log /tmp/old.log | grep -E "error|FAILED" | head -20 >>"$sum"
build-device/tests/codec/codec_gpu_tests --gtest_filter='*Fp8*' --gtest_brief=1 >"$OUT/tests.log" 2>&1
echo "fp8 gpu tests: exit $? -- $(grep -E 'PASSED|FAILED' "$OUT/tests.log" | head -5 | tr '\n' ' ')" >>"$sum"
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
for rep in 1 2; do
  for tag in old new; do
    run $tag e4m3_bf16_r$rep --op codec --codec fp8 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  done
done
for tag in old new; do
  run $tag e4m3_row1024_bf16 --op codec --codec fp8 --fp8-row-elems 1024 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  run $tag e4m3_fp32 --op codec --codec fp8 --device gpu -d fp32 -b 4M -e 256M -f 4 -n 20 -w 5
  run $tag e5m2_bf16 --op codec --codec fp8 --fp8-format e5m2 --device gpu -d bf16 -b 4M -e 256M -f 4 -n 20 -w 5
  run $tag e4m3_tensors --op codec --codec fp8 --fp8-row-elems 768 --device gpu --input .data/index.json -n 20 -w 5
done
echo "bench: $((SECONDS - t0)) s" >>"$sum"
cd "$OUT" && tar -czf bench-json.tgz j_*.json && rm -f j_*.json
cd - >/dev/null
grep -E "^ *(4194304|16777216|67108864|268435456) " "$OUT/bench.log" | head -0
cat "$sum"
